"""kiln's HTTP API as `kiln judge` uses it (kiln/judgecli.py): the file store's HEAD and POST,
and POST /judge read as a stream (DESIGN.md, "Judge API, round 2", Streaming): `Accept:
application/x-ndjson`, each line handed over as it comes (the compile line, a line per test),
the `done` line's answer returned. A server that answers whole (an older kiln) is read whole.
Every failure is a UsageError whose words say what to do."""

from __future__ import annotations

import http.client
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_URL = "http://127.0.0.1:4040"
CONNECT_TIMEOUT = 10
FILES_TIMEOUT = 120  # seconds an answer of /files may take; /judge takes as long as its tests do
BUSY_RETRIES = 5
NDJSON = "application/x-ndjson"


class UsageError(Exception):
    """Exit 2; the message says what to do."""


class Api:
    def __init__(self, url: str, key: str | None):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"--url {url!r} is not an http:// or https:// address (e.g. {DEFAULT_URL})")
        self.url, self.parts = url.rstrip("/"), parts
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}

    def call(self, method: str, path: str, body=None, headers: dict | None = None, timeout: float | None = FILES_TIMEOUT, heard: Callable[[dict], None] | None = None) -> tuple[int, bytes | dict, http.client.HTTPMessage]:
        """One request: its status, body and headers; with `heard`, a 200 streamed as NDJSON is
        read line by line and its body is the `done` line's answer (a dict)."""
        kind = http.client.HTTPSConnection if self.parts.scheme == "https" else http.client.HTTPConnection
        conn = kind(self.parts.hostname, self.parts.port, timeout=CONNECT_TIMEOUT)
        try:
            try:
                conn.connect()
            except OSError as error:
                raise UsageError(f"server not reachable at {self.url} ({reason(error)}): start it with `kiln serve`, or give its address with --url") from None
            conn.sock.settimeout(timeout)
            try:
                conn.request(method, self.parts.path.rstrip("/") + path, body=body, headers={**self.headers, **(headers or {})})
                response = conn.getresponse()
                if heard is not None and response.status == 200 and response.headers.get_content_type() == NDJSON:
                    return response.status, self._streamed(response, heard, f"{method} {path}"), response.headers
                return response.status, response.read(), response.headers
            except (OSError, http.client.HTTPException) as error:
                raise UsageError(f"the connection to {self.url} broke during {method} {path} ({reason(error)}): is the server running? retry") from None
        finally:
            conn.close()

    def _streamed(self, response: http.client.HTTPResponse, heard: Callable[[dict], None], what: str) -> dict:
        """The stream's lines handed to `heard` until `done` (its answer returned) or `error`."""
        for raw in iter(response.readline, b""):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
                event = line.pop("event")
            except (ValueError, KeyError, TypeError, AttributeError):
                raise UsageError(f"{what}: the server's stream has a line that is not an event ({raw[:80]!r}): is {self.url} a kiln server?") from None
            if event == "done":
                return line
            if event == "error":
                raise UsageError(f"{what} failed on the server after the build ({line.get('error')}): its log says why; retry")
            heard({"event": event, **line})
        raise UsageError(f"the connection to {self.url} broke during {what} (the stream ended before its answer): is the server running? retry")

    def ensure_file(self, id_: str, path: Path) -> int | None:
        """Uploads `path` unless the server has `id_`: its size if uploaded, else None."""
        status, body, _ = self.call("HEAD", f"/files/{id_}")
        if status == 200:
            return None
        if status != 404:
            self.refused(status, body, f"HEAD /files/{id_}")
        size = path.stat().st_size
        with path.open("rb") as file:
            status, body, _ = self.call("POST", "/files", file, {"Content-Length": str(size), "Content-Type": "application/octet-stream"})
        if status == 413:
            raise UsageError(f"{path} is larger than the server's RUN_FILE_MAX: split the test or raise RUN_FILE_MAX")
        if status not in (200, 201):
            self.refused(status, body, "POST /files")
        if json.loads(body).get("id") != id_:
            raise UsageError(f"{path} is no longer what was read (its sha256 was {id_}): did it change meanwhile? run again")
        return size

    def judge(self, body: dict, paths: dict[str, Path], heard: Callable[[dict], None] = lambda line: None) -> dict:
        """POST /judge, streamed: `heard` gets each line before `done` (compile, then each test as
        it ends); the answer returned. A file the store lost since its upload is sent again, a
        429 retried (both are refused before the stream starts)."""
        raw = json.dumps(body).encode()
        resent = busy = 0
        while True:
            status, answer, headers = self.call("POST", "/judge", raw, {"Content-Type": "application/json", "Accept": NDJSON}, timeout=None, heard=heard)
            if isinstance(answer, dict):
                return answer
            error = error_of(answer)
            lost = re.match(r"unknown file (sha256:[0-9a-f]{64})", error)
            if status == 400 and lost and lost.group(1) in paths and resent < len(paths):
                self.ensure_file(lost.group(1), paths[lost.group(1)])
                resent += 1
            elif status == 429 and busy < BUSY_RETRIES:
                busy += 1
                wait = headers.get("Retry-After", "1")
                time.sleep(int(wait) if wait.isdigit() else 1)
            elif status != 200:
                self.refused(status, answer, "POST /judge")
            else:
                return json.loads(answer)  # an answer whole: a kiln from before streaming

    def refused(self, status: int, body: bytes, what: str):
        error = error_of(body)
        if status == 401:
            raise UsageError(f"{self.url} wants an API key (401): pass --api-key KEY or set KILN_API_KEY")
        if status == 404 and what.startswith("POST"):
            raise UsageError(f"{self.url} has no {what.split()[1]} (404): is it a kiln server with the judge API?")
        if status == 429:
            raise UsageError(f"{self.url} is busy (429: {error}): retry later")
        if status == 503:
            raise UsageError(f"{self.url} is shutting down (503): retry once it is back")
        if status >= 500:
            raise UsageError(f"{what} failed on the server ({status}: {error}): its log says why; retry")
        raise UsageError(f"{what} was refused ({status}): {error}")


def error_of(body: bytes) -> str:
    try:
        answer = json.loads(body)
        return answer["error"] + (f"\n{answer['detail']}" if answer.get("detail") else "")
    except (ValueError, KeyError, TypeError):
        return body[:200].decode("utf-8", "replace").strip() or "no details"


def reason(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error) or type(error).__name__
