"""POST /run's body, checked field by field (with fields.py's readers, as /judge's) into a
RunRequest, or an ApiError (400) with the message the HTTP contract gives."""

from __future__ import annotations

import json
from dataclasses import dataclass

from kiln.http import fields
from kiln.http.responses import ApiError
from kiln.runtime import Runtime
from kiln.wire.protocol import Job, Limits


@dataclass(frozen=True)
class RunRequest:
    slug: str
    timeout_ms: int
    # (part, UTF-8 bytes), parts of protocol.PARTS: the client harness is the API's checker_text
    files: tuple[tuple[str, bytes], ...]
    stdin: bytes | None
    limits: Limits = Limits()  # `limits`: less memory, pids or output than the server's

    @property
    def job(self) -> Job:
        return Job(self.slug, self.timeout_ms, self.files, self.stdin, limits=self.limits)


_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def parse_run(raw: bytes, runtime: Runtime) -> RunRequest:
    body = fields.json_object(raw)
    slug = fields.required(body.get("lang_slug"), "lang_slug", str)
    solution = fields.required(body.get("solution_text"), "solution_text", str)
    client_harness = fields.optional(body.get("checker_text"), "checker_text", str, None, or_null=True)
    stdin = fields.optional(body.get("stdin"), "stdin", str, None, or_null=True)
    asserts = body.get("asserts")
    if isinstance(asserts, (list, dict)):
        try:
            asserts = _compact(asserts)
        except ValueError:  # a number JSON allows and a double does not hold (1e400 reads as inf)
            raise ApiError(400, "asserts holds a number out of the range of a 64-bit float; send asserts as a string to pass it verbatim") from None
    elif asserts is not None and not isinstance(asserts, str):
        raise ApiError(400, "asserts must be a string, an array, an object or null")
    config = runtime.config
    timeout_ms = fields.duration(body.get("timeout"), "timeout", config.default_timeout_ms, config.timeout_max_ms)
    limits = body.get("limits")
    if limits is not None:  # a wrong type: before the slug's rows
        fields.an_object(limits, "limits", " (memory, pids, output)")
    files = [("solution", fields.text(solution, "solution_text"))]
    client_harness_bytes = None if client_harness is None else fields.text(client_harness, "checker_text")
    asserts_bytes = None if asserts is None else fields.text(asserts, "asserts")
    stdin_bytes = None if stdin is None else fields.text(stdin, "stdin")

    workload = runtime.workloads.get(slug)
    if workload is None:
        raise ApiError(400, "unsupported lang_slug")
    if workload.language.has_client_harness:
        if client_harness_bytes is None:
            raise ApiError(400, "checker_text is required")
        files.append(("client_harness", client_harness_bytes))
    if asserts_bytes is not None:
        files.append(("asserts", asserts_bytes))
    return RunRequest(slug=slug, timeout_ms=timeout_ms, files=tuple(files), stdin=stdin_bytes, limits=_run_limits(limits, workload, config))


RUN_LIMITS = ("memory", "pids", "output")


def _run_limits(value: dict | None, workload, config) -> Limits:
    """/run's `limits` (DESIGN.md; an object, as parse_run checked): memory, pids and output,
    none above the server's."""
    if value is None:
        return Limits()
    unknown = fields.first_unknown(value, RUN_LIMITS)
    if unknown is not None:
        raise ApiError(400, f"limits.{unknown}: /run takes only memory, pids and output (a time limit is its timeout)")
    given = {key: value.get(key) for key in RUN_LIMITS}
    # 0: not given (a reader gives the maximum for an absent value; here absent is 0)
    return Limits(
        memory=fields.size(given["memory"], "limits.memory", workload.memory_max, low=1 << 20) if given["memory"] is not None else 0,
        pids=fields.count(given["pids"], "limits.pids", workload.pids_max) if given["pids"] is not None else 0,
        output=fields.size(given["output"], "limits.output", config.output_max, low=1) if given["output"] is not None else 0,
    )
