"""What the tests in tests/langs_direct/ share: they run a language workspace's harness directly,
as kiln would but without a sandbox.

A test gets a fresh copy of `langs/<slug>/` in a tmp dir (`harness_workspace`), writes the
solution (and asserts.json), and runs the workspace's test command (`make -n -s test`, run with
`/bin/sh -e -c` from the copy) with kiln's task environment: PATH=/usr/local/bin:/usr/bin:/bin,
HOME = the workspace.

What each harness language is (`HARNESSES`: its solution file, its interpreter, its a+b and the
original runner's payload) is here; the behaviours every harness has are tables in
test_every_harness.py (one row a language), with `report` (the exact line a harness prints,
times masked) and the asserts.json variants the harnesses must not take for theirs
(NOT_THE_SHAPE, INVALID_JSON); test_<slug>_harness.py is what is a language's own.
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
    pytest.param('[{"arguments": [[1]]}]', id="nested"),
]
# asserts.json that is not JSON (or not UTF-8): the solution runs as a plain program
INVALID_JSON = ['{"arguments": [[1, 2]]', "{arguments: [[1, 2]]}", b'{"arguments": [["\xff"]]}', '{"arguments": [[01]]}']


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


_installs: dict[str, subprocess.CompletedProcess | None] = {}


def installed(slug: str) -> subprocess.CompletedProcess | None:
    """langs/<slug>/install.sh's run, once a session (None when the interpreter is not installed)."""
    if slug not in _installs:
        interpreter = HARNESSES[slug].interpreter
        ran = subprocess.run([str(LANGS / slug / "install.sh")], capture_output=True, text=True, timeout=600) if Path(interpreter).exists() else None
        _installs[slug] = ran
    return _installs[slug]


def install_said(ran: subprocess.CompletedProcess) -> str:
    return f"{ran.stdout.strip()} {ran.stderr.strip()[-2000:]}"


def report(*calls: tuple, loading: str | None = None) -> str:
    """The exact line a harness prints, as Result.masked() shows it: an output item first when the
    solution printed `loading` while loading, then an item a call, each (type, value) or
    (type, value, output)."""
    items = [] if loading is None else [{"type": "output", "value": loading}]
    for kind, value, *output in calls:
        items.append({"type": kind, "value": value, "time": "T", "output": output[0] if output else ""})
    return json.dumps(items, ensure_ascii=False, separators=(",", ":")) + "\n"



def assert_reports(res: Result, *calls: tuple, loading: str | None = None) -> None:
    """The harness exited 0 and printed exactly report(*calls, loading=loading)."""
    assert (res.returncode, res.masked()) == (0, report(*calls, loading=loading)), res.stderr


@dataclass(frozen=True)
class Harness:
    """A harness language: its solution file, what runs it bare, its a+b (a solution adding its
    two arguments), the original runner's payload (a plain program that reads asserts.json,
    {"a": 2, "b": 3}, and prints a + b); installs: its install.sh makes what the harness runs
    with (node_modules, the compiled harness), run once a session."""

    slug: str
    solution_name: str
    interpreter: str
    add: str
    runner_payload: str
    installs: bool = False


NODE = "/usr/bin/node"
HARNESSES = {
    "elixir": Harness(
        "elixir",
        "solution.exs",
        "/usr/bin/elixir",
        "defmodule Solution do\n  def solution(a, b), do: a + b\nend\n",
        # a JSON library would be needed (Debian's Elixir has none): this one reads it all the same
        """[_, a, b] = Regex.run(~r/"a":\\s*(\\d+),\\s*"b":\\s*(\\d+)/, File.read!("asserts.json"))
IO.puts(String.to_integer(a) + String.to_integer(b))
""",
        installs=True,
    ),
    "js": Harness(
        "js",
        "solution.js",
        NODE,
        "module.exports = (a, b) => a + b;\n",
        """const fs = require('fs');
const data = JSON.parse(fs.readFileSync('asserts.json', 'utf8'));
console.log(data.a + data.b);
""",
        installs=True,
    ),
    "php": Harness(
        "php",
        "solution.php",
        "/usr/bin/php",
        "<?php\nfunction solution($a, $b)\n{\n    return $a + $b;\n}\n",
        """<?php
$data = json_decode(file_get_contents('asserts.json'), true);
echo $data['a'] + $data['b'], "\\n";
""",
    ),
    "python": Harness(
        "python",
        "solution.py",
        "/usr/bin/python3",
        "def solution(a, b):\n    return a + b\n",
        """import json

with open("asserts.json") as f:
    data = json.load(f)
print(data["a"] + data["b"])
""",
    ),
    "ruby": Harness(
        "ruby",
        "solution.rb",
        "/usr/bin/ruby",
        "def solution(a, b)\n  a + b\nend\n",
        """require 'json'

data = JSON.parse(File.read('asserts.json'))
puts data['a'] + data['b']
""",
    ),
    "ts": Harness(
        "ts",
        "solution.js",
        NODE,
        "function solution(a: number, b: number): number {\n  return a + b;\n}\n\nexport default solution;\n",
        """import * as fs from 'fs';

const data: { a: number; b: number } = JSON.parse(fs.readFileSync('asserts.json', 'utf8'));
console.log(data.a + data.b);
""",
        installs=True,
    ),
}


def harness_workspace(slug: str, tmp_path: Path, prestarted: bool = False) -> Workspace:
    """A fresh copy of langs/<slug>/, with what its install.sh made; skips, saying why, where the
    host lacks the interpreter or the install failed to make what the harness needs."""
    harness = HARNESSES[slug]
    if not Path(harness.interpreter).exists():
        pytest.skip(f"{harness.interpreter} is not installed: run langs/{slug}/install.sh")
    root = copy_workspace(slug, tmp_path)
    if harness.installs:
        ran = installed(slug)
        modules = LANGS / slug / "node_modules"
        if slug == "elixir":
            assert ran.returncode == 0, ran.stderr  # the compiled harness is the harness
        elif slug == "ts" and not (modules / "esbuild").is_dir():
            pytest.skip(f"langs/ts/node_modules is absent: langs/ts/install.sh exited {ran.returncode}: {install_said(ran)}")
        if modules.is_dir():  # kiln mounts the workspace with it: here a link does
            (root / "node_modules").symlink_to(modules, target_is_directory=True)
    # ts's solution is compiled by the harness: there is no bare run of it
    return Workspace(root, harness.solution_name, None if slug == "ts" else harness.interpreter, prestarted)
