"""The front's memory under a judge's big tests (issue 32 item 7), through the real API: a test's
input of the file store reaches its task as the store's file itself (a descriptor, not a copy in
the front), and an expected answer of the store is compared without being read whole into the
front (mapped, walked only as far as the comparison goes)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kilntest import Server, wait_until

MIB = 1 << 20
BIG = 32 * MIB
# prints its stdin's device and inode, and how many bytes it read from it
STDIN_FACTS = "import os, sys\nst = os.fstat(0)\nn = 0\nwhile chunk := sys.stdin.buffer.read(1 << 16):\n    n += len(chunk)\nprint(st.st_dev, st.st_ino, n)\n"


ENV = {"RUN_LANGS": "python", "RUN_CONCURRENCY": "2", "RUN_FILE_MAX": "64m"}


@pytest.fixture(scope="module")
def server():
    srv = Server(ENV).wait_ready()
    yield srv
    srv.stop()


@pytest.fixture
def fresh():
    """A server of its own: the front's peak (VmHWM) is no other test's."""
    srv = Server(ENV).wait_ready()
    yield srv
    srv.stop()


def upload(srv: Server, data: bytes) -> str:
    answer = srv.client.post("/files", content=data)
    assert answer.status_code in (200, 201), answer.text
    return answer.json()["id"]


def stored_path(srv: Server, file_id: str) -> Path:
    return Path(srv.env["RUN_FILE_STORE"]) / "sha256" / file_id.removeprefix("sha256:")


def front_kib(srv: Server, field: str) -> int:
    for line in Path(f"/proc/{srv.pids()['front']}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in the front's status")


def judge(srv: Server, solution: str, tests: list[dict], **fields) -> dict:
    answer = srv.client.post("/judge", json={"lang_slug": "python", "solution_text": solution, "tests": tests, "limits": {"time": "5s"}, **fields}, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_store_file_as_stdin_is_the_tasks_stdin_itself_read_from_its_start_by_every_test(fresh):
    server = fresh
    data = b"5 " * (BIG // 2)
    file_id = upload(server, data)
    path = stored_path(server, file_id)
    judge(server, "print(1)\n", [{"stdin": "", "expected": "1"}])  # the build cached, the front's paths warm
    peak_before = front_kib(server, "VmHWM")
    body = judge(server, STDIN_FACTS, [{"stdin_file": file_id} for _ in range(3)], compare="none")
    grown_mib = (front_kib(server, "VmHWM") - peak_before) / 1024
    assert [t["verdict"] for t in body["tests"]] == ["AC"] * 3, body
    stat = path.stat()
    for test in body["tests"]:  # the store's file itself (a copy would be a memfd), whole each time
        assert test["stdout"].split() == [str(stat.st_dev), str(stat.st_ino), str(len(data))], test
    # before: each test's input was read into the front and copied into its frame (+64 MiB)
    assert grown_mib < BIG / MIB / 2, f"the front's peak grew by {grown_mib:.1f} MiB for a {BIG // MIB} MiB input"


def test_a_store_file_as_the_expected_answer_is_not_read_whole_into_the_front(fresh):
    server = fresh
    expected = b"2\n" * (BIG // 2)
    file_id = upload(server, expected)
    judge(server, "print(1)\n", [{"stdin": "", "expected": "1"}])
    peak_before = front_kib(server, "VmHWM")
    body = judge(server, "print(1)\n", [{"stdin": "", "expected_file": file_id}] * 2)
    grown_mib = (front_kib(server, "VmHWM") - peak_before) / 1024
    assert body["verdict"] == "WA" and [t["verdict"] for t in body["tests"]] == ["WA", "WA"], body
    # before: each comparison read the 32 MiB answer into the front
    assert grown_mib < BIG / MIB / 2, f"the front's peak grew by {grown_mib:.1f} MiB for a {BIG // MIB} MiB answer"


# a checker's or an interactor's own test of its input and answer (argv[1], argv[3]): their
# sha256 digests, said in its message; 1 (WA) when they are not the ones uploaded
SAYS_DIGESTS = (
    "import hashlib, sys\n"
    "def digest(path):\n"
    "    h = hashlib.sha256()\n"
    "    with open(path, 'rb') as f:\n"
    "        while chunk := f.read(1 << 20):\n"
    "            h.update(chunk)\n"
    "    return h.hexdigest()\n"
    "got = [digest(sys.argv[1]), digest(sys.argv[3])]\n"
    "print(*got, file=sys.stderr)\n"
    "if got != WANTED:\n    sys.exit(1)\n"
)
# the interactor: says "go", records the submission's answer (its checker's argv[2])
TALKS = "print('go', flush=True)\nopen(sys.argv[2], 'w').write(sys.stdin.readline())\n"
# the checker: the test's output (or the interactor's record) must be "1"
CHECKS = "sys.exit(0 if open(sys.argv[2]).read().split() == ['1'] else 1)\n"


def test_a_checkers_and_an_interactors_store_files_reach_them_as_the_store_files_not_copies_in_the_front(fresh):
    """A checker's input and answer, and an interactor's, are given by descriptor: kiln-init
    copies the store's file into the sandbox; the front never reads them. Each program sees the
    whole file, every test."""
    server = fresh
    given, answer = b"7 " * (BIG // 2), b"1\n" * (BIG // 2)
    given_id, answer_id = upload(server, given), upload(server, answer)
    wanted = f"WANTED = {[hashlib.sha256(given).hexdigest(), hashlib.sha256(answer).hexdigest()]!r}\n"
    checker = {"compare": "checker", "checker": {"lang_slug": "python", "source": wanted + SAYS_DIGESTS + CHECKS}}
    interactor = {"interactor": {"lang_slug": "python", "source": wanted + SAYS_DIGESTS + TALKS}, "checker": checker["checker"]}
    # the builds cached, the front's paths warm (inline texts: the digests differ, WA)
    assert judge(server, "print(1)\n", [{"stdin": "", "expected": "1"}], **checker)["verdict"] == "WA"
    assert judge(server, "input()\nprint(1)\n", [{"stdin": "", "expected": "1"}], **interactor)["verdict"] != "AC"
    peak_before = front_kib(server, "VmHWM")
    checked = judge(server, "print(1)\n", [{"stdin_file": given_id, "expected_file": answer_id}] * 2, **checker)
    talked = judge(server, "input()\nprint(1)\n", [{"stdin_file": given_id, "expected_file": answer_id}] * 2, **interactor)
    grown_mib = (front_kib(server, "VmHWM") - peak_before) / 1024
    for body in (checked, talked):
        assert [t["verdict"] for t in body["tests"]] == ["AC", "AC"], body
    wrong = judge(server, "print(2)\n", [{"stdin_file": given_id, "expected_file": answer_id}], **checker)
    assert wrong["verdict"] == "WA" and wrong["tests"][0]["checker_message"].split() == [hashlib.sha256(given).hexdigest(), hashlib.sha256(answer).hexdigest()], wrong
    # before: each checked test read its input and answer into the front and copied them into
    # the checker's frame (+128 MiB and more)
    assert grown_mib < 16, f"the front's peak grew by {grown_mib:.1f} MiB for a checker's and an interactor's {BIG // MIB} MiB input and answer"


OUTPUT = "1 2\n3   4\n" * 4000  # 32 KiB: compared in the comparisons' thread, not on the event loop


@pytest.mark.parametrize(
    ("compare", "answer", "verdict"),
    [
        ("tokens", b"1 2 3 4\n" * 4000, "AC"),
        ("tokens", b"1 2 3 4\n" * 3999 + b"1 2 3 5\n", "WA"),
        ("tokens", b"1 2 3 4\n" * 4000 + b"5", "WA"),
        ("lines", b"1 2\n3   4 \n" * 4000 + b"\n\n", "AC"),
        ("lines", b"1 2\n3 4\n" * 4000, "WA"),
        ("exact", OUTPUT.encode(), "AC"),
        ("exact", OUTPUT.encode()[:-1], "WA"),
        ("float", b"1.0000001 2 3 4\n" * 4000, "AC"),
        ("float", b"1.1 2 3 4\n" * 4000, "WA"),
        ("tokens", b"", "WA"),
    ],
)
def test_an_expected_file_is_compared_as_the_same_text_inline_is(server, compare, answer, verdict):
    solution = f"import sys\nsys.stdout.write({OUTPUT!r})\n"
    file_id = upload(server, answer)
    assert file_id == "sha256:" + hashlib.sha256(answer).hexdigest()
    from_file = judge(server, solution, [{"stdin": "", "expected_file": file_id}], compare=compare)
    inline = judge(server, solution, [{"stdin": "", "expected": answer.decode()}], compare=compare)
    assert (from_file["verdict"], inline["verdict"]) == (verdict, verdict), (from_file["tests"][0]["stderr"], inline["tests"][0]["stderr"])


def test_an_empty_expected_file_answers_an_empty_output(server):
    file_id = upload(server, b"")
    assert judge(server, "pass\n", [{"stdin": "", "expected_file": file_id}], compare="exact")["verdict"] == "AC"
    assert judge(server, "print(1)\n", [{"stdin": "", "expected_file": file_id}], compare="tokens")["verdict"] == "WA"


@pytest.mark.parametrize("streamed", [False, True])
def test_judge_bodies_past_their_budget_wait_their_turn_with_a_503_that_names_it(streamed):
    """Each judge request in flight holds about twice its body until its judging ends: past
    RUN_JUDGE_BODIES_MAX, a new one is 503 with Retry-After, its body unread, and is served once
    the one before has ended (its answer streamed or not)."""
    import threading

    srv = Server({**ENV, "RUN_JUDGE_BODIES_MAX": "3m"}).wait_ready()
    try:
        padding = "x" * (MIB - 4096)  # each body just under 1 MiB: holds ~2 of the 3 MiB
        slow = {"lang_slug": "python", "solution_text": "import time\ntime.sleep(4)\n", "tests": [{"stdin": padding}], "compare": "none", "limits": {"time": "5s", "wall_time": "10s"}}
        quick = {**slow, "solution_text": "pass\n"}
        headers = {"Accept": "application/x-ndjson"} if streamed else {}
        first: dict = {}
        worker = threading.Thread(target=lambda: first.update(answer=srv.client.post("/judge", json=slow, headers=headers, timeout=120)))
        worker.start()
        assert wait_until(lambda: srv.busy_slots(), timeout=30), "the first request's test did not start"
        refused = srv.client.post("/judge", json=quick, timeout=60)
        assert refused.status_code == 503, refused.text
        assert "RUN_JUDGE_BODIES_MAX" in refused.json()["error"] and refused.headers["Retry-After"].isdigit()
        worker.join(60)
        assert first["answer"].status_code == 200, first["answer"].text
        served = srv.client.post("/judge", json=quick, timeout=60)
        assert served.status_code == 200 and served.json()["verdict"] == "AC", served.text
    finally:
        srv.stop()
