"""Whether a request's client is still there, while its run waits for a slot and runs.

Only a peer that is really gone counts: a client that half-closes (shutdown(SHUT_WR) once its
request is sent) still reads its answer. At end-of-file nothing on the wire tells the two apart
(both sent a FIN), so the client is sent bytes it takes in stride: the first bytes of its answer,
early (the connection's `probe`, server.py; the answer then skips them). A peer that closed
altogether answers them with a reset; that reset, or one at any time, is what `gone` means. This is
the same for HTTP/1.0 and HTTP/1.1 (an interim 1xx, which HTTP/1.0 forbids, is not needed).
Data instead of end-of-file is a pipelined next request: the client is there, and is looked at
again, every PIPELINED_CHECK_EVERY_S, for the end of what it sends (POLLRDHUP, with its next
request's bytes unread, where the next request's parser finds them): from there on, as at an
end-of-file. A streamed judge answer is probed between its chunks (a leading zero of the next
chunk's size); one streamed to HTTP/1.0 (not chunked) is noticed by its own next write.
"""

from __future__ import annotations

import select
from collections.abc import Callable

import gevent
import gevent.event
import gevent.socket

GONE_CHECK_FIRST_S = 0.05  # after the probe: how soon the connection is looked at for a reset
GONE_CHECK_MAX_S = 1.0  # and how far apart at most (a half-closed client may wait minutes for its answer)
PIPELINED_CHECK_EVERY_S = 0.25  # after a pipelined request's bytes: how often for the end of what it sends


class ClientWatch:
    """`gone` is set once the client of a request has left; stop() when the answer is ready.

    Until the connection becomes readable, which a client that waits for its answer never makes
    it, the watch is one io watcher of the hub: a greenlet is spawned only then (a greenlet per
    request cost ~30 us of the front's CPU, one no-op run's 3 %)."""

    def __init__(self, environ):
        self.gone = gevent.event.Event()
        self._client = environ.get("kiln.socket")
        self._probe: Callable[[], None] | None = environ.get("kiln.probe")
        self._readable = None
        self._watcher = None
        if self._client is not None:
            self._readable = gevent.get_hub().loop.io(self._client.fileno(), 1)
            self._readable.start(self._on_readable)

    def stop(self) -> None:
        if self._readable is not None:
            self._readable.close()
            self._readable = None
        if self._watcher is not None:
            self._watcher.kill(block=False)

    def _on_readable(self) -> None:
        self._readable.close()
        self._readable = None
        self._watcher = gevent.spawn(self._look, self._client)

    def _look(self, client) -> None:
        try:
            peeked = client.recv(1, gevent.socket.MSG_PEEK)
        except OSError:
            peeked = None  # reset: gone
        if peeked:  # a pipelined next request: the client is there until it stops sending
            while not _polled(client, select.POLLRDHUP | select.POLLERR | select.POLLHUP):
                gevent.sleep(PIPELINED_CHECK_EVERY_S)
        if peeked is not None:  # end-of-file: half-closed, or gone
            try:
                if self._probe is not None:
                    self._probe()
                wait_s = GONE_CHECK_FIRST_S
                while not _reset(client):
                    gevent.sleep(wait_s)
                    wait_s = min(2 * wait_s, GONE_CHECK_MAX_S)
            except OSError:
                pass  # the probe met a closed peer already
        self.gone.set()


def _reset(sock) -> bool:
    """Whether the connection was reset or closed both ways."""
    return _polled(sock, select.POLLERR | select.POLLHUP)


def _polled(sock, wanted: int) -> bool:
    """Whether any of `wanted` is the socket's state now (stdlib poll, without waiting)."""
    poller = select.poll()
    poller.register(sock.fileno(), wanted)
    return any(events & wanted for _, events in poller.poll(0))
