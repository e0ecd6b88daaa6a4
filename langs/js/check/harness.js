'use strict';
// kiln's JavaScript harness: runs check/solution.js in kiln's `js` workspace (see ../README.md).
//
// - Harness mode, when check/asserts.json is {"arguments": [[arg, ...], ...]}: require the
//   solution, call solution(...args) for each list, print one JSON array line, exit 0.
// - Plain mode otherwise (or when loading defines no callable solution): the solution runs as
//   `node solution.js` run in check/ would run it: same stdout, stderr and exit status.
//
// The plain path only reads asserts.json and hands the solution to node's own entry point.

const fs = require('fs');
const Module = require('module');

const HERE = __dirname; // /sandbox/check
const SOLUTION = HERE + '/solution.js';
const HELD = '/sandbox/check/.kiln-held-stdout'; // kiln/native/kiln.h HELD_STDOUT, below /sandbox

if (process.argv[2] === '--template') {
  // kiln forks each prestarted task from here (Makefile `template`): serve() returns in every
  // forked task, in its slot, with descriptor 3 its go pipe; false once kiln is gone.
  const template = { exports: {} };
  process.dlopen(template, '/proc/self/fd/4');
  fs.closeSync(4);
  const v8 = require('v8');
  rehearse(template.exports);
  // A fork of node ends cleanly only where kiln's addon knows this node's ways (threads it joins
  // at exit, descriptors its exit uses): one child made as a task is, that uses libuv's pool, a
  // timer and a worker thread and ends as a run would, or no task is forked (kiln logs this and
  // spawns instead). Debian 12's node 18 is such a node: a forked task's worker never let it end.
  const child = template.exports.forkAlike();
  if (child === 0) {
    fs.readFile(__filename, () => setTimeout(() => {}, 1));
    new (require('worker_threads').Worker)('', { eval: true });
    return;
  }
  const ended = template.exports.waitFor(child);
  if (ended !== 0) {
    // said on descriptor 3, the zygote's socket, as kiln/zygote/template.py's UNAVAILABLE: not retried
    const why = `kiln: cannot fork tasks from this runtime: a fork of this node did not end cleanly (status ${ended})`;
    fs.writeSync(3, why);
    throw new Error(why);
  }
  const seed = template.exports.serve(3);
  if (seed === false) process.exit(0);
  // Math.random seeds itself at its first call from the isolate's generator, the same in every
  // forked task: this task's seed instead, then back to random for isolates made later (workers)
  v8.setFlagsFromString('--random-seed=' + seed);
  Math.random();
  v8.setFlagsFromString('--random-seed=0');
  // node took process.pid once, at the template's start
  Object.defineProperty(process, 'pid', { value: template.exports.pid(), enumerable: true, configurable: true, writable: false });
  process.argv[2] = '--prestarted';
}

// A run's first write to stdout makes a net.Socket on a pipe and formats with util: done once
// here, on a pipe of the template's own, so that node compiles those functions once and not in
// every fork (~3 ms of each run). Its socket and both ends are closed at once; what node still
// owes that socket (its 'close' event) happens in each fork, to that object alone.
function rehearse(template) {
  const net = require('net');
  const util = require('util');
  const [readEnd, writeEnd] = template.pipe();
  const out = new net.Socket({ fd: writeEnd, readable: false, writable: true });
  out.write(util.format('%s %d %j %o', 'kiln', 1, { a: [1] }, [new Map([[1, 'b']])]) + '\n');
  out.destroy();
  fs.closeSync(readEnd);
}

if (process.argv[2] === '--prestarted') {
  // Started ahead of the request (Makefile `prestart`): node's start-up is done; wait for the
  // byte kiln sends on descriptor 3 once the request's files are written.
  let got = 0;
  try {
    got = fs.readSync(3, Buffer.alloc(1), 0, 1, null);
  } catch (e) {
    // closed: as end-of-file
  }
  if (got === 0) process.exit(0); // the slot was closed before a request came
  fs.closeSync(3);
  process.argv.splice(2, 1);
}

process.chdir(HERE);
let data = null;
try {
  data = fs.readFileSync('asserts.json');
} catch (e) {
  // absent or unreadable: plain mode
}
// Without '"arguments"' (or a \u escape that could spell it) this is plain mode: no JSON.parse.
if (data === null || !(data.includes('"arguments"') || data.includes('\\u')) || !harness(data)) {
  data = null;
  plain();
}

function plain() {
  // As `node solution.js`: node's entry point loads it as the main module (require.main ===
  // module, CommonJS or ES module syntax alike), from a tick of its own so that no frame of
  // this file shows in the solution's stack traces.
  process.argv[1] = SOLUTION;
  process.nextTick(Module.runMain, SOLUTION);
}

// ---- harness mode ----

function harness(bytes) {
  let spec;
  try {
    spec = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)); // drops a BOM
  } catch (e) {
    return false; // not UTF-8, not JSON, or nested too deep
  }
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) return false;
  if (!Object.prototype.hasOwnProperty.call(spec, 'arguments')) return false;
  const calls = spec.arguments;
  if (!Array.isArray(calls) || !calls.every(Array.isArray)) return false;
  runCalls(calls);
  return true;
}

function runCalls(calls) {
  const util = require('util');
  const stdout = process.stdout;
  const realWrite = stdout.write;
  const realExit = process.exit;
  let chunks = [];
  let loading = true;
  // What loading prints is also written through to kiln's HELD_STDOUT (kiln/native/kiln.h), made
  // at its first write: a load ended abruptly (process.reallyExit, a kill, the timeout, an OOM)
  // leaves it there and kiln-init passes it on as stdout. Once loaded, it is unlinked (unhold).
  let held = -1; // its descriptor; -2: it could not be made (the report keeps the output alone)
  const hold = (bytes) => {
    try {
      if (held === -1) held = fs.openSync(HELD, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o600);
      if (held >= 0) fs.writeSync(held, bytes);
    } catch (e) {
      held = -2;
    }
  };
  const unhold = () => {
    if (held < 0) return;
    try {
      fs.unlinkSync(HELD);
      fs.closeSync(held);
    } catch (e) {
      // the solution's doing: its answer alone
    }
    held = -2;
  };

  // Everything written to process.stdout (console.log included) is captured from here on.
  stdout.write = function write(chunk, encoding, callback) {
    if (typeof encoding === 'function') {
      callback = encoding;
      encoding = undefined;
    }
    let bytes;
    if (typeof chunk === 'string') {
      bytes = Buffer.from(chunk, encoding || 'utf8');
    } else if (ArrayBuffer.isView(chunk)) {
      bytes = Buffer.from(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    } else {
      throw new TypeError('The "chunk" argument must be of type string or an instance of Buffer or Uint8Array');
    }
    chunks.push(bytes);
    if (loading) hold(bytes);
    if (typeof callback === 'function') process.nextTick(callback);
    return true;
  };
  const take = () => {
    const out = Buffer.concat(chunks);
    chunks = [];
    return out;
  };
  // Back to plain behaviour: what loading printed goes out as it is, stdout is restored.
  const release = () => {
    loading = false;
    unhold();
    stdout.write = realWrite;
    const out = take();
    if (out.length) realWrite.call(stdout, out);
  };
  // The process ends while loading (process.exit, an uncaught error): pass the output through.
  process.on('exit', () => {
    if (loading) release();
  });

  // require() the solution from a tick of its own: a load error is then uncaught as in plain
  // mode (node prints it with no frame of this file; status 1). The calls follow in the next tick.
  process.nextTick(require, SOLUTION);
  process.nextTick(afterLoad);

  function afterLoad() {
    const cached = require.cache[SOLUTION];
    if (cached === undefined || !cached.loaded) {
      release(); // it failed to load and the solution caught that itself: let node go on
      return;
    }
    const exported = cached.exports;
    let solution = exported;
    if (typeof solution !== 'function' && exported !== null && typeof exported === 'object') {
      if (typeof exported.solution === 'function') solution = exported.solution;
      else if (typeof exported.default === 'function') solution = exported.default;
    }
    if (typeof solution !== 'function') {
      release(); // loading was the whole run: node goes on as for a plain script
      return;
    }
    loading = false;
    unhold();
    callAll(solution);
  }

  function callAll(solution) {
    const items = [];
    const loaded = take();
    if (loaded.length) items.push('{"type":"output","value":' + JSON.stringify(loaded.toString('utf8')) + '}');

    // A call that would end the process is an error of that call instead.
    process.exit = function exit(code) {
      throw new Error(code === undefined ? 'process.exit()' : 'process.exit(' + String(code) + ')');
    };

    const record = (failed, value, elapsed) => {
      const text = failed ? JSON.stringify(message(value)) : toJSON(value);
      const time = (Number(elapsed) / 1e9).toFixed(7);
      const output = JSON.stringify(take().toString('utf8'));
      items.push('{"type":"' + (failed ? 'error' : 'result') + '","value":' + text + ',"time":"' + time + '","output":' + output + '}');
    };

    const finish = () => {
      realWrite.call(stdout, '[' + items.join(',') + ']\n');
      // Nothing the solution left behind (timers, 'exit' listeners) may print or change the status.
      process.exitCode = 0;
      if (typeof process.reallyExit === 'function') process.reallyExit(0);
      realExit.call(process, 0);
    };

    // Synchronous calls run one after the other in this tick; a returned promise (or thenable) is
    // awaited before the next call, and the loop goes on from its settlement.
    const next = (index) => {
      for (let i = index; i < calls.length; i++) {
        const start = process.hrtime.bigint();
        let value;
        try {
          value = solution(...calls[i]);
          if (value !== null && (typeof value === 'object' || typeof value === 'function') && typeof value.then === 'function') {
            settle(value).then(
              (result) => {
                record(false, result, process.hrtime.bigint() - start);
                next(i + 1);
              },
              (err) => {
                record(true, err, process.hrtime.bigint() - start);
                next(i + 1);
              },
            );
            return;
          }
        } catch (err) {
          record(true, err, process.hrtime.bigint() - start);
          continue;
        }
        record(false, value, process.hrtime.bigint() - start);
      }
      finish();
    };
    next(0);
  }

  function message(err) {
    try {
      return err instanceof Error ? String(err.message) : String(err);
    } catch (e) {
      try {
        return util.inspect(err);
      } catch (e2) {
        return '<unprintable error>';
      }
    }
  }

  // JSON the natural way (undefined -> null), BigInt as an exact number, anything JSON.stringify
  // refuses (a cycle) as util.inspect's text.
  function toJSON(value) {
    try {
      const text = JSON.stringify(value);
      return text === undefined ? 'null' : text;
    } catch (e) {
      // fall through
    }
    try {
      const mark = 'kiln-bigint-' + Math.random().toString(36).slice(2) + ':';
      const text = JSON.stringify(value, (key, v) => (typeof v === 'bigint' ? mark + v.toString() : v));
      if (text === undefined) return 'null';
      return text
        .split('"' + mark)
        .map((part, n) => (n === 0 ? part : part.replace('"', '')))
        .join('');
    } catch (e) {
      // fall through
    }
    try {
      return JSON.stringify(util.inspect(value));
    } catch (e) {
      return '"<unserialisable value>"';
    }
  }
}

// Waits for a returned thenable; an uncaught exception meanwhile, or an event loop with
// nothing left to settle it, fails the call instead of ending the run.
function settle(thenable) {
  return new Promise((resolve, reject) => {
    const onUncaught = (err) => {
      done();
      reject(err);
    };
    const onIdle = () => {
      done();
      reject(new Error('the returned promise never settled'));
    };
    const done = () => {
      process.removeListener('uncaughtException', onUncaught);
      process.removeListener('beforeExit', onIdle);
    };
    process.on('uncaughtException', onUncaught);
    process.on('beforeExit', onIdle);
    Promise.resolve(thenable).then(
      (v) => {
        done();
        resolve(v);
      },
      (e) => {
        done();
        reject(e);
      },
    );
  });
}
