"""Blocking work off the front's event loop: disk writes and reads of the file store and the
builds' layers, a large layer's parsing, large comparisons' setup. gevent's thread pool runs
it; the calling greenlet waits, every other request goes on (a thread that holds the GIL gives
it up every switch interval, 5 ms)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import gevent

T = TypeVar("T")


def offload(function: Callable[..., T], *args) -> T:
    return gevent.get_hub().threadpool.apply(function, args)
