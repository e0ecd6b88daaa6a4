"""The zygote's interpreter: small, and single-threaded (spawn.c borrows its memory until the
slot's exec), whatever `kiln serve` imported before it."""

from __future__ import annotations

import subprocess
import sys

from kiln.zygote import boot

# what serve runs before the zygote starts; the zygote must not carry it
SERVE_ONLY = ("threading", "subprocess", "gevent", "werkzeug", "site")

IMPORTS = """
import pickle, sys
sys.path[:] = sys.argv[1:]
import kiln.zygote.boot, kiln.zygote.zygote
print(" ".join(sorted(name for name in {names!r} if name in sys.modules)))
"""


def test_the_zygote_interpreter_imports_nothing_only_serve_needs():
    """subprocess imports threading: kiln.runtime must import it only where a command runs."""
    done = subprocess.run([sys.executable, "-I", "-S", "-c", IMPORTS.format(names=SERVE_ONLY), *boot.import_paths()], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []


def test_the_zygote_finds_kiln_and_its_dependencies_without_site():
    paths = boot.import_paths()
    assert paths[0] == boot.PACKAGE_ROOT and "" not in paths
    done = subprocess.run([sys.executable, "-I", "-S", "-c", "import sys; sys.path[:] = sys.argv[1:]; import prctl, kiln.zygote.slot, kiln.native", *paths], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
