"""One structured line per event on stderr (the journal under systemd): logfmt or JSON."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

_LEVELS = ("debug", "info", "warning", "error")
ACCESS_BATCH_S = 0.02  # the longest an access line waits for others to be written with (batch_access)
ACCESS_BATCH_MAX = 64  # access lines held at most: then written at once


def _logfmt_value(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if text == "" or any(c in text for c in ' ="\\') or not text.isprintable():
        return json.dumps(text)
    return text


class Log:
    def __init__(self, fmt: str = "logfmt", debug: bool = False, fd: int = 2):
        # kept picklable: the zygote gets a copy (zygote/boot.py) before the front batches
        self.json = fmt == "json"
        self.debug_enabled = debug
        self.fd = fd
        self._held: list[str] = []  # access lines waiting for their batch's write (batch_access)
        # (schedule, busy) once the front batches (batch_access)
        self._batching: tuple[Callable[[Callable[[], None]], None], Callable[[], bool]] | None = None

    def batch_access(self, schedule: Callable[[Callable[[], None]], None], busy: Callable[[], bool]) -> None:
        """From now on the access lines (`access`) written while `busy()` wait to be written
        together: `schedule(flush)` is called when the first one waits and must have `flush`
        called soon (the front: a timer of its event loop, ACCESS_BATCH_S). Under load one write,
        and one wake-up of whoever reads the log (journald), serves many requests; a line written
        when not busy (one client's runs one after another) goes at once with those held, as
        does any other line."""
        self._batching = (schedule, busy)

    def access(self, **fields) -> None:
        """The one line of a request ("request")."""
        line = self._line("request", "info", fields)
        if self._batching is None or not self._batching[1]():
            self._write(line)
            return
        self._held.append(line)
        if len(self._held) == 1:
            self._batching[0](self.flush)
        elif len(self._held) >= ACCESS_BATCH_MAX:
            self.flush()

    def flush(self) -> None:
        if self._held:
            self._write("")

    def event(self, msg: str, level: str = "info", **fields) -> None:
        if level == "debug" and not self.debug_enabled:
            return
        self._write(self._line(msg, level, fields))

    def _line(self, msg: str, level: str, fields: dict) -> str:
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
        record = {"time": stamp, "level": level, "msg": msg, **{k: v for k, v in fields.items() if v is not None}}
        if self.json:
            return json.dumps(record, separators=(",", ":"), default=str) + "\n"
        return " ".join(f"{key}={_logfmt_value(value)}" for key, value in record.items()) + "\n"

    def _write(self, line: str) -> None:
        """`line` after the held access lines, in one write."""
        if self._held:
            line = "".join(self._held) + line
            self._held.clear()
        data = line.encode(errors="replace")
        try:
            while data:  # a pipe takes a long batch in parts
                data = data[os.write(self.fd, data) :]
        except OSError:
            pass  # a closed or full stderr must not take the service down

    def info(self, msg: str, **fields) -> None:
        self.event(msg, "info", **fields)

    def warning(self, msg: str, **fields) -> None:
        self.event(msg, "warning", **fields)

    def error(self, msg: str, **fields) -> None:
        self.event(msg, "error", **fields)

    def debug(self, msg: str, **fields) -> None:
        self.event(msg, "debug", **fields)
