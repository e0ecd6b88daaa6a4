"""kiln's Python harness: runs check/solution.py in kiln's `python` workspace (see ../README.md).

- Harness mode, when check/asserts.json is {"arguments": [[arg, ...], ...]}: load the solution as
  module `solution`, call solution(*args) for each list, print one JSON array line, exit 0.
- Plain mode otherwise (or when loading defines no callable `solution`): the solution runs as
  `python3 solution.py` run in check/ would run it: same stdout, stderr and exit status.

Every run pays for compiling this file (~5 us a line), so the code the plain path needs is all
that is compiled up front; the rest (error reporting, the harness mode) sits in the string _LAZY
and is compiled only when needed. The plain path imports nothing.
"""

import sys
from os import chdir

from _imp import _fix_co_filename

HERE = __file__.rpartition("/")[0]  # absolute (Python >= 3.9): /sandbox/check
SOLUTION = HERE + "/solution.py"
HELD = "/sandbox/check/.kiln-held-stdout"  # kiln/native/kiln.h HELD_STDOUT, below /sandbox


class _Grab(BaseException):
    pass


def _grab(frame, event, arg):
    sys.settrace(None)
    raise _Grab(frame.f_code)


def _compile(source, filename):
    # = compile(source, filename, "exec", dont_inherit=True) minus its fixed cost: the builtin
    # compile() builds the whole `ast` class hierarchy on its first call (~0.6 ms) while exec()
    # of source text does not. So exec() the text with a trace hook that stops its module frame
    # before the first instruction and hands back the code object, then set its file name. A
    # coding cookie or BOM is honoured as by compile(). Anything unexpected falls back on
    # compile(), which also raises a SyntaxError with the right file name.
    code = None
    sys.settrace(_grab)
    try:
        exec(source, {"__builtins__": {}})  # no builtins: inert even if the hook never fired
    except _Grab as grabbed:
        code = grabbed.args[0]
    except BaseException:
        pass
    sys.settrace(None)
    if code is None or code.co_filename != "<string>" or code.co_name != "<module>":
        return compile(source, filename, "exec", dont_inherit=True)
    _fix_co_filename(code, filename)
    return code


def _load():
    """Compile and run _LAZY into this module's globals, with its line numbers in this file."""
    with open(__file__, encoding="utf-8") as f:
        mine = f.read()
    offset = mine.count("\n", 0, max(mine.find(_LAZY), 0))
    exec(_compile("\n" * offset + _LAZY, __file__), globals())


_LAZY = r'''
import os


def _report(exc):
    """Print exc as the interpreter prints an uncaught exception, without this file's frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    exc.__traceback__ = tb  # the interpreter prints the exception's own traceback
    sys.excepthook(type(exc), exc, tb)


def _die(exc):
    """End the process as the interpreter would for exc left uncaught by the solution."""
    if isinstance(exc, SystemExit):
        raise exc  # the interpreter's own handling: exit status, message
    _report(exc)
    if isinstance(exc, KeyboardInterrupt):  # finalise, then die by SIGINT, as the interpreter does
        import atexit
        import signal

        atexit._run_exitfuncs()
        for stream in sys.stdout, sys.stderr:
            try:
                stream.flush()
            except BaseException:
                pass
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    sys.exit(1)


def _cannot_open(e):
    sys.stderr.write(f"{sys.orig_argv[0]}: can't open file {SOLUTION!r}: [Errno {e.errno}] {e.strerror}\n")
    sys.exit(2)


# ---- harness mode ----

_DUMPS = {"ensure_ascii": False, "separators": (",", ":"), "allow_nan": False}


def _text(s):
    return json.dumps(s, ensure_ascii=False)


def _default(o):
    """json's fallback: sets and other list-like values as lists, anything else as its repr."""
    if isinstance(o, (set, frozenset)):
        try:
            return sorted(o)
        except Exception:
            return list(o)
    if isinstance(o, (range, type({}.keys()), type({}.values()), type({}.items()), collections.deque)):
        return list(o)
    if callable(getattr(type(o), "tolist", None)):  # numpy arrays and scalars, array.array
        return o.tolist()
    return repr(o)


def _key(k):
    if isinstance(k, str):
        return str(k)
    if k is None or k is True or k is False:
        return json.dumps(k)
    if isinstance(k, int):
        return int.__repr__(k)
    if isinstance(k, float):
        return float.__repr__(k)
    return repr(k)


def _jsonable(v):
    """v as plain JSON data: non-finite floats as null, any dict key as a string."""
    if v is None or v is True or v is False or type(v) is str or type(v) is int:
        return v
    if isinstance(v, float):
        return float(v) if v - v == 0 else None
    if isinstance(v, int):
        return int(v)
    if isinstance(v, str):
        return str(v)
    if isinstance(v, dict):
        return {_key(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    d = _default(v)
    return d if type(d) is str else _jsonable(d)


def _value(value):
    """The JSON text of a returned value; never raises."""
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # a huge int is a number, not an error
    try:
        try:
            return json.dumps(value, default=_default, **_DUMPS)
        except (TypeError, ValueError, RecursionError):  # odd keys, NaN, cycles
            pass
        try:
            return json.dumps(_jsonable(value), **_DUMPS)
        except BaseException:
            pass
        try:
            return _text(repr(value))
        except BaseException:
            return '"<unserialisable value>"'
    finally:
        sys.set_int_max_str_digits(limit)


def _message(e):
    name = type(e).__name__
    try:
        text = str(e)
    except BaseException:
        text = "<exception str() failed>"
    return f"{name}: {text}" if text else name


def _write(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _calls(data):
    """Run the harness mode; returns only when data is not in its shape (plain mode then)."""
    global collections, json
    import collections
    import io
    import json
    import time

    try:
        spec = json.loads(data)
    except (ValueError, RecursionError):  # ValueError: bad JSON, bad UTF-8
        return
    if type(spec) is not dict:
        return
    calls = spec.get("arguments")
    if type(calls) is not list or any(type(args) is not list for args in calls):
        return

    # For the whole harness mode fd 1 is a file, so whatever the solution prints (print,
    # sys.stdout.buffer, os.write(1, ...), child processes) is captured; the report goes to a
    # private duplicate of the real stdout. While the solution loads, that file is kiln's
    # HELD_STDOUT and print writes through to it: a load ended abruptly (os._exit, a kill, the
    # timeout) leaves what it printed there, and kiln-init passes it on as stdout. Once loaded,
    # the file is unlinked (held() below) and stays the capture, as a memory file would.
    sys.stdout.flush()
    real = os.dup(1)
    try:
        cap = os.open(HELD, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        cap = None
    if cap is None:
        try:
            cap = os.memfd_create("kiln-stdout", os.MFD_CLOEXEC)
        except OSError:
            import tempfile

            global _capfile
            _capfile = tempfile.TemporaryFile(buffering=0)
            cap = _capfile.fileno()
    os.dup2(cap, 1)
    buffered = sys.stdout
    try:
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding=buffered.encoding, errors=buffered.errors, write_through=True)
    except BaseException:
        pass
    through = sys.stdout

    def held():
        """Loading is over: the file is the harness's again, print buffers as it did."""
        try:
            os.unlink(HELD)
        except OSError:
            pass
        if sys.stdout is through:
            sys.stdout = buffered

    def take():
        """The bytes printed since the last take()."""
        try:
            sys.stdout.flush()
        except BaseException:
            pass
        size = os.fstat(cap).st_size
        chunks = []
        pos = 0
        while pos < size:
            chunk = os.pread(cap, size - pos, pos)
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
        if size:
            os.ftruncate(cap, 0)
        os.lseek(cap, 0, os.SEEK_SET)
        return b"".join(chunks)

    def release():
        """Back to plain behaviour: the captured bytes go out as they are, fd 1 is restored."""
        held()
        out = take()
        os.dup2(real, 1)
        os.close(real)
        if out:
            _write(1, out)

    # load check/solution.py as `import solution` would
    spec = sys.modules["_frozen_importlib_external"].spec_from_file_location("solution", SOLUTION)
    module = type(sys)("solution")
    ns = module.__dict__
    ns["__file__"] = SOLUTION
    ns["__cached__"] = spec.cached
    ns["__builtins__"] = __builtins__
    ns["__loader__"] = spec.loader
    ns["__spec__"] = spec
    sys.modules["solution"] = module
    try:
        with open(SOLUTION, "rb") as f:
            source = f.read()
    except OSError as e:
        release()
        _cannot_open(e)
    try:
        exec(_compile(source, SOLUTION), ns)
    except BaseException as e:
        release()
        _die(e)
    solution = ns.get("solution")
    if not callable(solution):
        release()
        sys.exit()  # loading was the whole run: end as a script that ran to its end

    held()
    perf = time.perf_counter
    items = []
    loaded = take()
    if loaded:
        items.append('{"type":"output","value":' + _text(loaded.decode("utf-8", "replace")) + "}")
    for args in calls:
        failed = False
        start = perf()
        try:
            value = solution(*args)
        except BaseException as e:  # SystemExit too: one call cannot end the run
            elapsed = perf() - start
            failed = True
            value = _message(e)
            del e
        else:
            elapsed = perf() - start
        if failed:
            item = '{"type":"error","value":' + _text(value)
        else:
            item = '{"type":"result","value":' + _value(value)
        del value
        output = take().decode("utf-8", "replace")
        items.append(item + ',"time":"%.7f","output":%s}' % (elapsed, _text(output)))

    # lone surrogates can only sit inside JSON strings, where "\udXXX" is the right escape
    _write(real, ("[" + ",".join(items) + "]\n").encode("utf-8", "backslashreplace"))
    try:
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(0)  # nothing the solution left behind (threads, atexit) may print or change the status
'''

if sys.argv[1:] in (["--prestarted"], ["--template"]):  # ahead of the request (Makefile `prestart`)
    # Load now, while nothing waits, what harness mode loads before it runs any solution: the
    # solution then finds the modules it would find (plain mode finds these three in addition).
    _load()
    import collections
    import json
    import time
    from os import close, read

    if sys.argv[1] == "--template":  # kiln forks each prestarted task from here (Makefile `template`)
        _machinery = sys.modules["_frozen_importlib_external"]
        _loader = _machinery.ExtensionFileLoader("_kiln_template", "/proc/self/fd/4")
        _module = _loader.create_module(_machinery.spec_from_file_location("_kiln_template", "/proc/self/fd/4", loader=_loader))
        sys.modules.pop("_kiln_template", None)
        close(4)
        # True in each forked task, in its slot with descriptor 3 its go pipe; False: kiln is gone
        _forked = _module.serve(3)
        del _machinery, _loader, _module
        if not _forked:
            raise SystemExit
        del _forked
    if not read(3, 1):
        raise SystemExit  # the slot was closed before a request came
    close(3)
    del sys.argv[1], close, read

chdir(HERE)
try:
    with open("asserts.json", "rb") as f:
        data = f.read()
except OSError:
    data = b""
# Without '"arguments"' (or a \u escape that could spell it) this is plain mode: no json import.
if b'"arguments"' in data or b"\\u" in data:
    _load()
    _calls(data)  # returns only for plain mode
del data

# Plain mode: solution.py is the __main__ script. It runs from this module's frame (not from a
# function's), so that it loses as little recursion depth as possible.
sys.argv[:] = ["solution.py"]
main = type(sys)("__main__")
ns = main.__dict__
ns["__file__"] = SOLUTION
ns["__cached__"] = None
ns["__annotations__"] = {}
ns["__builtins__"] = __builtins__
ns["__loader__"] = type(__loader__)("__main__", SOLUTION)
sys.modules["__main__"] = main
try:
    with open(SOLUTION, "rb") as f:
        source = f.read()
except OSError as e:
    _load()
    _cannot_open(e)
try:
    exec(_compile(source, SOLUTION), ns)
except SystemExit:
    raise
except BaseException as e:
    if "_die" not in globals():
        _load()
    _die(e)
