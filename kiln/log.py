"""One structured line per event on stderr (the journal under systemd): logfmt or JSON."""

from __future__ import annotations

import json
import os
import time

_LEVELS = ("debug", "info", "warning", "error")


def _logfmt_value(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if text == "" or any(c in text for c in ' ="\\') or not text.isprintable():
        return json.dumps(text)
    return text


class Log:
    def __init__(self, fmt: str = "logfmt", debug: bool = False, fd: int = 2):
        self.json = fmt == "json"
        self.debug_enabled = debug
        self.fd = fd

    def event(self, msg: str, level: str = "info", **fields) -> None:
        if level == "debug" and not self.debug_enabled:
            return
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
        record = {"time": stamp, "level": level, "msg": msg, **{k: v for k, v in fields.items() if v is not None}}
        if self.json:
            line = json.dumps(record, separators=(",", ":"), default=str)
        else:
            line = " ".join(f"{key}={_logfmt_value(value)}" for key, value in record.items())
        try:
            os.write(self.fd, (line + "\n").encode(errors="replace"))
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
