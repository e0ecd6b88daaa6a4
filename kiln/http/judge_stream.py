"""A streamed /judge answer (DESIGN.md, "Judge API, round 2", Streaming): with `Accept:
application/x-ndjson`, one JSON object per line as things end: the compile object, each test as
it ends, then the whole answer; a site shows "running on test 15" from it.

The judging runs in a greenlet of its own that hands what it hears to a queue; the request's
greenlet waits for the first thing that comes. A failure before the compile event (admission's
429, a checker that does not build, an unknown file, no room for the build) is answered as
without streaming, with its status: nothing has been sent yet. From the compile event on the
answer is `200`, chunked, and a failure is an `{"event":"error"}` line that ends it. A client that
leaves mid-stream cancels the request as a client of a plain answer does: the watch's `gone`
(set by the watch itself, or here when the server stops writing to a closed connection), then
the judging greenlet is waited for, so nothing is left running when the answer ends.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import gevent
import gevent.queue
from werkzeug.http import parse_accept_header
from werkzeug.wrappers import Response

from kiln.http.answers import compile_json, judged_test_json
from kiln.http.responses import CLIENT_GONE, NDJSON, Answer, ApiError, json_line
from kiln.http.watch import ClientWatch
from kiln.judge.answer import CompileResult, JudgeAnswer, TestResult
from kiln.log import Log


def wanted(environ) -> bool:
    """Whether the client asked for the stream: application/x-ndjson among its Accept header's
    types, named (a wildcard asks for the plain answer) and not refused (q=0)."""
    accepted = parse_accept_header(environ.get("HTTP_ACCEPT"))
    return any(value.lower() == NDJSON and quality > 0 for value, quality in accepted)


class _Heard:
    """The Judge's Progress, as lines in a queue (and, at the end, the answer or the failure)."""

    def __init__(self):
        self.queue: gevent.queue.Queue = gevent.queue.Queue()

    def compiled(self, compile: CompileResult) -> None:
        self.queue.put(("line", {"event": "compile", **compile_json(compile)}))

    def tested(self, index: int, test: TestResult) -> None:
        self.queue.put(("line", {"event": "test", "index": index, **judged_test_json(test)}))


def answer(
    judged: Callable[[_Heard], JudgeAnswer],
    watch: ClientWatch,
    info: dict,
    refused: Callable[[BaseException], Answer],
    finished: Callable[[JudgeAnswer], dict],
    log: Log,
) -> Answer | Response:
    """The streamed answer of one judge request. `judged(progress)` judges it; `refused(failure)`
    is the plain answer to a failure (or raises its ApiError), as without streaming;
    `finished(answer)` counts the answer and gives its JSON (kiln/http/answers.py), as the plain answer sends it."""
    heard = _Heard()

    def judging() -> None:
        try:
            heard.queue.put(("done", judged(heard)))
        except BaseException as failure:  # noqa: BLE001 - every end is said to the request's greenlet
            heard.queue.put(("failed", failure))

    worker = gevent.spawn(judging)
    first = heard.queue.get()
    if first[0] == "failed":  # nothing sent yet: the plain answer, its status kept
        watch.stop()
        return refused(first[1])
    info.update(streamed=True, status=200, bytes_out=0)  # the access line's, counted as lines are sent
    return Response(_Stream(first, heard.queue, worker, watch, info, refused, finished, log), 200, content_type=NDJSON)


class _Stream:
    """The response's body: the lines as they come. `close()` (werkzeug calls it once the
    response is done with, written whole or not, iterated or not) is where a client gone
    mid-stream cancels what is left: nothing of the request runs on after its answer."""

    def __init__(self, first, queue: gevent.queue.Queue, worker: gevent.Greenlet, watch: ClientWatch, info: dict, refused, finished, log: Log):
        self.first, self.queue, self.worker, self.watch, self.info = first, queue, worker, watch, info
        self.refused, self.finished, self.log = refused, finished, log

    def __iter__(self) -> Iterator[bytes]:
        what, payload = self.first
        while True:
            if what == "line":
                line = json_line(payload)
            elif what == "done":
                line = json_line({"event": "done", **self.finished(payload)})
            else:
                line = json_line({"event": "error", "error": _error_of(payload, self.refused, self.log)})
            self.info["bytes_out"] += len(line)
            yield line
            if what != "line":
                return
            what, payload = self.queue.get()

    def close(self) -> None:
        if not self.worker.dead:  # the server stopped writing: the client left mid-stream
            self.info.update(status=CLIENT_GONE, outcome="cancelled")
            self.watch.gone.set()
            self.worker.join()
        self.watch.stop()


def _error_of(failure: BaseException, refused, log: Log) -> str:
    """What the plain answer to a failure would have said in its `error`."""
    try:
        said = refused(failure)
    except ApiError as error:
        return error.error
    except Exception as error:  # noqa: BLE001 - a bug: logged as App.answer logs a 500's
        log.error("internal error", error=repr(error))
        return "internal"
    try:
        return json.loads(said.body)["error"]
    except (ValueError, KeyError, TypeError):
        return "internal"
