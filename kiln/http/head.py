"""The head of a plain POST /run, read without pywsgi: the front's direct path (server.py).

A run's request is nearly always the same shape: `POST /run HTTP/1.1`, a few headers, a
Content-Length and a JSON body, all in the first segment the client sends. Parsing that head
here, into the WSGI environ keys the App reads, skips pywsgi's header parser (email.parser),
its WSGI plumbing and werkzeug's routing and Response: ~0.1 ms of a no-op run's 2.7 at one
connection, more when the client pauses between runs (bench/history/noop-path.md, stop 22).

Anything else is not this module's: `direct_run_environ` answers None and pywsgi reads the
request as before, so what HTTP allows beyond this shape (chunked or compressed bodies,
`Expect: 100-continue`, folded or repeated headers, HTTP/1.0, a query string) keeps one
reader and one set of answers.
"""

from __future__ import annotations

import re

REQUEST_LINE = b"POST /run HTTP/1.1"
HEAD_END = b"\r\n\r\n"
HEADERS_MAX = 100  # http.client's limit, which pywsgi answers past
# RFC 9110's token, and no "_": pywsgi drops a header named with one (it would pass for another
# header's name once mapped to a WSGI key)
_NAME = re.compile(rb"[!#$%&'*+.^`|~0-9A-Za-z-]+")
# what only pywsgi's path handles: a body not counted by Content-Length, an interim answer owed,
# a protocol switch
_NOT_DIRECT = frozenset((b"transfer-encoding", b"expect", b"upgrade", b"content-encoding"))
_CONNECTION = {b"": False, b"keep-alive": False, b"close": True}  # value -> the client closes after


def direct_run_environ(buffered: bytes) -> tuple[dict[str, str], int, bool] | None:
    """(environ keys, the head's length in bytes, whether the connection closes after the
    answer) of a plain POST /run whose whole head is in `buffered`, else None."""
    if not buffered.startswith(REQUEST_LINE + b"\r\n"):
        return None
    end = buffered.find(HEAD_END)
    if end < 0:
        return None
    lines = buffered[len(REQUEST_LINE) + 2 : end].split(b"\r\n")  # no header at all: [b""], refused below
    if len(lines) > HEADERS_MAX:
        return None
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/run", "QUERY_STRING": "", "SERVER_PROTOCOL": "HTTP/1.1"}
    close = False
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not _NAME.fullmatch(name):
            return None  # a folded line (leading space), a bad name, no colon: pywsgi's to answer
        name = name.lower()
        value = value.strip(b" \t")
        if name in _NOT_DIRECT:
            return None
        if name == b"connection":
            close = _CONNECTION.get(value.lower())
            if close is None:
                return None
        key = _environ_key(name)
        if key in environ:
            return None  # repeated: pywsgi joins them
        environ[key] = value.decode("latin-1")
    length = environ.get("CONTENT_LENGTH")
    if length is None or not length.isdigit() or not length.isascii():
        return None
    return environ, end + len(HEAD_END), close


def _environ_key(name: bytes) -> str:
    if name == b"content-length":
        return "CONTENT_LENGTH"
    if name == b"content-type":
        return "CONTENT_TYPE"
    return "HTTP_" + name.decode("ascii").upper().replace("-", "_")
