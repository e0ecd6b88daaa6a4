"""The judge's file store over HTTP (POST /files, GET and DELETE /files/<id>), against a real
server: DESIGN.md, Judge API, "File store" and the `/files` details."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import shutil
import socket
import time
import uuid
from pathlib import Path

import httpx
import pytest

from kilntest import Server, wait_until

KEY = "files-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
LIMIT = 1 << 20  # RUN_FILE_MAX
BAD_ID = {"error": "file id must be sha256:<64 lowercase hex digits>"}


@pytest.fixture(scope="module")
def srv():
    server = Server(
        {"RUN_LANGS": "python", "RUN_CONCURRENCY": "1", "RUN_API_KEYS": KEY, "RUN_FILE_MAX": "1m", "RUN_FILE_STORE_MAX": "3200k", "RUN_READ_TIMEOUT": "2s"}
    ).wait_ready()
    server.client.headers.update(AUTH)
    yield server
    server.stop()


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def folder_of(server: Server) -> Path:
    return Path(server.env["RUN_FILE_STORE"]) / "sha256"


def partials(server: Server) -> list[str]:
    folder = folder_of(server)
    return [name for name in os.listdir(folder) if name.startswith(".partial-")] if folder.exists() else []


def connect(server: Server, head: str) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    conn.sendall(head.encode())
    return conn


def upload_head(length: int | None = None) -> str:
    framing = "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}"
    return f"POST /files HTTP/1.1\r\nHost: kiln\r\nAuthorization: Bearer {KEY}\r\n{framing}\r\n\r\n"


def response_of(conn: socket.socket) -> tuple[int, dict, bytes]:
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    conn.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def logged_request(server: Server, request_id: str) -> dict:
    assert wait_until(lambda: any(r.get("request_id") == request_id for r in server.logged("request")), timeout=5)
    return next(r for r in server.logged("request") if r.get("request_id") == request_id)


def test_an_upload_is_201_then_200_and_reads_back_byte_for_byte(srv):
    data = os.urandom(300_000) + bytes(range(256))
    first = srv.client.post("/files", content=data, headers={"Content-Type": "image/png", "X-Request-Id": "upload-1"})
    assert first.status_code == 201, first.text
    assert first.headers["content-type"] == "application/json" and first.headers["x-request-id"] == "upload-1"
    assert first.text == json.dumps({"id": sha(data), "size": len(data)}, separators=(",", ":"))
    assert (folder_of(srv) / sha(data).removeprefix("sha256:")).read_bytes() == data  # stored under its digest
    assert logged_request(srv, "upload-1")["bytes_in"] == len(data)
    again = srv.client.post("/files", content=data)  # any content type, or none
    assert again.status_code == 200 and again.json() == {"id": sha(data), "size": len(data)}
    got = srv.client.get(f"/files/{sha(data)}")
    assert got.status_code == 200 and got.content == data
    assert got.headers["content-type"] == "application/octet-stream" and got.headers["content-length"] == str(len(data))
    head = srv.client.head(f"/files/{sha(data)}")
    assert head.status_code == 200 and head.content == b"" and head.headers["content-length"] == str(len(data))


def test_an_empty_upload_is_a_file(srv):
    response = srv.client.post("/files", content=b"")
    assert response.status_code in (200, 201) and response.json() == {"id": sha(b""), "size": 0}
    got = srv.client.get(f"/files/{sha(b'')}")
    assert got.status_code == 200 and got.content == b"" and got.headers["content-length"] == "0"


def test_a_chunked_upload(srv):
    pieces = [os.urandom(10_000) for _ in range(50)]
    response = srv.client.post("/files", content=iter(pieces))  # no Content-Length: chunked
    data = b"".join(pieces)
    assert response.status_code == 201 and response.json() == {"id": sha(data), "size": len(data)}
    assert srv.client.get(f"/files/{sha(data)}").content == data


def test_exactly_the_limit_is_fine_and_a_longer_content_length_is_413_before_the_body(srv):
    data = b"L" * LIMIT
    assert srv.client.post("/files", content=data).json() == {"id": sha(data), "size": LIMIT}
    conn = connect(srv, upload_head(LIMIT + 1))  # the body is never sent: refused on its length
    status, headers, body = response_of(conn)
    assert status == 413 and json.loads(body) == {"error": "payload too large"} and headers["connection"] == "close"
    assert partials(srv) == []


def test_a_chunked_upload_is_413_as_soon_as_it_passes_the_limit(srv):
    conn = connect(srv, upload_head())
    piece = b"c" * (1 << 16)
    for _ in range(LIMIT // len(piece)):
        conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
    assert wait_until(lambda: partials(srv) != [], timeout=5)  # it was being written
    conn.sendall(b"1\r\nc\r\n")  # one byte over, and the body has not ended (no last chunk)
    status, headers, body = response_of(conn)
    assert status == 413 and json.loads(body) == {"error": "payload too large"} and headers["connection"] == "close"
    assert wait_until(lambda: partials(srv) == [], timeout=5)
    assert srv.client.get(f"/files/{sha(b'c' * LIMIT)}").status_code == 404


def test_delete_is_204_then_404(srv):
    data = b"to be deleted"
    file_id = srv.client.post("/files", content=data).json()["id"]
    deleted = srv.client.delete(f"/files/{file_id}")
    assert deleted.status_code == 204 and deleted.content == b"" and "content-type" not in deleted.headers
    assert deleted.headers["x-request-id"]
    assert not (folder_of(srv) / file_id.removeprefix("sha256:")).exists()
    assert srv.client.get(f"/files/{file_id}").json() == {"error": "not found"}
    assert srv.client.get(f"/files/{file_id}").status_code == 404
    assert srv.client.delete(f"/files/{file_id}").status_code == 404
    assert srv.client.post("/files", content=data).status_code == 201  # gone, so new again


def test_an_unknown_id_is_404(srv):
    unknown = sha(uuid.uuid4().bytes)
    for method in ("GET", "DELETE"):
        response = srv.client.request(method, f"/files/{unknown}")
        assert response.status_code == 404 and response.json() == {"error": "not found"}


@pytest.mark.parametrize(
    "file_id",
    [
        "sha256:" + "A" * 64,
        "sha256:" + "a" * 63,
        "sha256:" + "a" * 65,
        "a" * 64,
        "sha1:" + "a" * 40,
        "sha256:" + "a" * 64 + "/x",
        "sha256%3A" + "a" * 64 + "%20",
        "..%2F..%2Fetc%2Fpasswd",
        "x",
        "sha256:" + "a" * 64 + "%0A",  # a newline: no route pattern may let it fall through to 404
        "%0A",
        "",  # /files/ names an empty id
    ],
)
def test_an_id_not_of_the_form_is_400(srv, file_id):
    for method in ("GET", "DELETE"):
        response = srv.client.request(method, f"/files/{file_id}")
        assert response.status_code == 400 and response.json() == BAD_ID, (method, response.text)


def test_401_without_a_key_comes_first(srv):
    data = b"not without a key " + uuid.uuid4().bytes
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {KEY}"}):
        with httpx.Client(base_url=srv.url, headers=headers, timeout=30) as stranger:
            for response in (
                stranger.post("/files", content=data),
                stranger.post("/files", content=data, headers={"Content-Encoding": "gzip"}),  # 401 before 415
                stranger.get(f"/files/{sha(data)}"),
                stranger.get("/files/not-an-id"),  # 401 before 400
                stranger.delete(f"/files/{sha(b'')}"),
            ):
                assert response.status_code == 401 and response.json() == {"error": "unauthorized"}
    assert srv.client.get(f"/files/{sha(data)}").status_code == 404  # never stored
    assert srv.client.get(f"/files/{sha(b'')}").status_code in (200, 404)  # the DELETE was refused, not done


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "x-unknown"])
def test_415_content_encoding(srv, encoding):
    response = srv.client.post("/files", content=b"zz", headers={"Content-Encoding": encoding})
    assert response.status_code == 415 and response.json() == {"error": "content-encoding not supported"}


def test_identity_encoding_is_accepted(srv):
    response = srv.client.post("/files", content=b"identity", headers={"Content-Encoding": "identity"})
    assert response.status_code in (200, 201) and response.json()["id"] == sha(b"identity")


def test_a_client_that_hangs_up_mid_upload_leaves_no_partial_file(srv):
    conn = connect(srv, upload_head(512_000).replace("\r\n\r\n", "\r\nX-Request-Id: hangs-up\r\n\r\n"))
    conn.sendall(b"h" * 100_000)
    assert wait_until(lambda: partials(srv) != [], timeout=5)  # being written
    conn.close()
    record = logged_request(srv, "hangs-up")
    assert record["status"] == 499 and 0 < record["bytes_in"] <= 100_000  # what reached the store
    assert partials(srv) == []
    assert srv.client.get(f"/files/{sha(b'h' * 100_000)}").status_code == 404


def test_a_chunked_upload_that_ends_early_leaves_nothing(srv):
    conn = connect(srv, upload_head().replace("\r\n\r\n", "\r\nX-Request-Id: chunks-end\r\n\r\n"))
    conn.sendall(b"%x\r\n%s\r\n" % (50_000, b"e" * 50_000) + b"10000\r\nonly part of it")
    assert wait_until(lambda: partials(srv) != [], timeout=5)
    conn.close()
    assert logged_request(srv, "chunks-end")["status"] == 499
    assert partials(srv) == []


def test_a_body_slower_than_the_read_timeout_is_408_and_leaves_nothing(srv):
    started = time.monotonic()
    conn = connect(srv, upload_head(1000))
    conn.sendall(b"s" * 10)
    status, headers, body = response_of(conn)  # RUN_READ_TIMEOUT=2s
    assert status == 408 and json.loads(body) == {"error": "request timeout"} and headers["connection"] == "close"
    assert 1.5 < time.monotonic() - started < 10
    assert partials(srv) == []


def test_the_least_recently_used_files_go_past_the_store_max(srv):
    """RUN_FILE_STORE_MAX=3200k: three files of 1m fill it (with their inodes and owners' marks,
    kiln/judge/footprint.py); a GET is a use."""
    a, b, c, d = (bytes([n]) * LIMIT for n in b"abcd")
    for data in (a, b, c):
        assert srv.client.post("/files", content=data).status_code in (200, 201)
    assert srv.client.get(f"/files/{sha(a)}").status_code == 200  # b is now the least recent
    assert srv.client.post("/files", content=d).status_code == 201
    assert srv.client.get(f"/files/{sha(b)}").status_code == 404
    for data in (a, c, d):
        assert srv.client.get(f"/files/{sha(data)}").content == data
    stored = [path.stat().st_size for path in folder_of(srv).iterdir()]
    assert sum(stored) <= 3 * LIMIT and not (folder_of(srv) / sha(b).removeprefix("sha256:")).exists()


def test_the_store_is_bounded_by_its_disk_blocks_and_inodes_not_its_bytes(store_folder, start_server):
    """2000 uploads of 16 bytes counted 31 KiB and took ~11 MiB and 2000 inodes: 40 of them
    against a bound of 100k keep no more files than their blocks and inodes fit (at least a
    block for each file's content and one for its inode), the oldest gone."""
    store = str(store_folder)
    server = start_server(RUN_LANGS="python", RUN_CONCURRENCY="1", RUN_FILE_STORE=store, RUN_FILE_STORE_MAX="100k")
    uploads = [b"sixteen bytes %02d" % n for n in range(40)]
    for data in uploads:
        assert server.client.post("/files", content=data).status_code == 201
    kept = list((Path(store) / "sha256").iterdir())
    block = os.statvfs(store).f_frsize
    assert sum(p.stat().st_blocks * 512 for p in kept) + len(kept) * block <= 100 * 1024, len(kept)
    assert server.client.get(f"/files/{sha(uploads[0])}").status_code == 404
    assert server.client.get(f"/files/{sha(uploads[-1])}").content == uploads[-1]


def test_the_store_survives_a_restart_and_drops_a_crash_leftover(store_folder, start_server):
    store = str(store_folder)
    settings = {"RUN_LANGS": "python", "RUN_CONCURRENCY": "1", "RUN_FILE_STORE": store}
    first = start_server(**settings)
    kept, gone = os.urandom(70_000), b"deleted before the restart"
    assert first.client.post("/files", content=kept).status_code == 201
    assert first.client.post("/files", content=gone).status_code == 201
    assert first.client.delete(f"/files/{sha(gone)}").status_code == 204
    first.stop()
    leftover = Path(store) / "sha256" / ".partial-crashed"
    leftover.write_bytes(b"half an upload")  # as a crash mid-upload leaves it
    second = start_server(**settings)
    got = second.client.get(f"/files/{sha(kept)}")
    assert got.status_code == 200 and got.content == kept
    assert second.client.get(f"/files/{sha(gone)}").status_code == 404
    assert second.client.post("/files", content=kept).status_code == 200  # still there
    assert not leftover.exists()
    assert wait_until(lambda: second.logged("file store"))  # its log is read by a thread of its own
    rebuilt = second.logged("file store")
    assert [(r["files"], r["partial_removed"]) for r in rebuilt] == [(1, 1)]


def test_an_upload_while_shutting_down_is_a_503_as_new_work_is(start_server):
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="1", ALLOW_SHUTDOWN="true")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(srv.run, solution_text="import time\ntime.sleep(2)\n")
        assert wait_until(lambda: "kiln_slots{state=\"busy\"} 1.0" in srv.client.get("/metrics").text)
        assert srv.client.post("/shutdown").status_code == 200
        upload = srv.client.post("/files", content=b"tests")
        assert (upload.status_code, upload.json()) == (503, {"error": "shutting down"})
        assert running.result().status_code == 200  # what was in flight finishes


def test_a_file_is_its_uploaders_where_api_keys_are_configured(start_server):
    """Another key finds no such file (no GET, HEAD, DELETE, nor judge request of it, and an
    upload of the same bytes answers 201 as for a new file: no existence oracle); each owner's
    DELETE takes it from that owner only; the owners survive a restart."""
    store = f"/tmp/kiln-test-{os.getpid()}-owned-store"
    env = {"RUN_LANGS": "python", "RUN_CONCURRENCY": "1", "RUN_API_KEYS": "alice-key,bob-key", "RUN_FILE_STORE": store}
    alice, bob = {"Authorization": "Bearer alice-key"}, {"Authorization": "Bearer bob-key"}
    data = b"YES\n"
    try:
        srv = start_server(**env)
        first = srv.client.post("/files", content=data, headers=alice)
        assert (first.status_code, first.json()["id"]) == (201, sha(data))
        assert srv.client.post("/files", content=data, headers=alice).status_code == 200  # alice had it
        url = f"/files/{sha(data)}"
        assert [srv.client.request(m, url, headers=bob).status_code for m in ("GET", "HEAD", "DELETE")] == [404, 404, 404]
        judged = srv.client.post("/judge", headers=bob, json={"lang_slug": "python", "solution_text": "print(input())", "tests": [{"stdin": "YES", "expected_file": sha(data)}]})
        assert (judged.status_code, judged.json()) == (400, {"error": f"unknown file {sha(data)}"})
        assert srv.client.get(url, headers=alice).content == data
        assert srv.client.post("/files", content=data, headers=bob).status_code == 201  # new to bob
        srv.stop()
        srv = start_server(**env)  # the owners are on disk
        assert srv.client.delete(url, headers=bob).status_code == 204
        assert srv.client.get(url, headers=bob).status_code == 404 and srv.client.get(url, headers=alice).content == data
        judged = srv.client.post("/judge", headers=alice, json={"lang_slug": "python", "solution_text": "print(input())", "tests": [{"stdin": "YES", "expected_file": sha(data)}]})
        assert judged.json()["verdict"] == "AC", judged.text
        assert srv.client.delete(url, headers=alice).status_code == 204
        assert srv.client.get(url, headers=alice).status_code == 404
        assert not (Path(store) / "sha256" / sha(data)[7:]).exists()  # gone with its last owner
    finally:
        shutil.rmtree(store, ignore_errors=True)


def test_a_judge_requests_files_resolve_only_the_requesting_keys_files(start_server):
    """A `{"file": id}` in a checker's (or any) `files` is the requester's file or a 400 naming
    the field, as a test's input is: another key's upload is no such file."""
    env = {"RUN_LANGS": "python", "RUN_CONCURRENCY": "1", "RUN_API_KEYS": "alice-key,bob-key"}
    alice, bob = {"Authorization": "Bearer alice-key"}, {"Authorization": "Bearer bob-key"}
    srv = start_server(**env)
    lib = b"def verdict(output):\n    return 0 if output.split() == ['YES'] else 1\n"
    assert srv.client.post("/files", content=lib, headers=alice).status_code == 201
    checker = "import sys\nfrom checklib import verdict\nsys.exit(verdict(open(sys.argv[2]).read()))\n"
    request = {"lang_slug": "python", "solution_text": "print(input())", "tests": [{"stdin": "YES"}, {"stdin": "NO"}], "compare": "checker",
               "checker": {"lang_slug": "python", "source": checker, "files": {"checklib.py": {"file": sha(lib)}}}}  # fmt: skip
    judged = srv.client.post("/judge", headers=bob, json=request)
    assert (judged.status_code, judged.json()) == (400, {"error": f"checker.files.checklib.py: unknown file {sha(lib)}"})
    judged = srv.client.post("/judge", headers=alice, json=request)
    assert [t["verdict"] for t in judged.json()["tests"]] == ["AC", "WA"], judged.text
