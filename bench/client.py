"""The benches' HTTP client: one keep-alive connection to a kiln on loopback, and a load of
many at once."""

from __future__ import annotations

import http.client
import json
import threading
import time


class KilnClient:
    def __init__(self, port: int, timeout_s: float = 120):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)

    def get(self, path: str) -> bytes:
        self.conn.request("GET", path)
        response = self.conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"GET {path}: {response.status} {body[:300]!r}")
        return body

    def post_run(self, payload: bytes) -> tuple[float, dict]:
        """(seconds from sending the request to the end of the answer, the answer)."""
        started = time.perf_counter()
        self.conn.request("POST", "/run", payload, {"Content-Type": "application/json"})
        response = self.conn.getresponse()
        body = response.read()
        elapsed = time.perf_counter() - started
        if response.status != 200:
            raise RuntimeError(f"kiln answered {response.status}: {body[:300]!r}")
        return elapsed, json.loads(body)


def load(connect, run_once, clients: int, seconds: float) -> tuple[list, list[str], float]:
    """`clients` threads, each with its own client (`connect()`), calling `run_once(client)`
    back to back for `seconds`. Returns what the runs returned, the errors (a run that raised;
    its thread then connects again) and the seconds it took."""
    done, errors = [], []
    stop = time.monotonic() + seconds

    def client() -> None:
        conn = connect()
        while time.monotonic() < stop:
            try:
                done.append(run_once(conn))
            except Exception as error:  # noqa: BLE001 - counted and shown
                errors.append(repr(error))
                conn = connect()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done, errors, time.monotonic() - started
