"""kiln's native parts (C, built by `make -C kiln/native`, which scripts/setup.sh runs):

- kiln-init: a plain slot's init, a static program the zygote spawns (init.c);
- libkilnspawn.so: the zygote's spawn of it into new namespaces without forking itself
  (spawn.c), called here through ctypes;
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


def _spawn_function():
    global _lib
    if _lib is None:
        _lib = ctypes.CDLL(str(SPAWN_LIB), use_errno=True)
        _lib.kiln_spawn_init.restype = ctypes.c_int
        _lib.kiln_spawn_init.argtypes = [
            ctypes.c_ulong, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p),
            ctypes.POINTER(ctypes.c_int), ctypes.c_int,
        ]  # fmt: skip
    return _lib.kiln_spawn_init


def _strings(items: list[str]):
    array = (ctypes.c_char_p * (len(items) + 1))()
    array[:-1] = [os.fsencode(item) for item in items]
    return array


def spawn(flags: int, path: str, argv: list[str], env: dict[str, str], keep: list[int]) -> int:
    """`path` as a child in new namespaces (`flags`: CLONE_NEW*), inheriting `keep`, its signal
    dispositions at their defaults. Returns its pid; raises OSError if the clone or the exec
    failed (the child reaped)."""
    fds = (ctypes.c_int * len(keep))(*keep)
    envp = _strings([f"{key}={value}" for key, value in env.items()])
    pid = _spawn_function()(flags, os.fsencode(path), _strings(argv), envp, fds, len(keep))
    if pid < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"spawning {path}: {os.strerror(error)}")
    return pid


def probe_lower(scratch: str) -> bool:
    """Whether this kernel mounts an overlay whose lower layer is a detached clone of a folder
    made in another mount namespace (6.15 and later), as each slot's overlay does on the zygote's
    clones (RootPlan.lower_held). `kiln-init probe-lower` answers, cloning `scratch` (an empty
    folder) and mounting in a mount namespace of its own: nothing of it outlives it."""
    pid = spawn(0, str(INIT), [str(INIT), "probe-lower", scratch], {}, [])
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def spawn_init(flags: int, argv: list[str], env: dict[str, str], keep: list[int]) -> int:
    """kiln-init as a child in new namespaces: see spawn."""
    return spawn(flags, str(INIT), argv, env, keep)
