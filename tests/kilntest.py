"""Test helpers: real kiln servers (root, real namespaces) started on free ports.

A module of its own, not conftest.py: several test folders have a conftest, and `import conftest`
would find whichever was imported first.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
KILN = REPO / ".venv" / "bin" / "kiln"
_instances = itertools.count(1)


def wait_until(predicate, timeout: float = 20.0, interval: float = 0.02) -> bool:
    """Poll predicate until it holds or timeout seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def child_titles(pid: int) -> dict[int, str]:
    """A process's children and their titles (/proc/<child>/cmdline, NULs as spaces); one that
    ended as we looked is left out."""
    titles = {}
    try:
        listed = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except FileNotFoundError:
        return titles
    for child in listed:
        try:
            titles[int(child)] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except FileNotFoundError:
            pass
    return titles


def burst(server: "Server", count: int, **fields) -> list[httpx.Response]:
    """`count` POST /run of `fields` at once, each on a connection of its own; the answers in order."""
    answers: list = [None] * count

    def one(i: int) -> None:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            answers[i] = client.post("/run", json=fields)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """A `kiln serve` process; its log lines are collected as parsed logfmt/JSON records."""

    def __init__(self, env: dict[str, str], argv: list[str] | None = None):
        self.port = free_port()
        self.instance = f"kiln-test-{os.getpid()}-{next(_instances)}"
        self.env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOST": "127.0.0.1",
            "PORT": str(self.port),
            "RUN_INSTANCE": self.instance,
            "RUN_CONCURRENCY": "4",
            "RUN_LOG_FORMAT": "json",
            **env,
        }
        self.records: list[dict] = []
        self.proc = subprocess.Popen(argv or [str(KILN), "serve"], env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = httpx.Client(base_url=self.url, timeout=60)

    def _read_log(self) -> None:
        for line in self.proc.stdout:
            text = line.decode(errors="replace").rstrip("\n")
            try:
                self.records.append(json.loads(text))
            except ValueError:
                self.records.append({"msg": "raw", "text": text})

    def logged(self, msg: str) -> list[dict]:
        return [r for r in self.records if r.get("msg") == msg]

    def wait_ready(self, timeout: float = 60) -> "Server":
        deadline = time.monotonic() + timeout
        while not self.logged("slots warm"):
            if self.proc.poll() is not None:
                self._reader.join(2)
                raise RuntimeError(f"kiln exited with {self.proc.returncode}: {self.records}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"kiln not ready after {timeout}s: {self.records}")
            time.sleep(0.02)
        return self

    def run(self, lang_slug: str = "python", solution_text: str = "", **fields) -> httpx.Response:
        return self.client.post("/run", json={"lang_slug": lang_slug, "solution_text": solution_text, **fields})

    def pids(self) -> dict[str, int]:
        """Front and zygote pids (the zygote is the front's only child)."""
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        return {"front": self.proc.pid, "zygote": int(children[0])}

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 40) -> int:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            self._reader.join(5)
