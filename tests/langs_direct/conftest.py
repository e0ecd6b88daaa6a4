"""Run language workspaces' harnesses directly, as kiln would but without a sandbox.

A test gets a fresh copy of `langs/<slug>/` in a tmp dir, writes the solution (and asserts.json),
and runs the workspace's test command (`make -n -s test`, run with `/bin/sh -e -c` from the copy)
with kiln's task environment: PATH=/usr/local/bin:/usr/bin:/bin, HOME = the workspace.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LANGS = REPO / "langs"
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
TIME = re.compile(r'"time":"\d+\.\d{7}"')


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    def items(self) -> list[dict]:
        """The harness's report: exactly one JSON array on one line."""
        assert self.stdout.endswith("\n") and self.stdout.count("\n") == 1, self.stdout
        report = json.loads(self.stdout)
        assert isinstance(report, list)
        return report

    def masked(self) -> str:
        """stdout with every item's "time" (7 decimals, checked) replaced by "T"."""
        return TIME.sub('"time":"T"', self.stdout)


class Workspace:
    def __init__(self, root: Path, solution_name: str):
        self.root = root
        self.check = root / "check"
        self.solution_name = solution_name
        made = subprocess.run(["make", "-n", "-s", "test"], cwd=root, capture_output=True, text=True, check=True)
        self.command = made.stdout

    def run(self, solution: str | bytes, asserts: str | bytes | None = None, *, stdin: str = "") -> Result:
        """Write the request's files as kiln does and run the test command."""
        data = solution.encode() if isinstance(solution, str) else solution
        (self.check / self.solution_name).write_bytes(data)
        asserts_path = self.check / "asserts.json"
        if asserts is None:
            asserts_path.unlink(missing_ok=True)
        else:
            asserts_path.write_bytes(asserts.encode() if isinstance(asserts, str) else asserts)
        return self._exec(["/bin/sh", "-e", "-c", self.command], self.root, stdin)

    def run_bare(self, *argv: str, stdin: str = "") -> Result:
        """The same files run without the harness, from check/ (e.g. `python3 solution.py`)."""
        return self._exec(list(argv), self.check, stdin)

    def _exec(self, argv: list[str], cwd: Path, stdin: str) -> Result:
        env = {"PATH": SANDBOX_PATH, "HOME": str(self.root), "LANG": "C.UTF-8"}
        done = subprocess.run(argv, cwd=cwd, env=env, input=stdin.encode(), capture_output=True, timeout=60)
        return Result(done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"))


def _copy(slug: str, dest: Path) -> Path:
    root = dest / slug
    shutil.copytree(LANGS / slug, root, ignore=shutil.ignore_patterns("node_modules", "__pycache__"))
    return root


@pytest.fixture
def python_ws(tmp_path: Path) -> Workspace:
    if not Path("/usr/bin/python3").exists():
        pytest.skip("/usr/bin/python3 is not installed")
    return Workspace(_copy("python", tmp_path), "solution.py")


@pytest.fixture(scope="session")
def js_install() -> subprocess.CompletedProcess | None:
    """Runs langs/js/install.sh once per session (None without node)."""
    if not Path("/usr/bin/node").exists():
        return None
    return subprocess.run([str(LANGS / "js" / "install.sh")], capture_output=True, text=True, timeout=600)


@pytest.fixture
def js_ws(tmp_path: Path, js_install: subprocess.CompletedProcess | None) -> Workspace:
    if js_install is None:
        pytest.skip("/usr/bin/node is not installed")
    root = _copy("js", tmp_path)
    modules = LANGS / "js" / "node_modules"
    if modules.is_dir():  # kiln mounts the workspace with it: here a link does
        (root / "node_modules").symlink_to(modules, target_is_directory=True)
    return Workspace(root, "solution.js")


@pytest.fixture
def js_node_modules(js_ws: Workspace, js_install: subprocess.CompletedProcess) -> Path:
    """The workspace's node_modules; skips (saying why) when langs/js/install.sh could not install it."""
    modules = js_ws.root / "node_modules"
    if not modules.is_dir():
        pytest.skip(
            f"langs/js/node_modules is absent: langs/js/install.sh exited {js_install.returncode}: "
            f"{js_install.stdout.strip()} {js_install.stderr.strip()[-2000:]}"
        )
    return modules
