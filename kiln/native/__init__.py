"""kiln's native parts (C, built by `make -C kiln/native`, which scripts/setup.sh runs):

- kiln-init: a plain slot's init, a static program the zygote spawns (init.c);
- libkilnspawn.so: the zygote's spawns of it into new namespaces without forking itself
  (spawn.c), called here through ctypes: once it has exec'd (spawn), or as soon as it exists
  (start_init, a slot's);
- the template modules: a language template's binding of template.c, loaded by the sandbox's
  own interpreter, never by kiln's: _kiln_template.so for /usr/bin/python3 (a CPython
  extension), kiln_template.node for /usr/bin/node (a Node-API addon), kiln_template_ruby.so
  and kiln_template_php.so for /usr/bin/ruby and /usr/bin/php (plain libraries their harnesses
  load with Fiddle and FFI). A language names its runtime's in kiln.langs (`template_module`).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build"
INIT = BUILD / "kiln-init"
SPAWN_LIB = BUILD / "libkilnspawn.so"
TEMPLATE_MODULES = {
    "python": BUILD / "_kiln_template.so",
    "node": BUILD / "kiln_template.node",
    "ruby": BUILD / "kiln_template_ruby.so",
    "php": BUILD / "kiln_template_php.so",
}
BUILT = (INIT, SPAWN_LIB, *TEMPLATE_MODULES.values())  # the Makefile's `all`, which owns their sources


class NotBuilt(Exception):
    pass


def check_built() -> None:
    """Refuse to start with native parts missing or older than their sources (a pull without
    `make setup`): a stale kiln-init would read recipes in an older form. The Makefile knows
    what each part is built from: `make -q` answers whether all are up to date."""
    import subprocess  # noqa: PLC0415 - only `kiln serve` and check-host ask; the zygote never

    missing = [path.name for path in BUILT if not path.exists()]
    try:
        stale = subprocess.run(["make", "-q", "-s", "-C", str(HERE)], stdin=subprocess.DEVNULL, capture_output=True).returncode != 0
    except OSError:
        stale = False  # no make on this host: nothing can rebuild them here anyway
    if missing or stale:
        what = f"{', '.join(missing)} missing" if missing else "older than their sources"
        raise NotBuilt(f"kiln's native parts in {BUILD} are {what}: run `make setup` (or `make -C {HERE}`)")


_lib = None

_CHILD_ARGTYPES = [
    ctypes.c_ulong, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p),
    ctypes.POINTER(ctypes.c_int), ctypes.c_int,
]  # fmt: skip


def _spawn_lib():
    global _lib
    if _lib is None:
        _lib = ctypes.CDLL(str(SPAWN_LIB), use_errno=True)
        for function in (_lib.kiln_spawn_init, _lib.kiln_start_init):
            function.restype = ctypes.c_int
            function.argtypes = _CHILD_ARGTYPES
        _lib.kiln_start_error.restype = ctypes.c_int
        _lib.kiln_start_error.argtypes = [ctypes.c_int]
    return _lib


def _strings(items: list[str]):
    array = (ctypes.c_char_p * (len(items) + 1))()
    array[:-1] = [os.fsencode(item) for item in items]
    return array


def _child(function, flags: int, path: str, argv: list[str], env: dict[str, str], keep: list[int]) -> int:
    fds = (ctypes.c_int * len(keep))(*keep)
    envp = _strings([f"{key}={value}" for key, value in env.items()])
    pid = function(flags, os.fsencode(path), _strings(argv), envp, fds, len(keep))
    if pid < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"spawning {path}: {os.strerror(error)}")
    return pid


def spawn(flags: int, path: str, argv: list[str], env: dict[str, str], keep: list[int]) -> int:
    """`path` as a child in new namespaces (`flags`: CLONE_NEW*), inheriting `keep`, its signal
    dispositions at their defaults. Returns its pid once it has exec'd; raises OSError if the
    clone or the exec failed (the child reaped)."""
    return _child(_spawn_lib().kiln_spawn_init, flags, path, argv, env, keep)


def probe_lower(scratch: str) -> bool:
    """Whether this kernel mounts an overlay whose lower layer is a detached clone of a folder
    made in another mount namespace (6.15 and later), as each slot's overlay does on the zygote's
    clones (RootPlan.lower_held). `kiln-init probe-lower` answers, cloning `scratch` (an empty
    folder) and mounting in a mount namespace of its own: nothing of it outlives it."""
    pid = spawn(0, str(INIT), [str(INIT), "probe-lower", scratch], {}, [])
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def spawn_init(flags: int, argv: list[str], env: dict[str, str], keep: list[int]) -> int:
    """kiln-init as a child in new namespaces, once it has exec'd: see spawn."""
    return spawn(flags, str(INIT), argv, env, keep)


def start_init(flags: int, argv: list[str], env: dict[str, str], keep: list[int]) -> int:
    """kiln-init as a child in new namespaces, as spawn_init, but returns as soon as the child
    exists, before its exec (a slot's spawn: the zygote does not wait for a CPU for it). Raises
    OSError if the clone failed; an exec that fails is the child's exit with 127 and its errno
    start_error's."""
    return _child(_spawn_lib().kiln_start_init, flags, str(INIT), argv, env, keep)


def start_error(pid: int) -> int:
    """The errno of start_init's child `pid` that exited without becoming kiln-init, or 0 (it
    did, or it is too long ago to tell: one of the last few starts is kept)."""
    return _spawn_lib().kiln_start_error(pid)
