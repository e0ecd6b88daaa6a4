"""POST /files, GET and DELETE /files/<id>: the judge's file store over HTTP (DESIGN.md, Judge
API, "File store"; the store itself is kiln/judge/files.py).

Where API keys are configured, a file is its uploader's (kiln/judge/files.py, "Owners"): another
key's GET, HEAD, DELETE or judge request finds no such file (404, 400 unknown file). Same rules as
/run for what comes before the body: 401 (RUN_API_KEYS), 415 (a Content-Encoding
other than identity), 400 (a Content-Length that is not a number), 413 (a Content-Length over
the limit: refused before reading). The body is streamed to the store in chunks, never whole in
memory, and must arrive within what is left of the request's RUN_READ_TIMEOUT (408 after); a
chunked body is refused (413) as soon as it passes the limit. Whatever ends an upload early (a
refusal, a timeout, a client that hangs up) removes what was written of it.
"""

from __future__ import annotations

import errno
import time

import gevent
from gevent import pywsgi
from werkzeug.wrappers import Response

from kiln.http.bodies import declared_length
from kiln.http.responses import CLIENT_GONE, CLOSE, Answer, ApiError, ReadTimeout, json_response
from kiln.judge.files import FILE_ID, StoreFull, TooLarge, UnknownFile

CHUNK = 1 << 16
BAD_ID = "file id must be sha256:<64 lowercase hex digits>"
OCTETS = "application/octet-stream"
_BAD_CHUNKS = getattr(pywsgi, "_InvalidClientInput", ())  # a malformed chunked body (an OSError too)


def on_upload(app, environ, info) -> Answer:
    owner = app.authorize(environ)
    store = app.files
    length = declared_length(environ, store.limit)
    if app.shutting_down:  # work a judge request would come with: /run's 503, the body unread
        raise ApiError(503, "shutting down", headers=CLOSE)
    deadline = environ.get("kiln.read_deadline")
    with store.upload(owner) as upload:
        try:
            info["bytes_in"] = 0
            with gevent.Timeout(max(0.0, deadline - time.monotonic()) if deadline else None, ReadTimeout):
                _receive(environ["wsgi.input"], upload, length, store.limit, info)
            stored = upload.commit()
        except ReadTimeout:
            raise ApiError(408, "request timeout", headers=CLOSE) from None
        except _BodyEnded as ended:
            if ended.gone:
                info["status"] = CLIENT_GONE
            raise ApiError(400, str(ended), headers=CLOSE) from None
        except TooLarge:
            raise ApiError(413, "payload too large", headers=CLOSE) from None
        except StoreFull:
            raise ApiError(507, "file store full", headers=CLOSE) from None
        except OSError as error:  # the disk's, not the client's (those are _BodyEnded)
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                app.log.error("file store: the disk is full", path=str(store.folder), error=str(error))
                raise ApiError(507, "file store full", headers=CLOSE) from None
            raise
    return json_response(201 if stored.created else 200, {"id": stored.id, "size": stored.size})


def on_file(app, environ, info, file_id: str) -> Answer | Response:
    owner = app.authorize(environ)
    if not FILE_ID.fullmatch(file_id):
        raise ApiError(400, BAD_ID)
    store = app.files
    if environ["REQUEST_METHOD"] == "DELETE":
        if not store.delete(file_id, owner):
            raise ApiError(404, "not found")
        response = Response(status=204)
        del response.headers["Content-Type"]
        return response
    try:
        file, size = store.open(file_id, owner)
    except UnknownFile:
        raise ApiError(404, "not found") from None
    response = Response(_FileBody(file), 200, mimetype=OCTETS, direct_passthrough=True)
    response.headers["Content-Length"] = str(size)
    response.headers["ETag"] = f'"{file_id}"'  # content-addressed: the id is the content
    return response


class _BodyEnded(Exception):
    """The body could not be read whole: the client hung up (gone) or sent malformed chunks."""

    def __init__(self, message: str, gone: bool):
        super().__init__(message)
        self.gone = gone


def _receive(stream, upload, length: int | None, limit: int, info: dict) -> None:
    """The body into `upload`, CHUNK bytes at a time: `length` bytes, or (chunked, or neither
    header: empty) up to its end, stopping once it passes `limit`; info["bytes_in"]: how much
    was read (for the access log, whatever ends the upload)."""
    while True:
        if length is None:
            want = min(CHUNK, limit - upload.size + 1)  # one byte past the limit tells it is over
        elif upload.size == length:
            return
        else:
            want = min(CHUNK, length - upload.size)
        try:
            chunk = stream.read(want)
        except _BAD_CHUNKS as error:
            gone = str(error).startswith("EOF")
            raise _BodyEnded("the request body ended before its last chunk" if gone else "the request body is not valid chunked encoding", gone) from None
        except OSError:  # pywsgi: "unexpected end of file while reading request" (or chunked data)
            raise _BodyEnded("the request body ended before its length" if length is not None else "the request body ended before its last chunk", True) from None
        if not chunk:
            if length is not None:  # a WSGI stream that ends short instead of raising
                raise _BodyEnded("the request body ended before its length", True)
            return
        info["bytes_in"] += len(chunk)
        upload.write(chunk)


class _FileBody:
    """A stored file as a WSGI body, CHUNK bytes at a time; closed by the server (also for HEAD,
    where it is never read)."""

    def __init__(self, file):
        self.file = file

    def __iter__(self):
        while chunk := self.file.read(CHUNK):
            yield chunk

    def close(self) -> None:
        self.file.close()
