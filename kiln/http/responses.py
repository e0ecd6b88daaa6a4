"""What every route answers with: JSON bodies in the contract's compact form, the error body, and
the statuses and headers the front shares between its modules (api.py, files_api.py, server.py)."""

from __future__ import annotations

import json

from werkzeug.wrappers import Response

JSON = "application/json"
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
CLIENT_GONE = 499  # logged only: nobody is left to read it
CLOSE = {"Connection": "close"}  # what is left of the request is not read: the connection ends


class ReadTimeout(Exception):
    """A request (its line and headers: server.Handler; its body: App._read_body) did not
    arrive within RUN_READ_TIMEOUT of its first byte."""


def json_response(status: int, body) -> Response:
    return Response(_compact(body), status, content_type=JSON)


def error_response(status: int, error: str) -> Response:
    return json_response(status, {"error": error})
