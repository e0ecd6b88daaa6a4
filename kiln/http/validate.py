"""POST /run's body, checked field by field into a RunRequest (or an ApiError with the status
and message the HTTP contract gives)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from kiln.runtime import Runtime
from kiln.units import format_duration_ms, format_size, parse_duration_ms, parse_size
from kiln.wire.protocol import Job, Limits


class ApiError(Exception):
    """An answer of `status` with {"error": error} and these headers."""

    def __init__(self, status: int, error: str, headers: dict[str, str] | None = None):
        super().__init__(error)
        self.status = status
        self.error = error
        self.headers = headers or {}


@dataclass(frozen=True)
class RunRequest:
    slug: str
    timeout_ms: int
    # ("solution" | "checker" | "asserts", UTF-8 bytes): the parts' names on the wire, "checker"
    # the client harness (checker_text)
    files: tuple[tuple[str, bytes], ...]
    stdin: bytes | None
    limits: Limits = Limits()  # `limits`: less memory, pids or output than the server's

    @property
    def job(self) -> Job:
        return Job(self.slug, self.timeout_ms, self.files, self.stdin, limits=self.limits)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


_decoder = json.JSONDecoder(parse_constant=_reject_constant)
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def utf8(field: str, text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, f"{field} is not valid UTF-8 text (it contains a lone surrogate)") from None


def _optional_text(body: dict, field: str) -> str | None:
    value = body.get(field)
    if value is not None and not isinstance(value, str):
        raise ApiError(400, f"{field} must be a string or null")
    return value


def decode_json_object(raw: bytes) -> dict:
    """A request body that must be one JSON object (NaN and Infinity are not JSON)."""
    try:
        body = _decoder.decode(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ApiError(400, "body is not UTF-8") from None
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python recurses
        raise ApiError(400, "body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "body must be a JSON object")
    return body


def parse_run(raw: bytes, runtime: Runtime) -> RunRequest:
    body = decode_json_object(raw)
    slug = body.get("lang_slug")
    if slug is None:
        raise ApiError(400, "lang_slug is required")
    if not isinstance(slug, str):
        raise ApiError(400, "lang_slug must be a string")
    solution = body.get("solution_text")
    if solution is None:
        raise ApiError(400, "solution_text is required")
    if not isinstance(solution, str):
        raise ApiError(400, "solution_text must be a string")
    client_harness = _optional_text(body, "checker_text")
    stdin = _optional_text(body, "stdin")
    asserts = body.get("asserts")
    if isinstance(asserts, (list, dict)):
        try:
            asserts = _compact(asserts)
        except ValueError:  # a number JSON allows and a double does not hold (1e400 reads as inf)
            raise ApiError(400, "asserts holds a number out of the range of a 64-bit float; send asserts as a string to pass it verbatim") from None
    elif asserts is not None and not isinstance(asserts, str):
        raise ApiError(400, "asserts must be a string, an array, an object or null")
    timeout_ms = _timeout(body.get("timeout"), runtime.config)
    limits = body.get("limits")
    if limits is not None and type(limits) is not dict:  # a wrong type: before the slug's rows
        raise ApiError(400, "limits must be an object (memory, pids, output)")
    files = [("solution", utf8("solution_text", solution))]
    client_harness_bytes = None if client_harness is None else utf8("checker_text", client_harness)
    asserts_bytes = None if asserts is None else utf8("asserts", asserts)
    stdin_bytes = None if stdin is None else utf8("stdin", stdin)

    workload = runtime.workloads.get(slug)
    if workload is None:
        raise ApiError(400, "unsupported lang_slug")
    if workload.language.has_client_harness:
        if client_harness_bytes is None:
            raise ApiError(400, "checker_text is required")
        files.append(("checker", client_harness_bytes))
    if asserts_bytes is not None:
        files.append(("asserts", asserts_bytes))
    return RunRequest(slug=slug, timeout_ms=timeout_ms, files=tuple(files), stdin=stdin_bytes, limits=_run_limits(limits, workload, runtime.config))


RUN_LIMITS = ("memory", "pids", "output")


def _run_limits(value: dict | None, workload, config) -> Limits:
    """/run's `limits` (DESIGN.md; an object, as parse_run checked): memory, pids and output,
    none above the server's."""
    if value is None:
        return Limits()
    unknown = sorted(set(value) - set(RUN_LIMITS))
    if unknown:
        raise ApiError(400, f"limits.{unknown[0]}: /run takes only memory, pids and output (a time limit is its timeout)")
    given = {key: value.get(key) for key in RUN_LIMITS}
    return Limits(
        memory=size_field(given["memory"], "limits.memory", workload.memory_max, low=1 << 20) if given["memory"] is not None else 0,
        pids=count_field(given["pids"], "limits.pids", workload.pids_max) if given["pids"] is not None else 0,
        output=size_field(given["output"], "limits.output", config.output_max, low=1) if given["output"] is not None else 0,
    )


def _timeout(value, config) -> int:
    return duration_field(value, "timeout", config.default_timeout_ms, config.timeout_max_ms)


# --- limits, as /run's `limits` and /judge's give them ---


def duration_field(value, field: str, default_ms: int, maximum_ms: int) -> int:
    """Every duration of a request (/run's timeout, /judge's limits and compile_timeout): a
    string such as "500ms", "2s" or "1m", above zero, at most `maximum_ms`."""
    if value is None:
        return default_ms
    if type(value) is not str:
        raise ApiError(400, f'{field} must be a duration string such as "500ms", "2s" or "1m"')
    try:
        ms = parse_duration_ms(value)
    except ValueError:
        raise ApiError(400, f'{field} {value[:40]!r} is not a duration such as "500ms", "2s" or "1m"') from None
    if ms == 0:
        raise ApiError(400, f"{field} must be above zero")
    if ms > maximum_ms:
        raise ApiError(400, f"{field} {value} is above its maximum of {format_duration_ms(maximum_ms)}")
    return ms


def size_field(value, field: str, maximum: int, low: int) -> int:
    if value is None:
        return maximum
    if type(value) is int:
        size = value
    elif type(value) is str:
        try:
            size = parse_size(value)
        except ValueError:
            raise ApiError(400, f'{field} {value[:40]!r} is not a size such as 65536, "64k", "256m" or "1g"') from None
    else:
        raise ApiError(400, f'{field} must be a size: bytes as an integer, or a string such as "256m"')
    if size < low:
        raise ApiError(400, f"{field} must be at least {format_size(low)}")
    if size > maximum:
        raise ApiError(400, f"{field} {value} is above its maximum of {format_size(maximum)}")
    return size


def count_field(value, field: str, maximum: int) -> int:
    if value is None:
        return maximum
    if type(value) is not int or value < 1:
        raise ApiError(400, f"{field} must be a whole number >= 1")
    if value > maximum:
        raise ApiError(400, f"{field} {value} is above its maximum of {maximum}")
    return value

