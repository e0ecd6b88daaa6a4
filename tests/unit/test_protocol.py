"""The frame codec, and the job checks the root side makes on every frame from the front."""

from __future__ import annotations

import os
import socket
import struct
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln.wire import protocol
from kiln.wire.protocol import ProtocolError


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def roundtrip(header: dict, blobs: list[bytes], fds=()) -> tuple[tuple[dict, list[bytes]], list[int]]:
    a, b = socket.socketpair()
    received: list[int] = []
    try:
        sender = threading.Thread(target=protocol.send_frame, args=(a, header, blobs, fds))
        sender.start()
        frame = protocol.recv_frame(b, 64 << 20, received)
        sender.join()
        return frame, received
    finally:
        a.close()
        b.close()


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=10).filter(lambda k: k != "blobs"), json_values, max_size=6), st.lists(st.binary(max_size=300), max_size=4))
def test_round_trip(header, blobs):
    (got_header, got_blobs), _ = roundtrip(header, blobs)
    expected = dict(header, blobs=[len(b) for b in blobs]) if blobs else header
    assert got_header == expected
    assert got_blobs == blobs


def test_large_blob_and_descriptor_passing():
    big = os.urandom(3 << 20)
    r, w = os.pipe()
    try:
        (header, blobs), fds = roundtrip({"op": "slot"}, [big], fds=(r,))
        assert header["op"] == "slot" and blobs == [big]
        assert len(fds) == 1
        assert not os.get_inheritable(fds[0])  # received close-on-exec: no exec may leak it
        os.write(w, b"x")
        assert os.read(fds[0], 1) == b"x"  # the same pipe, through another descriptor
        os.close(fds[0])
    finally:
        os.close(r)
        os.close(w)


def test_clean_end_of_stream_is_none_and_mid_frame_is_an_error():
    a, b = socket.socketpair()
    a.close()
    assert protocol.recv_frame(b, 1024) is None
    b.close()
    a, b = socket.socketpair()
    a.sendall(protocol.encode({"op": "x"})[:7])
    a.close()
    with pytest.raises(ProtocolError):
        protocol.recv_frame(b, 1024)
    b.close()


def test_oversized_frame_is_refused_before_reading_it():
    a, b = socket.socketpair()
    a.sendall(struct.pack(">II", 10 << 20, 2))
    with pytest.raises(ProtocolError, match="limit"):
        protocol.recv_frame(b, 1 << 20)
    a.close()
    b.close()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_never_crashes_the_decoder(data):
    a, b = socket.socketpair()
    try:
        a.sendall(data)
        a.close()
        try:
            protocol.recv_frame(b, 1 << 16)
        except ProtocolError:
            pass
    finally:
        b.close()


@pytest.mark.parametrize(
    "payload",
    [
        struct.pack(">I", 6) + b"{}",  # header size larger than the frame
        struct.pack(">I", 2) + b"[]",  # not an object
        struct.pack(">I", 2) + b"\xff\xfe",  # not UTF-8
        struct.pack(">I", 12) + b'{"blobs":[9]}',  # blob sizes do not add up
        struct.pack(">I", 15) + b'{"blobs":[-1]}',
    ],
)
def test_malformed_frames(payload):
    with pytest.raises(ProtocolError):
        protocol.decode(payload, struct.unpack(">I", payload[:4])[0])


# --- the job and the result ------------------------------------------------------------------

RESULT = {"op": "result", "exit_code": 0, "outcome": "exited", "wall_ms": 1.5, "cpu_ms": 1.0, "memory_peak_bytes": 4096, "signal": None, "output_overflow": False, "next": False, "address_space_reached": False, "ended_ms": 1000.0}


def test_a_job_is_encoded_in_the_one_form_kiln_init_accepts():
    job = protocol.Job("cpp", 2500, (("solution", b"int main"), ("client_harness", b"chk")), stdin=b"1 2\n")
    header, blobs = protocol.encode_job(job)
    assert header == {"op": "job", "slug": "cpp", "command": "test", "timeout_ms": 2500, "limits": [0, 0, 0, 0, 0], "layer": "", "files": ["solution", "client_harness"], "stdin": True, "pipes": False, "stdin_file": False, "file_fds": [], "give_back": ""}
    assert list(header) == list(protocol.JOB_KEYS)
    assert blobs == [b"int main", b"chk", b"1 2\n"]
    assert protocol.encode_job(protocol.Job("python", 1, (("solution", b""),)))[0]["stdin"] is False
    judged = protocol.Job("cpp", 3000, (), stdin=b"1 2", command="exec", limits=protocol.Limits(cpu_ms=1000, memory=1 << 26, pids=8, output=100, address_space=1 << 27), layer="f" * 64)
    header, blobs = protocol.encode_job(judged)
    assert (header["command"], header["limits"], header["layer"], header["files"], blobs) == ("exec", [1000, 1 << 26, 8, 100, 1 << 27], "f" * 64, [], [b"1 2"])
    interactor = protocol.Job("python", 3000, (("input", b"1"), ("record", b"")), command="exec", layer="f" * 64, give_back="record")
    assert protocol.encode_job(interactor)[0]["give_back"] == "record"


def test_a_builds_result_carries_its_layer():
    layer = protocol.LAYER_ENTRY.pack(b"d", 0o755, 5, 0) + b"judge" + protocol.LAYER_ENTRY.pack(b"f", 0o755, 10, 2) + b"judge/main" + b"\x7fE"
    result = protocol.decode_result((RESULT, [b"", b"", layer]))
    entries = protocol.read_layer(result.returned)
    assert [(e.type, e.mode, e.path, bytes(e.data)) for e in entries] == [(b"d", 0o755, "judge", b""), (b"f", 0o755, "judge/main", b"\x7fE")]


@pytest.mark.parametrize(
    ("entries", "problem"),
    [
        ([(b"f", "../x", b"")], "bad path"),
        ([(b"f", "/etc/x", b"")], "bad path"),
        ([(b"f", "a/./b", b"")], "bad path"),
        ([(b"f", "missing/x", b"")], "bad path"),  # a parent not met before
        ([(b"l", "a", b"/etc"), (b"f", "a/x", b"")], "bad path"),  # below a link, not a directory
        ([(b"c", "x", b"")], "bad entry"),
    ],
)
def test_a_layer_with_a_bad_entry_is_refused(entries, problem):
    layer = b"".join(protocol.LAYER_ENTRY.pack(kind, 0o644, len(path), len(data)) + path.encode() + data for kind, path, data in entries)
    with pytest.raises(protocol.ProtocolError, match=problem):
        protocol.read_layer(layer)


def test_a_layer_cut_anywhere_is_refused():
    layer = protocol.LAYER_ENTRY.pack(b"d", 0o755, 1, 0) + b"j" + protocol.LAYER_ENTRY.pack(b"f", 0o644, 3, 3) + b"j/x" + b"abc"
    assert len(protocol.read_layer(layer)) == 2
    for cut in range(1, len(layer)):
        if cut == protocol.LAYER_ENTRY.size + 1:
            continue  # between the entries: a whole layer of one directory
        with pytest.raises(protocol.ProtocolError, match="cut short|bad entry"):
            protocol.read_layer(layer[:cut])


def test_a_result_decodes_to_a_run_result():
    result = protocol.decode_result((RESULT, [b"out", b"err"]))
    assert result == protocol.RunResult(0, "exited", 1.5, 1.0, 4096, None, False, b"out", b"err", ended_ms=1000.0)
    timed_out = protocol.decode_result(({**RESULT, "exit_code": None, "outcome": "timed_out", "signal": 9}, [b"", b""]))
    assert (timed_out.exit_code, timed_out.outcome, timed_out.signal) == (None, "timed_out", 9)


def test_a_dead_prestart_command_is_its_own_answer():
    with pytest.raises(protocol.PrestartFailed, match="exited"):
        protocol.decode_result(({"op": "prestart_failed", "error": "the prestart command exited (1)"}, []))


@pytest.mark.parametrize(
    "header, blobs",
    [
        ({**RESULT, "op": "error", "error": "bad"}, [b"", b""]),
        (RESULT, [b""]),
        ({**RESULT, "outcome": "exploded"}, [b"", b""]),
        ({**RESULT, "exit_code": "0"}, [b"", b""]),
        ({**RESULT, "exit_code": True}, [b"", b""]),
        ({**RESULT, "memory_peak_bytes": 1.5}, [b"", b""]),
        ({k: v for k, v in RESULT.items() if k != "signal"}, [b"", b""]),
    ],
)
def test_anything_but_a_well_formed_result_is_a_protocol_error(header, blobs):
    with pytest.raises(ProtocolError):
        protocol.decode_result((header, blobs))
