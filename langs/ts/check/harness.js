'use strict';
// kiln's TypeScript harness (see ../README.md): the request's TypeScript arrives as
// check/solution.js (Codebattle's file name). When node loads that file, esbuild compiles it to
// CommonJS (types stripped, `export default` as module.exports.default, inline source map so
// stack traces name the TypeScript lines); everything else is the js workspace's harness, copied
// as check/js-harness.js: harness mode and plain mode alike.
//
// A compile error (TypeScript syntax) prints esbuild's message on stderr and exits with status 1.

const Module = require('module');
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

const SOLUTION = path.join(__dirname, 'solution.js');
const ESBUILD = path.join(__dirname, '..', 'node_modules', 'esbuild', 'bin', 'esbuild');
const loadJs = Module._extensions['.js'];

Module._extensions['.js'] = function loadSolution(module, filename) {
  if (filename !== SOLUTION) return loadJs(module, filename);
  module._compile(compile(fs.readFileSync(filename)), filename);
};

function compile(source) {
  const done = spawnSync(
    ESBUILD,
    [
      '--loader=ts',
      '--format=cjs',
      '--platform=node',
      `--target=node${process.versions.node}`,
      '--sourcefile=solution.js',
      '--sourcemap=inline',
      '--log-level=error',
      '--color=false',
    ],
    {
      input: source,
      // one Go thread is plenty for one file; PATH etc. as the task's
      env: { ...process.env, GOMAXPROCS: '1' },
      stdio: ['pipe', 'pipe', 'inherit'],
      maxBuffer: 1 << 30,
    },
  );
  if (done.error || done.status !== 0) {
    if (done.error) process.stderr.write(`kiln: cannot run esbuild (${ESBUILD}): ${done.error.message}\n`);
    process.exit(1);
  }
  process.setSourceMapsEnabled(true);
  return done.stdout.toString('utf8');
}

if (process.argv[2] === '--prestarted') {
  // Started ahead of the request (Makefile `prestart`): node and esbuild's loader hook are
  // ready; wait for kiln's byte on descriptor 3 (written once the request's files are in place).
  // Done here, not left to the js harness copy, so a stale copy cannot run before the files.
  const go = Buffer.alloc(1);
  let got = 0;
  try {
    got = fs.readSync(3, go, 0, 1, null);
  } catch (e) {
    // closed: as end-of-file
  }
  if (got === 0) process.exit(0); // the slot was closed before a request came
  fs.closeSync(3);
  process.argv.splice(2, 1);
}

// `--template` (Makefile `template`): the js harness forks each task from here and waits for
// its go itself, this hook already loaded in every fork.
require('./js-harness.js');
