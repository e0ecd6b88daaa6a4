"""`kiln judge`: a problem setter's client of a running kiln's /judge (DESIGN.md, "Judge API").

    kiln judge SOLUTION TESTS_DIR --lang SLUG [--url URL] [--compare MODE] [--epsilon E]
               [--checker FILE --checker-lang SLUG] [--time 2s] [--memory 256m]
               [--stop-on-failure] [--api-key KEY]

Tests are NAME.in with NAME.out or NAME.ans beside it, judged in natural order of NAME (2
before 10). Each input and answer goes to the server's file store once: its id is the sha256 of
its bytes, computed here; HEAD /files/<id> tells whether the server has it, POST /files uploads
it. One POST /judge then names the tests by id. stdout: a row per test and the overall verdict
(the compiler's words on CE); stderr: progress (a bar and a spinner on a terminal, plain lines
otherwise). Exit status 0 on AC, 1 on any other verdict, 2 on a usage or connection error.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import itertools
import json
import os
import re
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from kiln.units import parse_duration_ms, parse_size

DEFAULT_URL = "http://127.0.0.1:4040"
COMPARES = ("tokens", "lines", "exact", "float", "none", "checker")
ANSWER_SUFFIXES = (".out", ".ans")
WORKERS = 8  # files checked and uploaded at a time
CHUNK = 1 << 16
CONNECT_TIMEOUT = 10
FILES_TIMEOUT = 120  # seconds an answer of /files may take; /judge takes as long as its tests do
BUSY_RETRIES = 5


class UsageError(Exception):
    """Exit 2; the message says what to do."""


@dataclass(frozen=True)
class TestCase:
    name: str
    input: Path
    answer: Path | None


def add_parser(commands) -> None:
    judge = commands.add_parser(
        "judge",
        help="judge a solution on a folder of NAME.in/NAME.out tests with a running kiln",
        description="Judge SOLUTION on the tests of TESTS_DIR (NAME.in with NAME.out or NAME.ans) with a running kiln's /judge. "
        "Exit status 0 on AC, 1 on any other verdict, 2 on a usage or connection error.",
    )
    judge.add_argument("solution", type=Path, metavar="SOLUTION", help="the source file (sent as the language's judge file)")
    judge.add_argument("tests", type=Path, metavar="TESTS_DIR", help="a folder of NAME.in and NAME.out (or NAME.ans) files")
    judge.add_argument("--lang", required=True, metavar="SLUG", help="the solution's language (GET /languages: those with judge true)")
    judge.add_argument("--url", default=DEFAULT_URL, help=f"the kiln server (default {DEFAULT_URL})")
    judge.add_argument("--compare", choices=COMPARES, metavar="MODE", help=f"{', '.join(COMPARES)}: how outputs are compared (default tokens; checker when --checker is given)")
    judge.add_argument("--epsilon", type=float, metavar="E", help="for --compare float: the absolute or relative error allowed (default 1e-6)")
    judge.add_argument("--checker", type=Path, metavar="FILE", help="a testlib-style checker's source (args: input, output, answer)")
    judge.add_argument("--checker-lang", metavar="SLUG", help="the checker's language")
    judge.add_argument("--time", type=_checked(parse_duration_ms, "a duration such as 500ms, 2s or 1m"), metavar="DURATION", help="CPU time of each test (default: the language's judge_time)")
    judge.add_argument("--memory", type=_checked(parse_size, "a size such as 65536, 64k, 256m or 1g"), metavar="SIZE", help="memory of each test (default: the server's maximum)")
    judge.add_argument("--stop-on-failure", action="store_true", help="skip the tests after the first that is not AC")
    judge.add_argument("--api-key", default=os.environ.get("KILN_API_KEY"), metavar="KEY", help="a bearer key of RUN_API_KEYS (default: $KILN_API_KEY)")


def main(args) -> int:
    progress = Progress(sys.stderr)
    try:
        answer = judge(args, progress)
    except UsageError as error:
        progress.stop()
        print(f"kiln judge: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        progress.stop()
        return 128 + signal.SIGINT
    print_answer(answer, sys.stdout)
    return 0 if answer["verdict"] == "AC" else 1


def judge(args, progress: Progress) -> dict:
    compare = args.compare or ("checker" if args.checker else "tokens")
    if (compare == "checker") != (args.checker is not None) or (args.checker is None) != (args.checker_lang is None):
        raise UsageError("a checker takes --checker FILE and --checker-lang SLUG (and --compare checker or no --compare)")
    solution = read_text(args.solution, "SOLUTION")
    checker = read_text(args.checker, "--checker") if args.checker else None
    tests = find_tests(args.tests, answers_needed=compare not in ("checker", "none"))
    if compare == "none":  # the run alone decides: no answer is sent
        tests = [TestCase(t.name, t.input, None) for t in tests]
    api = Api(args.url, args.api_key)
    progress.say(f"{len(tests)} tests in {args.tests}")
    ids = upload(api, [p for t in tests for p in (t.input, t.answer) if p is not None], progress)
    body = {
        "lang_slug": args.lang,
        "solution_text": solution,
        "tests": [{"stdin_file": ids[t.input], **({"expected_file": ids[t.answer]} if t.answer else {})} for t in tests],
        "compare": compare,
    }
    if checker is not None:
        body["checker"] = {"lang_slug": args.checker_lang, "source": checker}
    if args.epsilon is not None:
        body["epsilon"] = args.epsilon
    limits = {k: v for k, v in (("time", args.time), ("memory", args.memory)) if v is not None}
    if limits:
        body["limits"] = limits
    if args.stop_on_failure:
        body["stop_on_failure"] = True
    started = time.monotonic()
    progress.wait(f"judging {len(tests)} tests in {args.lang}")
    answer = api.judge(body, {v: k for k, v in ids.items()})
    progress.stop()
    build = "a cached build" if answer["compile"].get("cached") else "a new build"
    progress.say(f"judged in {time.monotonic() - started:.1f}s ({build})")
    for test, row in zip(tests, answer["tests"]):
        row["name"] = test.name
    return answer


def find_tests(folder: Path, answers_needed: bool) -> list[TestCase]:
    """NAME.in files with their NAME.out or NAME.ans, in natural order of NAME."""
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder: TESTS_DIR holds the tests as NAME.in with NAME.out or NAME.ans")
    inputs = sorted((p for p in folder.iterdir() if p.suffix == ".in" and p.is_file()), key=lambda p: natural_key(p.stem))
    if not inputs:
        raise UsageError(f"{folder} has no NAME.in files: put each test there as NAME.in with NAME.out or NAME.ans")
    tests = []
    for path in inputs:
        answer = next((a for a in (path.with_suffix(s) for s in ANSWER_SUFFIXES) if a.is_file()), None)
        tests.append(TestCase(path.stem, path, answer))
    missing = [t.name + ".in" for t in tests if t.answer is None]
    if missing and answers_needed:
        listed = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise UsageError(f"no answer for {listed} in {folder}: add NAME.out or NAME.ans beside each NAME.in, or pass --compare none (the run alone decides) or a --checker")
    return tests


def natural_key(name: str) -> list:
    """'test10' after 'test2': runs of digits compare as numbers (ties: the name itself)."""
    parts = re.split(r"([0-9]+)", name)
    return [int(part) if i % 2 else part for i, part in enumerate(parts)] + [name]


def read_text(path: Path, what: str) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as error:
        raise UsageError(f"cannot read {what} {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{what} {path} is not UTF-8 text: save it as UTF-8") from None


def file_id(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def upload(api: Api, paths: list[Path], progress: Progress) -> dict[Path, str]:
    """Each file's id, once the server has it: uploaded only where it answers 404."""
    try:
        ids = {path: file_id(path) for path in paths}
    except OSError as error:
        raise UsageError(f"cannot read {error.filename}: {error.strerror}") from None
    unique = {i: p for p, i in ids.items()}  # a content twice is one file
    uploaded = sent = 0
    with ThreadPoolExecutor(WORKERS) as pool:
        futures = [pool.submit(api.ensure_file, i, p) for i, p in unique.items()]
        try:
            for done, future in enumerate(as_completed(futures), 1):
                size = future.result()
                if size is not None:
                    uploaded, sent = uploaded + 1, sent + size
                progress.bar("uploading tests", done, len(futures))
        except BaseException:  # the first error ends the uploads not yet started
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    progress.stop()
    if uploaded:
        progress.say(f"{uploaded} files uploaded ({human_size(sent)}), {len(unique) - uploaded} already on the server")
    else:
        progress.say(f"all {len(unique)} files already on the server")
    return ids


class Api:
    def __init__(self, url: str, key: str | None):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"--url {url!r} is not an http:// or https:// address (e.g. {DEFAULT_URL})")
        self.url, self.parts = url.rstrip("/"), parts
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}

    def call(self, method: str, path: str, body=None, headers: dict | None = None, timeout: float | None = FILES_TIMEOUT) -> tuple[int, bytes, http.client.HTTPMessage]:
        kind = http.client.HTTPSConnection if self.parts.scheme == "https" else http.client.HTTPConnection
        conn = kind(self.parts.hostname, self.parts.port, timeout=CONNECT_TIMEOUT)
        try:
            try:
                conn.connect()
            except OSError as error:
                raise UsageError(f"server not reachable at {self.url} ({reason(error)}): start it with `kiln serve`, or give its address with --url") from None
            conn.sock.settimeout(timeout)
            try:
                conn.request(method, self.parts.path.rstrip("/") + path, body=body, headers={**self.headers, **(headers or {})})
                response = conn.getresponse()
                return response.status, response.read(), response.headers
            except (OSError, http.client.HTTPException) as error:
                raise UsageError(f"the connection to {self.url} broke during {method} {path} ({reason(error)}): is the server running? retry") from None
        finally:
            conn.close()

    def ensure_file(self, id_: str, path: Path) -> int | None:
        """Uploads `path` unless the server has `id_`: its size if uploaded, else None."""
        status, body, _ = self.call("HEAD", f"/files/{id_}")
        if status == 200:
            return None
        if status != 404:
            self.refused(status, body, f"HEAD /files/{id_}")
        size = path.stat().st_size
        with path.open("rb") as file:
            status, body, _ = self.call("POST", "/files", file, {"Content-Length": str(size), "Content-Type": "application/octet-stream"})
        if status == 413:
            raise UsageError(f"{path} is larger than the server's RUN_FILE_MAX: split the test or raise RUN_FILE_MAX")
        if status not in (200, 201):
            self.refused(status, body, "POST /files")
        if json.loads(body).get("id") != id_:
            raise UsageError(f"{path} is no longer what was read (its sha256 was {id_}): did it change meanwhile? run again")
        return size

    def judge(self, body: dict, paths: dict[str, Path]) -> dict:
        """POST /judge; a file the store lost since its upload is sent again, a 429 retried."""
        raw = json.dumps(body).encode()
        resent = busy = 0
        while True:
            status, answer, headers = self.call("POST", "/judge", raw, {"Content-Type": "application/json"}, timeout=None)
            error = error_of(answer)
            lost = re.match(r"unknown file (sha256:[0-9a-f]{64})", error)
            if status == 400 and lost and lost.group(1) in paths and resent < len(paths):
                self.ensure_file(lost.group(1), paths[lost.group(1)])
                resent += 1
            elif status == 429 and busy < BUSY_RETRIES:
                busy += 1
                wait = headers.get("Retry-After", "1")
                time.sleep(int(wait) if wait.isdigit() else 1)
            elif status != 200:
                self.refused(status, answer, "POST /judge")
            else:
                return json.loads(answer)

    def refused(self, status: int, body: bytes, what: str):
        error = error_of(body)
        if status == 401:
            raise UsageError(f"{self.url} wants an API key (401): pass --api-key KEY or set KILN_API_KEY")
        if status == 404 and what.startswith("POST"):
            raise UsageError(f"{self.url} has no {what.split()[1]} (404): is it a kiln server with the judge API?")
        if status == 429:
            raise UsageError(f"{self.url} is busy (429: {error}): retry later")
        if status == 503:
            raise UsageError(f"{self.url} is shutting down (503): retry once it is back")
        if status >= 500:
            raise UsageError(f"{what} failed on the server ({status}: {error}): its log says why; retry")
        raise UsageError(f"{what} was refused ({status}): {error}")


def error_of(body: bytes) -> str:
    try:
        answer = json.loads(body)
        return answer["error"] + (f"\n{answer['detail']}" if answer.get("detail") else "")
    except (ValueError, KeyError, TypeError):
        return body[:200].decode("utf-8", "replace").strip() or "no details"


def reason(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


# -- what is shown ----------------------------------------------------------------------------
# C0 controls but newline and tab, DEL, and C1 controls: a submission's or a checker's words
# reach the problem setter's terminal, where ESC sequences retitle windows, move the cursor or
# write the clipboard (OSC 52)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(text: str) -> str:
    """Text as it may be printed to a terminal: every control character escaped (\\x1b)."""
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def print_answer(answer: dict, out) -> None:
    verdict, passed, total = answer["verdict"], answer["passed"], answer["total"]
    if verdict == "CE":  # the compiler's words first; then the tests' rows (all SK), as on any verdict
        compile_ = answer["compile"]
        words = (compile_["stdout"] + compile_["stderr"]).rstrip()
        timed_out = compile_["exit_code"] is None
        print("compilation timed out" if timed_out else f"compilation failed (exit {compile_['exit_code']}):", file=out)
        if words:
            print(shown(words), file=out)
    rows = [("test", "verdict", "time", "memory", "")]
    for test in answer["tests"]:
        stats = test["stats"] or {}
        time_ = f"{stats['cpu_ms']:.0f} ms" if "cpu_ms" in stats else "-"
        memory = human_size(stats["memory_peak_bytes"]) if "memory_peak_bytes" in stats else "-"
        rows.append((shown(test["name"]), test["verdict"], time_, memory, shown(note(test))))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows if len(rows) > 1 else ():
        print("  ".join([row[0].ljust(widths[0]), row[1].ljust(widths[1]), row[2].rjust(widths[2]), row[3].rjust(widths[3]), row[4]]).rstrip(), file=out)
    if verdict == "CE":
        print(f"verdict: CE (compilation error), 0/{total} tests passed", file=out)
        return
    first = next((shown(t["name"]) for t in answer["tests"] if t["verdict"] not in ("AC", "SK")), None)
    where = f" on test {first}" if first is not None and verdict != "AC" else ""
    print(f"verdict: {verdict}{where}, {passed}/{total} tests passed", file=out)


def note(test: dict) -> str:
    """What explains a verdict in a few words: the checker's, or an RE's exit and last stderr line."""
    message = (test.get("checker_message") or "").strip()
    if message:
        return message.splitlines()[0][:80]
    if test["verdict"] != "RE":
        return ""
    stats = test["stats"] or {}
    how = f"signal {stats['signal']}" if stats.get("signal") else f"exit {test['exit_code']}"
    last = next((line.strip() for line in reversed(test["stderr"].splitlines()) if line.strip()), "")
    return f"{how}: {last[:80]}" if last else how


def human_size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


class Progress:
    """Progress on stderr: a bar and a spinner redrawn in place on a terminal, plain lines (and
    no bar) otherwise."""

    def __init__(self, stream):
        self.stream = stream
        self.tty = stream.isatty()
        self.drawn = False
        self.spinning: threading.Event | None = None
        self.spinner: threading.Thread | None = None

    def say(self, text: str) -> None:
        self.stream.write(f"kiln judge: {text}\n")
        self.stream.flush()

    def bar(self, label: str, done: int, total: int, width: int = 30) -> None:
        if self.tty:
            filled = width * done // max(total, 1)
            self._draw(f"{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")

    def wait(self, label: str) -> None:
        if not self.tty:
            self.say(label + "...")
            return
        self.spinning = stop = threading.Event()
        started = time.monotonic()

        def spin() -> None:
            frames = "|/-\\"
            for i in itertools.count():
                self._draw(f"{frames[i % 4]} {label} {time.monotonic() - started:.1f}s")
                if stop.wait(0.1):
                    return

        self.spinner = threading.Thread(target=spin, daemon=True)
        self.spinner.start()

    def stop(self) -> None:
        if self.spinning is not None:
            self.spinning.set()
            self.spinner.join()
            self.spinning = self.spinner = None
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False

    def _draw(self, text: str) -> None:
        self.stream.write(f"\r{text}\x1b[K")
        self.stream.flush()
        self.drawn = True


def _checked(parse, example: str):
    """An argparse type: the text as given (the server parses it too), refused here if `parse` refuses it."""

    def check(text: str) -> str:
        try:
            parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {example}") from None
        return text

    return check
