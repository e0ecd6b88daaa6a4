"""Garbage never crashes the root side: whatever frame arrives on a slot's socket, the slot either
gets a Job or answers one error frame; nothing else escapes (issue 7, "Fuzzing").

Two levels, against a runtime built from the repo's langs/:
- `job.parse` on hypothesis-generated headers (JSON values, near-misses of a valid job) and blobs;
- the slot's real reading path (`slot._serve_one_job`) on raw frames with lying sizes, truncated
  bodies and non-JSON headers, with only `job.execute` (which would run the task) stubbed out;
- kiln-init's own parser (plain slots), in its check mode, on the same frames: it must accept
  nothing the Python slot refuses, and read what it accepts the same way.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln import config, langs, native, runtime
from kiln.zygote import job, protocol, slot
from kiln.zygote.job import FILE_PARTS, Job, JobError

REPO = Path(__file__).resolve().parents[2]
INPUT_MAX = 1024
TIMEOUT_MAX_MS = 10_000


@pytest.fixture(scope="module")
def rt():
    built = runtime.build(config.load({"RUN_INPUT_MAX": str(INPUT_MAX), "RUN_TIMEOUT_MAX": f"{TIMEOUT_MAX_MS}ms"}, REPO))
    assert "python" in built.workloads
    return built


# --- strategies ----------------------------------------------------------------------------

# JSON text may carry anything a decoder accepts: lone surrogates (as \ud800 escapes), NaN and
# Infinity (Python's json reads them), integers far beyond 64 bits.
text = st.text(st.characters(exclude_categories=()), max_size=12)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | text
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4), max_leaves=10)

SERVED_HINTS = ("python", "js", "cpp", "java", "golang", "rust")  # the rt fixture decides which are served
slugs = st.sampled_from(sorted(langs.LANGUAGES)) | st.sampled_from(SERVED_HINTS) | st.just("") | st.just("Python") | json_values
timeouts = (
    st.integers(-2, 2)
    | st.integers(TIMEOUT_MAX_MS - 2, TIMEOUT_MAX_MS + 2)
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True)
    | st.booleans()
    | st.just("1000")
    | json_values
)
parts = st.sampled_from(FILE_PARTS) | st.sampled_from(["../checker", "solution ", "Solution", "stdin", ""]) | scalars
file_lists = st.lists(st.sampled_from(FILE_PARTS), max_size=4) | st.lists(parts, max_size=5) | json_values
stdin_flags = st.booleans() | json_values

headers = st.builds(
    lambda known, extra: {**extra, **known},
    st.fixed_dictionaries({}, optional={"op": st.just("job") | json_values, "slug": slugs, "timeout_ms": timeouts, "files": file_lists, "stdin": stdin_flags}),
    st.dictionaries(text, json_values, max_size=3),
)
blob = st.binary(max_size=24) | st.integers(INPUT_MAX - 1, INPUT_MAX + 1).map(lambda n: b"x" * n)
blob_lists = st.lists(blob, max_size=5)


@st.composite
def valid_jobs(draw, served: tuple[str, ...]):
    """Well-formed jobs for the served languages, so that the Job branch is exercised too."""
    slug = draw(st.sampled_from(served))
    has_checker = langs.LANGUAGES[slug].has_checker
    names = ["solution", *(["checker"] if has_checker else []), *draw(st.lists(st.just("asserts"), max_size=1))]
    names = draw(st.permutations(names))
    stdin = draw(st.booleans())
    header = {"op": "job", "slug": slug, "timeout_ms": draw(st.integers(1, TIMEOUT_MAX_MS)), "files": names, "stdin": stdin}
    return header, draw(st.lists(st.binary(max_size=INPUT_MAX), min_size=len(names) + stdin, max_size=len(names) + stdin))


@st.composite
def near_misses(draw, served: tuple[str, ...]):
    """A valid job with one thing wrong, so that every rule gets its turn: the slug, the timeout,
    the file parts (any subset or repeat), the stdin flag, the blob count, a blob's size."""
    header, blobs = draw(valid_jobs(served))
    fault = draw(st.sampled_from(["slug", "timeout_ms", "files", "stdin", "count", "size"]))
    if fault == "slug":
        header["slug"] = draw(slugs)
    elif fault == "timeout_ms":
        header["timeout_ms"] = draw(timeouts)
    elif fault == "files":
        header["files"] = draw(st.lists(st.sampled_from(FILE_PARTS), max_size=4) | file_lists)
    elif fault == "stdin":
        header["stdin"] = draw(stdin_flags)
    elif fault == "count":
        blobs = blobs[:-1] if blobs and draw(st.booleans()) else [*blobs, draw(blob)]
    else:
        blobs[draw(st.integers(0, len(blobs) - 1))] = b"x" * draw(st.integers(INPUT_MAX, INPUT_MAX + 1))
    return header, blobs


def job_or_near_miss(served):
    return valid_jobs(served) | near_misses(served) | st.tuples(headers, blob_lists)


# --- job.parse -----------------------------------------------------------------------------


def check_parse(header: dict, blobs: list[bytes], rt) -> Job | None:
    """The property: a Job that satisfies every rule, or JobError whose message fits an error frame."""
    try:
        parsed = job.parse(header, blobs, rt)
    except JobError as error:
        protocol.encode({"op": "error", "error": str(error)})  # what the slot answers must be sendable
        return None
    assert isinstance(parsed, Job)
    assert parsed.workload is rt.workloads[header["slug"]]
    assert type(parsed.timeout_ms) is int and 0 < parsed.timeout_ms <= TIMEOUT_MAX_MS
    names = [name for name, _ in parsed.files]
    assert names == header["files"] and len(set(names)) == len(names) and set(names) <= set(FILE_PARTS)
    assert "solution" in names and ("checker" in names) == parsed.workload.language.has_checker
    assert all(len(b) <= INPUT_MAX for b in blobs)
    has_stdin = header.get("stdin") is True
    assert len(blobs) == len(names) + has_stdin
    assert parsed.stdin == (blobs[-1] if has_stdin else None)
    assert [content for _, content in parsed.files] == blobs[: len(names)]
    return parsed


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_parse_returns_a_job_or_raises_job_error(rt, data):
    header, blobs = data.draw(job_or_near_miss(tuple(rt.workloads)))
    check_parse(header, blobs, rt)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_well_formed_jobs_for_served_languages_are_accepted(rt, data):
    header, blobs = data.draw(valid_jobs(tuple(rt.workloads)))
    assert check_parse(header, blobs, rt) is not None


@settings(max_examples=300, deadline=None)
@given(data=st.data(), key=st.sampled_from(["slug", "timeout_ms", "files", "stdin"]), value=json_values)
def test_one_bad_field_in_a_good_job_is_a_job_error_or_harmless(rt, data, key, value):
    """Mutating one field of a valid job gives a JobError, or a Job that still obeys every rule."""
    header, blobs = data.draw(valid_jobs(tuple(rt.workloads)))
    check_parse({**header, key: value}, blobs, rt)


# --- the slot's reading path, on raw frames ------------------------------------------------


@st.composite
def raw_frames(draw, served: tuple[str, ...]) -> bytes:
    """A job frame as the codec would send it, then (mostly) one lie: wrong blob sizes in the
    header, a header that is not a JSON object, a wrong header or frame size, or a cut."""
    header, blobs = draw(job_or_near_miss(served))
    lie = draw(st.sampled_from(["none", "blob sizes", "head", "head size", "size", "cut"]))
    sizes = [len(b) for b in blobs]
    if lie == "blob sizes":
        sizes = draw(st.lists(st.integers(-2, 2 * INPUT_MAX), max_size=6) | json_values)
    head = json.dumps({**header, "blobs": sizes}, ensure_ascii=True, allow_nan=True).encode()  # \ud800 stays an escape
    if lie == "head":
        head = draw(st.binary(max_size=64) | st.sampled_from([b"[]", b"null", b"{", b'{"blobs": 1}', b"\xff\xfe{}", b"NaN"]))
    body = b"".join(blobs)
    head_size, size = len(head), 4 + len(head) + len(body)
    if lie == "head size":
        head_size = draw(st.integers(0, 2**32 - 1) | st.integers(max(0, len(head) - 2), len(head) + 2))
    if lie == "size":
        size = draw(st.integers(0, 2**32 - 1) | st.integers(max(0, size - 2), size + 2) | st.integers(0, 8))
    frame = struct.pack(">II", size, head_size) + head + body
    return frame[: draw(st.integers(0, len(frame) - 1))] if lie == "cut" else frame


def serve(frame: bytes, rt, prestart: str | None = None) -> tuple[list[Job], tuple[dict, list[bytes]] | None]:
    """Feeds `frame` to the slot's own reading code (of a slot prestarted for `prestart`, if
    given); returns the jobs it would have run and its reply."""
    ran: list[Job] = []
    front, slot_end = socket.socketpair()
    with front, slot_end, pytest.MonkeyPatch.context() as patch:
        patch.setattr(job, "execute", lambda work, *args: ran.append(work))  # the task is not run
        patch.setattr(job, "execute_prestarted", lambda work, *args: ran.append(work))
        patch.setattr(slot, "set_title", lambda title: None)  # and the test process keeps its name
        front.sendall(frame)
        front.shutdown(socket.SHUT_WR)
        workload = rt.workloads[prestart] if prestart else None
        slot._serve_one_job(slot.SlotSpec(index=0, uid=0, root=None, zygote_signals=()), rt, None, slot_end, -1, workload, object() if workload else None)
        slot_end.shutdown(socket.SHUT_WR)
        reply = protocol.recv_frame(front, 1 << 20)
        assert reply is None or protocol.recv_frame(front, 1 << 20) is None  # one answer at most
    return ran, reply


def check_served(frame: bytes, rt) -> None:
    """The property: the job is run, or exactly one error frame with a message is answered."""
    ran, reply = serve(frame, rt)
    if ran:
        assert len(ran) == 1 and isinstance(ran[0], Job) and reply is None
    elif frame == b"":
        assert reply is None  # the front closed the slot unused
    else:
        assert reply is not None
        header, blobs = reply
        assert header["op"] == "error" and isinstance(header["error"], str) and header["error"] and blobs == []


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_garbage_frames_get_a_job_or_one_error_frame(rt, data):
    check_served(data.draw(raw_frames(tuple(rt.workloads))), rt)


@pytest.mark.parametrize(
    "frame",
    [
        b"",  # closed unused
        b"\x00\x00\x00",  # closed inside the size prefix
        struct.pack(">II", 2**32 - 1, 0),  # a frame far over the limit: refused before reading it
        struct.pack(">II", 4, 0),  # an empty header
        struct.pack(">II", 6, 2) + b"{}",  # an empty object: no slug
        struct.pack(">II", 8, 4) + b"null",
        struct.pack(">II", 8, 4) + b"NaN ",
    ],
)
def test_edge_frames(rt, frame):
    check_served(frame, rt)


def test_a_valid_frame_reaches_execute(rt):
    ran, reply = serve(protocol.encode({"op": "job", "slug": "python", "timeout_ms": 1000, "files": ["solution"], "stdin": True}, [b"print(1)", b"in"]), rt)
    assert reply is None and len(ran) == 1
    assert ran[0].files == (("solution", b"print(1)"),) and ran[0].stdin == b"in"


def test_a_deeply_nested_header_is_an_error_frame(rt):
    """Found by fuzzing: json raised RecursionError out of recv_frame and the slot's init died."""
    head = b'{"op":"job","x":' + b"[" * 5000 + b"]" * 5000 + b"}"
    ran, reply = serve(struct.pack(">II", 4 + len(head), len(head)) + head, rt)
    assert not ran and reply[0]["op"] == "error"


@pytest.mark.parametrize(
    ("slug", "stdin", "served"),
    [("python", False, True), ("js", False, False), ("python", True, False)],
)
def test_a_prestarted_slot_serves_only_its_language_without_stdin(rt, slug, stdin, served):
    blobs = [b"x"] + ([b"in"] if stdin else [])
    ran, reply = serve(protocol.encode({"op": "job", "slug": slug, "timeout_ms": 1000, "files": ["solution"], "stdin": stdin}, blobs), rt, prestart="python")
    if served:
        assert reply is None and len(ran) == 1
    else:
        assert not ran and reply[0] == {"op": "error", "error": "slot warmed for python requests without stdin"}


@pytest.mark.parametrize("slug", ["python", "cpp"])
def test_rehearsal_goes_through_the_request_path_of_its_language_and_touches_nothing(rt, tmp_path, monkeypatch, slug):
    checked, planned = [], []
    real_parse, real_plans = job.parse, job.plans
    monkeypatch.setattr(job, "parse", lambda header, blobs, runtime: checked.append(header["slug"]) or real_parse(header, blobs, runtime))
    monkeypatch.setattr(job, "plans", lambda work, runtime, uid: planned.append(work.workload.slug) or real_plans(work, runtime, uid))
    monkeypatch.chdir(tmp_path)
    job.rehearse(rt, 10001, rt.workloads[slug])
    assert checked == planned == [slug]
    assert not list(tmp_path.iterdir())


def test_a_plain_slot_is_warmed_with_the_limits_most_languages_have(rt):
    counts = {}
    for w in rt.workloads.values():
        counts[(w.memory_max, w.pids_max)] = counts.get((w.memory_max, w.pids_max), 0) + 1
    assert counts[rt.common_limits] == max(counts.values())


# --- kiln-init's parser (kiln/native/frames.c), on the same frames ----------------------------


@pytest.fixture(scope="module")
def recipe_fd(rt):
    from kiln.sandbox import plan  # noqa: PLC0415
    from kiln.sandbox.cgroups import NoSlot  # noqa: PLC0415
    from kiln.zygote import recipe  # noqa: PLC0415

    root = plan.root_plan(uid=10001, gid=10001, host_paths=rt.host_paths, workspaces=str(rt.config.workspace), tmp_size=1 << 20, tmp_inodes=64)
    fd = recipe.sealed_memfd(recipe.compile_recipe(0, 10001, root, rt, NoSlot("fuzz")))
    yield fd
    os.close(fd)


def native_check(frame: bytes, recipe_fd: int) -> list[dict]:
    """kiln-init in its check mode: the job frames it reads, each answered with what it parsed
    or the error a slot would send; it reads on to the end of the stream and must exit 0."""
    ours, theirs = socket.socketpair()
    with ours:
        proc = subprocess.Popen([str(native.INIT), "check"], stdin=theirs, env={"KILN_RECIPE": str(recipe_fd)}, pass_fds=(recipe_fd,))
        theirs.close()
        replies = []
        try:
            ours.sendall(frame)  # a slot stops reading after its one frame
            ours.shutdown(socket.SHUT_WR)
            while (reply := protocol.recv_frame(ours, 1 << 20)) is not None:
                replies.append(reply[0])
        except (BrokenPipeError, ConnectionResetError):
            pass
    assert proc.wait(10) == 0
    return replies


def check_native(frame: bytes, rt, recipe_fd: int) -> None:
    """The property: one answer a frame (none for an empty stream); kiln-init accepts nothing
    the Python slot refuses, and reads what it accepts the same way."""
    replies = native_check(frame, recipe_fd)
    ran, _reply = serve(frame, rt)
    if frame == b"":
        assert replies == []
        return
    assert len(replies) == 1
    if replies[0]["op"] == "error":
        assert isinstance(replies[0]["error"], str) and replies[0]["error"]
        return
    assert len(ran) == 1
    work = ran[0]
    assert replies[0] == {"op": "job", "slug": work.workload.slug, "timeout_ms": work.timeout_ms, "stdin": work.stdin is not None, "files": [name for name, _ in work.files]}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_kiln_init_accepts_no_frame_the_python_slot_refuses(rt, recipe_fd, data):
    check_native(data.draw(raw_frames(tuple(rt.workloads))), rt, recipe_fd)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_kiln_init_checks_jobs_written_as_the_front_writes_them(rt, recipe_fd, data):
    """protocol.encode of the front's header (api.py: these keys, this order): every rule of
    job.parse gets its turn in kiln-init too."""
    header, blobs = data.draw(valid_jobs(tuple(rt.workloads)) | near_misses(tuple(rt.workloads)))
    check_native(protocol.encode(header, blobs), rt, recipe_fd)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_kiln_init_accepts_every_valid_job(rt, recipe_fd, data):
    header, blobs = data.draw(valid_jobs(tuple(rt.workloads)))
    assert native_check(protocol.encode(header, blobs), recipe_fd)[0]["op"] == "job"


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x00\x00\x00",
        struct.pack(">II", 2**32 - 1, 0),
        struct.pack(">II", 4, 0),
        struct.pack(">II", 6, 2) + b"{}",
        struct.pack(">II", 8, 4) + b"null",
        struct.pack(">II", 8, 2**31) + b"null",
        protocol.encode({"op": "job", "slug": "python", "timeout_ms": 1000, "files": ["solution"], "stdin": False}, [b"x"])[:-1],
        protocol.encode({"op": "job", "slug": "python", "timeout_ms": 1000, "files": ["solution", "solution"], "stdin": False}, [b"x", b"y"]),
        protocol.encode({"op": "job", "slug": "python", "timeout_ms": 1000, "files": ["solution"], "stdin": False, "x": 1}, [b"x"]),
        protocol.encode({"op": "job", "slug": "python", "timeout_ms": 0o1000, "files": ["solution"], "stdin": False}, [b"x"]).replace(b"512", b"0512"),
        protocol.encode({"op": "job", "slug": "python", "timeout_ms": 10**15, "files": ["solution"], "stdin": False}, [b"x"]),
    ],
)
def test_kiln_init_edge_frames(rt, recipe_fd, frame):
    check_native(frame, rt, recipe_fd)
