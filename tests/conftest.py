"""Shared fixtures: real kiln servers (root, real namespaces) started on free ports."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln import langs
from kilntest import Server, searchable


def pytest_configure(config):
    """A marker a language (`lang_<slug>`) for the rows of a language table: a host without the
    language leaves them out with -m 'not lang_<slug>' (scripts/stock-vm-guest.sh)."""
    for slug in langs.LANGUAGES:
        config.addinivalue_line("markers", f"lang_{slug}: a row of a language table that needs {slug} on the host")


@pytest.fixture
def start_server():
    """start_server(RUN_X="...") -> a ready Server, stopped (SIGTERM) after the test."""
    servers: list[Server] = []

    def start(ready: bool = True, **env: str) -> Server:
        server = Server({k: str(v) for k, v in env.items()})
        servers.append(server)
        return server.wait_ready() if ready else server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def server():
    """The bundled workspaces (langs/), shared by a test module."""
    instance = Server({}).wait_ready()
    yield instance
    instance.stop()


@pytest.fixture
def store_folder():
    """A file store's folder directly under /tmp (the front's own user must reach it, which
    pytest's 0700 tmp_path forbids), not yet made, and removed after the test."""
    import shutil
    import uuid

    folder = Path(f"/tmp/kiln-store-test-{uuid.uuid4().hex}")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def workspace(tmp_path):
    """workspace("recipe lines") -> a single-workspace folder whose `test` runs them;
    targets="...": more of its Makefile (a `prestart` target, say)."""

    def make(recipe: str, targets: str = "", **files: str) -> Path:
        folder = tmp_path / "ws"
        (folder / "check").mkdir(parents=True, exist_ok=True)
        lines = "".join(f"\t{line}\n" for line in recipe.splitlines())
        (folder / "Makefile").write_text(f".PHONY: test\ntest:\n{lines}{targets}")
        for name, text in files.items():
            (folder / name).write_text(text)
        return searchable(folder)

    return make


@pytest.fixture(scope="session", autouse=True)
def _runtime_folders_of_killed_zygotes():
    """A zygote killed by a test (SIGKILL: no clean-up) leaves /run/<instance>: remove this
    session's once every server is gone. Its slot cgroups must not be left: a test that kills a
    zygote starts the instance again (which removes them), and the session fails otherwise."""
    yield
    import os
    import shutil

    for folder in Path("/run").glob(f"kiln-test-{os.getpid()}-*"):
        shutil.rmtree(folder, ignore_errors=True)
    left = [path for root in _own_v1_cgroups() for path in root.glob(f"kiln-test-{os.getpid()}-*")]
    for path in left:
        for sub in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            sub.rmdir()
        path.rmdir()
    assert not left, f"slot cgroups left behind by this session (removed now): {left}"


def _own_v1_cgroups() -> list[Path]:
    """This process's cgroup in each v1 hierarchy kiln uses, and the rootless servers' subtree
    below it (kiln makes its instance's folder below them)."""
    found = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in ("memory", "pids", "cpuacct"):
            if controller in controllers.split(","):
                root = Path("/sys/fs/cgroup", controller, path.lstrip("/"))
                # and the subtree rootless servers are handed (scripts/rootless.sh)
                found += [folder for folder in (root, root / "kiln-rootless") if folder.is_dir()]
    return found
