"""The field readers both request parsers use (/run's validate.py, /judge's judge_request.py).

One style: a reader takes a field's value and its path as the client wrote it ("limits.memory",
"tests[3].stdin", "checker.files.a.txt"), gives the value kiln uses, or raises ApiError(400)
whose message begins with that path and says what the field must be. A reader never looks the
value up, so the caller decides what an absent field means; the messages are the contract's
(clients match them: tests/unit/test_request_errors.py pins each one)."""

from __future__ import annotations

import json
import math

from kiln.http.responses import ApiError
from kiln.units import format_duration_ms, format_size, parse_duration_ms, parse_size

# how a message names a JSON type: "<field> must be a <name>"
TYPE_NAMES = {str: "string", bool: "boolean (true or false)", dict: "object", list: "array"}


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


_decoder = json.JSONDecoder(parse_constant=_reject_constant)


def json_object(raw: bytes) -> dict:
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


def typed(value, field: str, json_type: type, or_null: bool = False):
    """A value of JSON type `json_type` (`or_null`: the message says null is allowed too)."""
    if type(value) is not json_type:
        raise ApiError(400, f"{field} must be a {TYPE_NAMES[json_type]}" + (" or null" if or_null else ""))
    return value


def required(value, field: str, json_type: type):
    """A field that must be given (null counts as not given), of JSON type `json_type`."""
    if value is None:
        raise ApiError(400, f"{field} is required")
    return typed(value, field, json_type)


def optional(value, field: str, json_type: type, default, or_null: bool = False):
    """A field of JSON type `json_type`, `default` when absent or null (`or_null`: its message says
    so, as /run's always has)."""
    return default if value is None else typed(value, field, json_type, or_null)


def an_object(value, field: str, shape: str = "") -> dict:
    """A JSON object (null is not one); `shape`, after "must be an object", says what it holds."""
    if type(value) is not dict:
        raise ApiError(400, f"{field} must be an object{shape}")
    return value


def an_array(value, field: str, shape: str = "") -> list:
    """A JSON array (null is not one); `shape`, after "must be an array", says what it holds."""
    if type(value) is not list:
        raise ApiError(400, f"{field} must be an array{shape}")
    return value


def first_unknown(value: dict, known) -> str | None:
    """The first (in sorted order, so the answer does not depend on the client's key order) of
    `value`'s keys that is not `known`; the caller's message says what the known ones are."""
    unknown = sorted(set(value) - set(known))
    return unknown[0] if unknown else None


def text(value: str, field: str) -> bytes:
    """A string field's UTF-8 bytes: JSON's "\\ud800" decodes to a lone surrogate, which has none."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, f"{field} is not valid UTF-8 text (it contains a lone surrogate)") from None


def number(value, field: str, why: str = "", finite: bool = True) -> float:
    """A number >= 0 (an integer or a float: a boolean is not one); `finite` refuses JSON's
    numbers beyond a double (1e400 reads as inf) instead of taking them as infinity."""
    if type(value) not in (int, float) or not 0 <= value or (finite and not value < math.inf):
        raise ApiError(400, f"{field} must be a number >= 0{why}")
    try:
        return float(value)
    except OverflowError:  # an integer beyond a double: as large as 1e400
        if finite:
            raise ApiError(400, f"{field} must be a number >= 0{why}") from None
        return math.inf


def duration(value, field: str, default_ms: int, maximum_ms: int) -> int:
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


def size(value, field: str, maximum: int, low: int) -> int:
    """A size in bytes: an integer, or a string such as "64k" or "256m"; `maximum` when absent."""
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


def count(value, field: str, maximum: int) -> int:
    """A whole number from 1 to `maximum`; `maximum` when absent."""
    if value is None:
        return maximum
    if type(value) is not int or value < 1:
        raise ApiError(400, f"{field} must be a whole number >= 1")
    if value > maximum:
        raise ApiError(400, f"{field} {value} is above its maximum of {maximum}")
    return value
