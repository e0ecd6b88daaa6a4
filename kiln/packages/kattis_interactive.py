"""A Kattis interactive problem's output validator as kiln's interactor (kiln/packages/kattis.py).

Kattis runs the validator as the interactor: `validator input judge_answer feedback_dir [flags]`,
its stdin the submission's stdout and its stdout the submission's stdin; exit 42 accepted, 43
wrong answer, anything else a judge error; its words in feedback_dir/judgemessage.txt
(problemtools' judge/execute.py, _run_interactive). kiln's interactor is testlib's: `interactor
input record [answer]` with the same two pipes, exit 0 AC, 1 WA, 2 PE, else IE, its stderr the
test's checker_message (DESIGN.md, interactive problems). The interactor sent is an adapter
written here that runs the validator with Kattis's arguments on the pipes it was given, maps its
exit code and prints judgemessage.txt to stderr:

- a C++ validator: kattis_validation.ADAPTER built as an interactor (the validator's source
  included with its `main` renamed, run in a forked child);
- a Python validator: PYTHON_ADAPTER below, which runs it with the interpreter it runs on, in a
  child process, its main file renamed VALIDATOR_PY (the adapter is the build's main.py).

Verdicts: by who ended first, as Kattis judges (judge.py interactive_verdict): a validator that
ends first with a wrong answer (43, the adapter's 1) stands whatever the submission then does on
the closed pipe; a submission that ends first keeps its own verdict (TLE, RE, ...).
"""

from __future__ import annotations

import re
from pathlib import Path

from kiln.packages import kattis_validation
from kiln.packages.common import Helper, PackageError, read_text

PYTHON_SOURCES = (".py",)
VALIDATOR_PY = "kattis_validator.py"  # the Python validator's main file in the build (main.py is the adapter)
_PYTHON_MAIN = re.compile(r"""^if\s+__name__\s*==\s*['"]__main__['"]""", re.MULTILINE)


def bridged_interactor(folder: Path, flags: list[str]) -> Helper:
    """The interactor that runs the package's output validator (C++ or Python) as Kattis does."""
    validator = kattis_validation.validator_folder(folder)
    files = sorted(p for p in validator.iterdir() if p.is_file())
    if any(p.suffix in kattis_validation.CPP_SOURCES for p in files):
        return Helper("cpp", kattis_validation.adapter(flags, interactive=True), kattis_validation.cpp_files(validator))
    sources = [p for p in files if p.suffix in PYTHON_SOURCES]
    if not sources:
        others = ", ".join(p.name for p in files) or "nothing"
        raise PackageError(f"{validator} holds no C++ or Python source ({others}): kiln bridges interactive validators in C++ or Python")
    main = _python_main(validator, sources)
    given = [(VALIDATOR_PY, main)] + [(p.name, p) for p in sources if p != main]
    if any(name == "main.py" for name, _ in given):
        raise PackageError(f"{validator}: a module named main.py beside the validator's main file: kiln's adapter is the build's main.py; rename the module")
    return Helper("python", python_adapter(flags), tuple(given))


def _python_main(validator: Path, sources: list[Path]) -> Path:
    """The validator's main file: its only source, or the one that runs as __main__ (else one
    named after the folder, or validate.py, or main.py, as problem setters name it)."""
    if len(sources) == 1:
        return sources[0]
    with_main = [p for p in sources if _PYTHON_MAIN.search(read_text(p, "output validator's source"))]
    if len(with_main) == 1:
        return with_main[0]
    named = [p for p in sources if p.stem in (validator.name, "validate", "validator", "main")]
    if len(named) == 1:
        return named[0]
    listed = ", ".join(p.name for p in sources)
    raise PackageError(f"{validator}: which of {listed} is the validator's main file? kiln takes the one with `if __name__ == '__main__'`; give it to one of them")


def python_adapter(flags: list[str]) -> str:
    return PYTHON_ADAPTER.replace("FLAGS = []", f"FLAGS = {list(flags)!r}")


PYTHON_ADAPTER = '''"""Written by kiln judge: runs a Kattis interactive output validator as a testlib-convention
interactor. argv: input record [answer]; stdin and stdout are the submission's, passed on to the
validator as they are. Exit 42 -> 0 (AC), 43 -> 1 (WA), anything else -> 3 (IE);
judgemessage.txt goes to stderr (the test's message: stdout is the submission's)."""
import os
import subprocess
import sys
import tempfile

FLAGS = []
VALIDATOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "%s")


def main():
    if len(sys.argv) < 2:
        print("kiln's Kattis adapter: expected input record [answer]", file=sys.stderr)
        return 3
    answer = sys.argv[3] if len(sys.argv) > 3 else os.devnull  # kiln sends the answer when the test has one
    feedback = tempfile.mkdtemp(prefix="kattis-feedback-") + os.sep
    # the validator's stdin and stdout are this process's, inherited; it writes no .pyc (-B)
    validator = subprocess.Popen([sys.executable, "-B", VALIDATOR, sys.argv[1], answer, feedback, *FLAGS])
    nothing = os.open(os.devnull, os.O_RDWR)  # the pipes are the validator's alone now: the submission sees EOF when it ends
    os.dup2(nothing, 0)
    os.dup2(nothing, 1)
    status = validator.wait()
    try:
        with open(os.path.join(feedback, "judgemessage.txt"), errors="replace") as message:
            sys.stderr.write(message.read())
    except OSError:
        pass
    if status == 42:
        return 0
    if status == 43:
        return 1
    if status < 0:
        print(f"kiln: the output validator was killed by signal {-status}", file=sys.stderr)
    else:
        print(f"kiln: the output validator exited {status} (Kattis: 42 accepted, 43 wrong answer, else a judge error)", file=sys.stderr)
    return 3


sys.exit(main())
''' % VALIDATOR_PY
