"""Fixtures of the security suite: probes submitted through the real HTTP API.

- `server` (tests/conftest.py, module-scoped): the bundled workspaces; `run_py(source)` runs a
  Python probe there (slug "python": the harness runs it as a plain program, cwd /sandbox/check).
- `c_server` (module-scoped): a single-workspace kiln whose test command compiles the request's
  `check/solution.cpp` as C and execs it; `run_c(source)` runs a C probe there. Its service
  environment carries canary variables that must never reach a task.
- `kiln_server(**env)` (module-scoped factory): more servers with their own RUN_* settings,
  stopped at the end of the module.

Every helper asserts the HTTP status (200 unless told otherwise) and that /health is still 200
after the run: "the service stays healthy afterwards" is checked after every single probe.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kilntest import Server, searchable
from seclib import C_RECIPE, assert_healthy

TESTS = Path(__file__).resolve().parent.parent

# Service environment of c_server beyond what Server sets: none of it may reach a task.
CANARY_ENV = {
    "KILN_CANARY_SECRET": "do-not-leak-1f9c",
    "HOME": "/root",
    "USER": "root",
    "LOGNAME": "root",
    "MAIL": "/var/mail/root",
    "VIRTUAL_ENV": str(TESTS.parent / ".venv"),
    "SSH_AUTH_SOCK": "/tmp/ssh-kiln-canary/agent.1",
}


@pytest.fixture(scope="session")
def server_class():
    return Server


@pytest.fixture(scope="module")
def kiln_server(server_class):
    """kiln_server(**env) -> a ready Server; every server is stopped when the module ends."""
    started = []

    def start(**env) -> object:
        srv = server_class({k: str(v) for k, v in env.items()})
        started.append(srv)
        return srv.wait_ready()

    yield start
    for srv in started:
        srv.stop()


def make_workspace(folder: Path, recipe: str) -> Path:
    """Like tests/conftest.py's `workspace`, for module-scoped servers."""
    (folder / "check").mkdir(parents=True, exist_ok=True)
    lines = "".join(f"\t{line}\n" for line in recipe.splitlines())
    (folder / "Makefile").write_text(f".PHONY: test\ntest:\n{lines}")
    return folder


@pytest.fixture(scope="module")
def c_workspace(tmp_path_factory) -> Path:
    return searchable(make_workspace(tmp_path_factory.mktemp("c-ws"), C_RECIPE))


@pytest.fixture(scope="module")
def c_server(kiln_server, c_workspace):
    return kiln_server(RUN_WORKSPACE=str(c_workspace), RUN_LANGS="cpp", RUN_CONCURRENCY="4", RUN_UID_BASE="21000", **CANARY_ENV)


def _runner(srv, slug: str, client_harness: bool):
    def run(source: str, *, status: int = 200, timeout: str = "20s", **fields) -> dict:
        if client_harness:  # cpp's: an empty one, the workspace's recipe runs the solution alone
            fields.setdefault("checker_text", "")
        response = srv.run(lang_slug=slug, solution_text=source, timeout=timeout, **fields)
        assert response.status_code == status, response.text
        assert_healthy(srv)
        return response.json()

    return run


@pytest.fixture
def run_c(c_server):
    """run_c(C source, timeout="20s", stdin=...) -> the result body (status 200, health checked)."""
    return _runner(c_server, "cpp", client_harness=True)


@pytest.fixture
def run_py(server):
    """run_py(Python source, ...) -> the result body, on the module's `server` (langs/)."""
    return _runner(server, "python", client_harness=False)
