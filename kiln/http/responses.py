"""What every route answers with: JSON bodies in the contract's compact form, the error body and
ApiError, which any module of the front raises to answer with it (App.answer catches it), and
the statuses and headers the front shares between its modules (api.py, files_api.py, server.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.wrappers import Response

JSON = "application/json"
NDJSON = "application/x-ndjson"
TEXT = "text/plain"
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_compact_ascii = json.JSONEncoder(separators=(",", ":")).encode
CLIENT_GONE = 499  # logged only: nobody is left to read it
CLOSE = {"Connection": "close"}  # what is left of the request is not read: the connection ends
# how every answer of the front begins, whatever the request's version (HTTP/1.1 lets a server
# answer an HTTP/1.0 request so); the client watch sends it early as its probe (watch.py)
STATUS_LINE_START = b"HTTP/1.1 "


class ApiError(Exception):
    """An answer of `status` with {"error": error} and these headers: raised where the request
    is refused (a field of its body: fields.py; its preamble: bodies.py; the file store, the
    queue), answered by App.answer (or, a streamed /judge, judge_stream.py)."""

    def __init__(self, status: int, error: str, headers: dict[str, str] | None = None):
        super().__init__(error)
        self.status = status
        self.error = error
        self.headers = headers or {}


class ReadTimeout(Exception):
    """A request (its line and headers: server.Handler; its body: App._read_body) did not
    arrive within RUN_READ_TIMEOUT of its first byte."""


@dataclass
class Answer:
    """A whole answer in memory: every route's but a /files download (a werkzeug Response that
    streams the file). The WSGI path hands werkzeug `to_werkzeug()`; POST /run's direct path
    (server.py) sends `wire()`: the same bytes, werkzeug's reason phrases included."""

    status_code: int
    body: bytes
    content_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)  # beyond Content-Type and -Length

    @property
    def content_length(self) -> int:
        return len(self.body)

    def wire(self, date: bytes) -> bytes:
        """The status line, the headers and the body, joined once."""
        lines = [STATUS_LINE_START + b"%d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n" % (self.status_code, _REASONS[self.status_code], self.content_type.encode(), len(self.body))]
        lines += [b"%s: %s\r\n" % (name.encode("latin-1"), value.encode("latin-1")) for name, value in self.headers.items()]
        lines += (b"Date: %s\r\n\r\n" % date, self.body)
        return b"".join(lines)

    def closes(self) -> bool:
        return self.headers.get("Connection", "").lower() == "close"

    def to_werkzeug(self) -> Response:
        return Response(self.body, self.status_code, self.headers, content_type=self.content_type)


_REASONS = {code: reason.upper().encode() for code, reason in HTTP_STATUS_CODES.items()}


def json_response(status: int, body) -> Answer:
    try:
        return Answer(status, _compact(body).encode())
    except UnicodeEncodeError:  # a lone surrogate of the client's, quoted in an error: escaped
        return Answer(status, _compact_ascii(body).encode())


def json_line(body) -> bytes:
    """One line of an NDJSON stream (a streamed /judge answer): compact JSON, then a newline."""
    try:
        return _compact(body).encode() + b"\n"
    except UnicodeEncodeError:  # as json_response: a lone surrogate, escaped
        return _compact_ascii(body).encode() + b"\n"


def error_response(status: int, error: str) -> Answer:
    return json_response(status, {"error": error})
