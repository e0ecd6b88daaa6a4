"""What the tests in tests/langs_direct/ share: they run a language workspace's harness directly,
as kiln would but without a sandbox.

A test gets a fresh copy of `langs/<slug>/` in a tmp dir (`workspace`), writes the solution (and
asserts.json), and runs the workspace's test command (`make -n -s test`, run with
`/bin/sh -e -c` from the copy) with kiln's task environment: PATH=/usr/local/bin:/usr/bin:/bin,
HOME = the workspace.

A language's test file says what is its own (its solutions, what they print, its quirks); the
checks every harness passes the same way are the assert_* here, with `report` (the exact line a
harness prints, times masked) and the asserts.json variants the harnesses must not take for
theirs (NOT_THE_SHAPE, INVALID_JSON).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from kilntest import REPO

LANGS = REPO / "langs"
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
_ENV = {"PATH": SANDBOX_PATH, "LANG": "C.UTF-8"}
TIME = re.compile(r'"time":"\d+\.\d{7}"')
AB = '{"arguments": [[1, 2], [10, -3], [0, 0], [2.5, 0.25]]}'  # a+b's argument lists

# asserts.json that is not {"arguments": [[...], ...]}: the solution runs as a plain program
NOT_THE_SHAPE = [
    pytest.param('{"a": 2, "b": 3}', id="other-object"),
    pytest.param("[[1, 2]]", id="list"),
    pytest.param('{"arguments": [1, 2]}', id="list-of-numbers"),
    pytest.param('{"arguments": {"a": [1]}}', id="object-arguments"),
    pytest.param('{"arguments": [[1], 2]}', id="mixed"),
    pytest.param('"arguments"', id="string"),
    pytest.param("", id="empty"),
]
# asserts.json that is not JSON (or not UTF-8): the solution runs as a plain program
INVALID_JSON = ['{"arguments": [[1, 2]]', "{arguments: [[1, 2]]}", b'{"arguments": [["\xff"]]}']


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def outcome(self) -> tuple[int, str, str]:
        return self.returncode, self.stdout, self.stderr

    def items(self) -> list[dict]:
        """The harness's report: exactly one JSON array on one line."""
        assert self.stdout.endswith("\n") and self.stdout.count("\n") == 1, self.stdout
        report = json.loads(self.stdout)
        assert isinstance(report, list)
        return report

    def values(self) -> list:
        return [item["value"] for item in self.items()]

    def masked(self) -> str:
        """stdout with every item's "time" (7 decimals, checked) replaced by "T"."""
        return TIME.sub('"time":"T"', self.stdout)


class Workspace:
    def __init__(self, root: Path, solution_name: str, interpreter: str | None = None, prestarted: bool = False):
        """prestarted: run the workspace's `prestart` command as kiln runs it in a prestarted
        slot (started before the files exist, released by a byte on descriptor 3)."""
        self.root = root
        self.check = root / "check"
        self.solution_name = solution_name
        self.interpreter = interpreter  # what runs the solution bare (see bare)
        self.prestarted = prestarted
        made = subprocess.run(["make", "-n", "-s", "prestart" if prestarted else "test"], cwd=root, capture_output=True, text=True, check=True)
        self.command = made.stdout

    def run(self, solution: str | bytes, asserts: str | bytes | None = None, *, stdin: str = "") -> Result:
        """Write the request's files as kiln does and run the test command."""
        if self.prestarted:
            return self._run_prestarted(solution, asserts, stdin)
        self._write(solution, asserts)
        return self._exec(["/bin/sh", "-e", "-c", self.command], self.root, stdin)

    def _write(self, solution: str | bytes, asserts: str | bytes | None) -> None:
        data = solution.encode() if isinstance(solution, str) else solution
        (self.check / self.solution_name).write_bytes(data)
        asserts_path = self.check / "asserts.json"
        if asserts is None:
            asserts_path.unlink(missing_ok=True)
        else:
            asserts_path.write_bytes(asserts.encode() if isinstance(asserts, str) else asserts)

    def _run_prestarted(self, solution: str | bytes, asserts: str | bytes | None, stdin: str) -> Result:
        for stale in (self.check / self.solution_name, self.check / "asserts.json"):
            stale.unlink(missing_ok=True)  # kiln starts the command before the request's files exist
        go_r, go_w = os.pipe()
        try:
            proc = subprocess.Popen(["/bin/sh", "-e", "-c", self.command], cwd=self.root, env=_ENV | {"HOME": str(self.root)}, close_fds=False, preexec_fn=lambda: go_on_fd_3(go_r), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        finally:
            os.close(go_r)
        self._write(solution, asserts)
        data = stdin.encode()
        if len(data) < 65536:  # into the pipe before go, as a bare run finds it when it starts
            proc.stdin.write(data)
            proc.stdin.close()
            proc.stdin, data = None, None  # communicate() then only reads
        os.write(go_w, b"g")
        os.close(go_w)
        out, err = proc.communicate(data, timeout=60)
        return Result(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))

    def run_bare(self, *argv: str, stdin: str = "") -> Result:
        """The same files run without the harness, from check/ (e.g. `python3 solution.py`)."""
        return self._exec(list(argv), self.check, stdin)

    def bare(self, *, stdin: str = "") -> Result:
        """The last solution run bare: `<interpreter> <solution file>` from check/."""
        return self.run_bare(self.interpreter, self.solution_name, stdin=stdin)

    def _exec(self, argv: list[str], cwd: Path, stdin: str) -> Result:
        done = subprocess.run(argv, cwd=cwd, env=_ENV | {"HOME": str(self.root)}, input=stdin.encode(), capture_output=True, timeout=60)
        return Result(done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"))


def go_on_fd_3(go_r: int) -> None:
    """In the child, before exec: descriptors 0-2 and the go pipe on 3, as kiln lays them out."""
    os.dup2(go_r, 3)
    os.closerange(4, 2**31 - 1)


def copy_workspace(slug: str, dest: Path) -> Path:
    """A copy of langs/<slug>/ in dest (without node_modules and __pycache__)."""
    root = dest / slug
    shutil.copytree(LANGS / slug, root, ignore=shutil.ignore_patterns("node_modules", "__pycache__"))
    return root


def workspace(tmp_path: Path, slug: str, solution_name: str, interpreter: str, hint: str = "", prestarted: bool = False) -> Workspace:
    """A fresh copy of langs/<slug>/ whose solution file is check/<solution_name>; skips when
    interpreter is not installed ("<interpreter> is not installed<hint>")."""
    if not Path(interpreter).exists():
        pytest.skip(f"{interpreter} is not installed{hint}")
    return Workspace(copy_workspace(slug, tmp_path), solution_name, interpreter, prestarted)


def install(slug: str, interpreter: str) -> subprocess.CompletedProcess | None:
    """Runs langs/<slug>/install.sh (None when interpreter is not installed): for a session fixture."""
    if not Path(interpreter).exists():
        return None
    return subprocess.run([str(LANGS / slug / "install.sh")], capture_output=True, text=True, timeout=600)


def report(*calls: tuple, loading: str | None = None) -> str:
    """The exact line a harness prints, as Result.masked() shows it: an output item first when the
    solution printed `loading` while loading, then an item a call, each (type, value) or
    (type, value, output)."""
    items = [] if loading is None else [{"type": "output", "value": loading}]
    for kind, value, *output in calls:
        items.append({"type": kind, "value": value, "time": "T", "output": output[0] if output else ""})
    return json.dumps(items, ensure_ascii=False, separators=(",", ":")) + "\n"


def assert_simple_test_target(ws: Workspace) -> None:
    """The Makefile's `test` target: phony, no prerequisites, a one-line command that names no
    absolute path of the workspace."""
    assert ws.command.endswith("\n") and ws.command.count("\n") == 1, ws.command
    makefile = (ws.root / "Makefile").read_text()
    assert ".PHONY: test" in makefile
    assert re.search(r"^test:\s*$", makefile, re.M), "test must have no prerequisites"
    assert "CURDIR" not in makefile and str(ws.root) not in ws.command


def assert_reports(res: Result, *calls: tuple, loading: str | None = None) -> None:
    """The harness exited 0 and printed exactly report(*calls, loading=loading)."""
    assert (res.returncode, res.masked()) == (0, report(*calls, loading=loading)), res.stderr


def assert_a_plus_b(ws: Workspace, add: str) -> None:
    """add, the language's a+b, over AB: a result a call, nothing on stderr, each call under a second."""
    res = ws.run(add, AB)
    assert_reports(res, ("result", 3), ("result", 7), ("result", 0), ("result", 2.75))
    assert res.stderr == ""
    for item in res.items():
        assert float(item["time"]) < 1


def assert_output_per_call(ws: Workspace, solution: str, outputs: list[str]) -> None:
    """solution(n) prints in every way the language has, and fails after printing for n == 2:
    over [[1], [2], [3]] each call's item holds what it printed (outputs), the failed one too."""
    res = ws.run(solution, '{"arguments": [[1], [2], [3]]}')
    assert res.returncode == 0, res.stderr
    items = res.items()
    assert [i["output"] for i in items] == outputs
    assert [i["type"] for i in items] == ["result", "error", "result"]


def assert_stderr_left_alone(ws: Workspace, solution: str) -> None:
    """solution() prints "to stderr" on stderr and returns 1: stderr is not the call's output."""
    res = ws.run(solution, '{"arguments": [[]]}')
    assert res.stderr == "to stderr\n"
    assert res.masked() == report(("result", 1))


def assert_loading_output_comes_first(ws: Workspace, solution: str, loading: str) -> None:
    """solution prints loading while loading and adds: that output is an item of its own, first."""
    assert_reports(ws.run(solution, '{"arguments": [[1, 1]]}'), ("result", 2), loading=loading)


def assert_no_output_item_without_output_while_loading(ws: Workspace, add: str) -> None:
    res = ws.run(add, '{"arguments": []}')
    assert (res.returncode, res.stdout) == (0, "[]\n")


def assert_runner_payload_runs(ws: Workspace, payload: str) -> None:
    """The original runner's payload, a plain program that reads asserts.json ({"a": 2, "b": 3})
    and prints a + b, runs as such."""
    assert ws.run(payload, '{"a": 2, "b": 3}').outcome == (0, "5\n", "")


def assert_late_output_cannot_follow_the_report(ws: Workspace, solution: str) -> None:
    """solution() returns 1, leaving output to come after it (a thread, an exit hook): the report
    is all stdout has."""
    assert_reports(ws.run(solution, '{"arguments": [[]]}'), ("result", 1))


def assert_nothing_is_written_to_the_workspace(ws: Workspace, add: str) -> None:
    """Running twice leaves the workspace's files (node_modules aside) as the first run did."""

    def files() -> list[Path]:
        return sorted(p.relative_to(ws.root) for p in ws.root.rglob("*") if "node_modules" not in p.parts)

    ws.run(add, '{"arguments": [[1, 2]]}')
    before = files()
    ws.run(add, '{"arguments": [[1, 2]]}')
    assert files() == before
