"""kiln/http/head.py: which heads the front answers on its direct POST /run path, and the WSGI
keys it gives the App; every other head is pywsgi's (None)."""

from __future__ import annotations

import pytest

from kiln.http.head import direct_run_environ

BODY = b'{"lang_slug":"python","solution_text":"print(1)"}'


def head(*headers: bytes, line: bytes = b"POST /run HTTP/1.1") -> bytes:
    return line + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + BODY


def test_a_plain_run_head_gives_the_keys_pywsgi_would():
    data = head(b"Host: kiln", b"Content-Type: application/json", b"Content-Length: 52", b"Authorization: Bearer  k ", b"X-Request-Id: abc")
    environ, length, closes = direct_run_environ(data)
    assert data[length:] == BODY
    assert not closes
    assert environ == {
        "REQUEST_METHOD": "POST", "PATH_INFO": "/run", "QUERY_STRING": "", "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "kiln", "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": "52",
        "HTTP_AUTHORIZATION": "Bearer  k", "HTTP_X_REQUEST_ID": "abc",
    }  # fmt: skip


@pytest.mark.parametrize(("value", "closes"), [(b"close", True), (b"Close", True), (b"keep-alive", False)])
def test_connection_close_is_told(value, closes):
    assert direct_run_environ(head(b"Content-Length: 52", b"Connection: " + value))[2] is closes


@pytest.mark.parametrize(
    "data",
    [
        head(b"Content-Length: 52")[:30],  # the head not all in yet
        head(b"Content-Length: 52", line=b"POST /run HTTP/1.0"),
        head(b"Content-Length: 52", line=b"POST /run?x=1 HTTP/1.1"),
        head(b"Content-Length: 52", line=b"POST /judge HTTP/1.1"),
        head(b"Content-Length: 52", line=b"GET /run HTTP/1.1"),
        head(b"Host: kiln"),  # no length
        head(b"Content-Length: 5x"),
        head(b"Content-Length: -1"),
        head(b"Content-Length: 52", b"Content-Length: 52"),  # repeated
        head(b"Transfer-Encoding: chunked"),
        head(b"Content-Length: 52", b"Expect: 100-continue"),
        head(b"Content-Length: 52", b"Content-Encoding: gzip"),
        head(b"Content-Length: 52", b"Connection: upgrade", b"Upgrade: h2c"),
        head(b"Content-Length: 52", b"X-A: 1", b" folded"),
        head(b"Content-Length: 52", b"X_A: 1"),  # pywsgi drops it
        head(b"Content-Length: 52", b"X A: 1"),
        head(b"Content-Length: 52", b"no colon"),
        head(b"Content-Length: 52", *(b"X-%d: 1" % i for i in range(100))),
    ],
)
def test_any_other_head_is_left_to_pywsgi(data):
    assert direct_run_environ(data) is None
