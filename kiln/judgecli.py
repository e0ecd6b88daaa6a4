"""`kiln judge`: a problem setter's client of a running kiln's /judge (DESIGN.md, "Judge API").

    kiln judge SOLUTION TESTS_DIR|PACKAGE_DIR --lang SLUG [--url URL] [--compare MODE] [--epsilon E] [--float-rule RULE] [--ignore-case]
               [--checker FILE --checker-lang SLUG] [--time 2s] [--memory 256m] [--address-space 256m]
               [--stop-on-failure] [--pretests] [--api-key KEY]

Tests are NAME.in with NAME.out or NAME.ans beside it, judged in natural order of NAME (2
before 10); or a problem package known by its marker file (kiln/packages/: Polygon's problem.xml,
Kattis's problem.yaml, DMOJ's init.yml): its limits, points, groups, comparison, checker and
interactor, the command line's options before its own. Each input and answer goes to the server's file store once: its id is the sha256 of
its bytes, computed here; HEAD /files/<id> tells whether the server has it, POST /files uploads
it. One POST /judge then names the tests by id. stdout: a row per test and the overall verdict
(the compiler's words on CE); stderr: progress (a bar and a spinner on a terminal, plain lines
otherwise), read from the streamed answer (kiln/judge_client.py): the build's end, the tests ended
and the first failure as they come. Exit status 0 on AC, 1 on any other verdict, 2 on a usage or connection error.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import re
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from kiln import packages
from kiln.packages import common
from kiln.judge.compare import BYTE_MODES, FLOAT_MODES, MODES
from kiln.judge.numbers import RULES
from kiln.judge_client import DEFAULT_URL, Api, UsageError
from kiln.units import parse_duration_ms, parse_size

ANSWER_SUFFIXES = (".out", ".ans")
WORKERS = 8  # files checked and uploaded at a time
CHUNK = 1 << 16


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
    judge.add_argument("tests", type=Path, metavar="TESTS_DIR", help="a folder of NAME.in and NAME.out (or NAME.ans) files, or a problem package: Polygon (problem.xml), Kattis (problem.yaml), DMOJ (init.yml)")
    judge.add_argument("--lang", required=True, metavar="SLUG", help="the solution's language (GET /languages: those with judge true)")
    judge.add_argument("--url", default=DEFAULT_URL, help=f"the kiln server (default {DEFAULT_URL})")
    judge.add_argument("--compare", choices=MODES, metavar="MODE", help=f"{', '.join(MODES)}: how outputs are compared (default tokens; checker when --checker is given)")
    judge.add_argument("--epsilon", type=float, metavar="E", help=f"for --compare {', '.join(FLOAT_MODES)}: the absolute or relative error allowed (default 1e-6; a package's own tolerances otherwise)")
    judge.add_argument("--float-rule", choices=RULES, metavar="RULE", help=f"{', '.join(RULES)}: whose arithmetic decides numbers (default decimal, exact as written; kattis and dmoj: in doubles as those judges do; a Kattis or DMOJ package asks for its own)")
    judge.add_argument("--ignore-case", action="store_true", help="compare ASCII letters ignoring case (with a comparing MODE; a Kattis package's default validation asks for it itself)")
    judge.add_argument("--checker", type=Path, metavar="FILE", help="a testlib-style checker's source (args: input, output, answer)")
    judge.add_argument("--checker-lang", metavar="SLUG", help="the checker's language")
    judge.add_argument("--time", type=_checked(parse_duration_ms, "a duration such as 500ms, 2s or 1m"), metavar="DURATION", help="CPU time of each test (default: the language's judge_time)")
    judge.add_argument("--memory", type=_checked(parse_size, "a size such as 65536, 64k, 256m or 1g"), metavar="SIZE", help="memory of each test (default: the server's maximum)")
    judge.add_argument("--address-space", type=_checked(parse_size, "a size such as 65536, 64k, 256m or 1g"), metavar="SIZE", help="address space of each test, as DMOJ and Codeforces count memory (default: none; README: which to choose)")
    judge.add_argument("--pretests", action="store_true", help="a DMOJ package: judge its pretest_test_cases alone, with their points, as a contest with pretests does (default: its pretests at 0 points, then its test_cases, as DMOJ's full judging)")
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
    package = read_package(args.tests, args.pretests)
    from_package = package is not None and package.checker is not None and args.compare in (None, "checker") and args.checker is None
    own_compare = package.compare if package is not None and args.checker is None else None  # a Kattis or DMOJ package's mode
    compare = args.compare or ("checker" if args.checker or from_package else own_compare or "tokens")
    if not from_package and ((compare == "checker") != (args.checker is not None) or (args.checker is None) != (args.checker_lang is None)):
        raise UsageError("a checker takes --checker FILE and --checker-lang SLUG (and --compare checker or no --compare)")
    if args.ignore_case and compare not in BYTE_MODES:
        raise UsageError(f"--ignore-case goes with --compare {', '.join(BYTE_MODES)} (the comparison is {compare} here)")
    for option, given in (("--epsilon", args.epsilon), ("--float-rule", args.float_rule)):
        if given is not None and compare not in FLOAT_MODES:
            raise UsageError(f"{option} goes with --compare {', '.join(FLOAT_MODES)} (the comparison is {compare} here)")
    solution = read_text(args.solution, "SOLUTION")
    checker = read_text(args.checker, "--checker") if args.checker else None
    interactive = package is not None and package.interactor is not None
    answers_needed = compare not in ("checker", "none") and not interactive
    if package is None:
        tests = find_tests(args.tests, answers_needed)
    else:
        tests = [TestCase(t.name, t.input, t.answer) for t in package.tests]
        missing = [t.name for t in tests if t.answer is None]
        if missing and answers_needed:
            raise UsageError(f"no answer for test {missing[0]} in {args.tests}: the package names no answer file for it; pass --compare none or a --checker")
    if compare == "none":  # the run alone decides: no answer is sent
        tests = [TestCase(t.name, t.input, None) for t in tests]
    helpers = {role: h for role, h in (("checker", package.checker if from_package else None), ("interactor", package.interactor if package else None)) if h is not None}
    api = Api(args.url, args.api_key)
    progress.say(f"{len(tests)} tests in {args.tests}" + (f" (a {package.layout} package)" if package else ""))
    for said in package.notes if package else ():
        progress.say(said)
    helper_files = [path for helper in helpers.values() for _, path in helper.files]
    ids = upload(api, [p for t in tests for p in (t.input, t.answer) if p is not None] + helper_files, progress)
    body = {
        "lang_slug": args.lang,
        "solution_text": solution,
        "tests": [{"stdin_file": ids[t.input], **({"expected_file": ids[t.answer]} if t.answer else {})} for t in tests],
    }
    if not interactive or compare == "checker":
        body["compare"] = compare
    if checker is not None:
        body["checker"] = {"lang_slug": args.checker_lang, "source": checker}
    for role, helper in helpers.items():  # the package's checker and interactor, testlib.h by id
        body[role] = {"lang_slug": helper.lang, "source": helper.source, "files": {name: {"file": ids[path]} for name, path in helper.files}}
    if package is not None:
        for test, given in zip(body["tests"], package.tests):
            if given.points is not None:
                test["points"] = given.points
        if package.groups:
            body["groups"] = list(package.groups)
    if compare in FLOAT_MODES:  # the package's own tolerances go with its own comparison; --epsilon and --float-rule before them
        tolerance = dict(package.tolerance) if package is not None and args.compare is None else {}
        if args.epsilon is not None:
            tolerance = {"epsilon": args.epsilon, **({"float_rule": tolerance["float_rule"]} if "float_rule" in tolerance else {})}
        if args.float_rule is not None:
            tolerance["float_rule"] = args.float_rule
        body.update(tolerance)
    # the package's case rule goes with its own comparison; --compare without --ignore-case compares case
    if compare in BYTE_MODES and (args.ignore_case or (package is not None and package.ignore_case and args.compare is None)):
        body["ignore_case"] = True
    time_, memory = args.time, args.memory
    if package is not None:  # the package's limits unless the command line gives its own
        time_ = time_ or (f"{package.time_ms}ms" if package.time_ms else None)
        memory = memory or (str(package.memory_bytes) if package.memory_bytes else None)
    limits = {k: v for k, v in (("time", time_), ("memory", memory), ("address_space", args.address_space)) if v is not None}
    if limits:
        body["limits"] = limits
    if args.stop_on_failure:
        body["stop_on_failure"] = True
    started = time.monotonic()
    progress.wait(f"building {args.solution.name} in {args.lang}")
    answer = api.judge(body, {v: k for k, v in ids.items()}, Judging(progress, [t.name for t in tests]).heard)
    progress.stop()
    build = "a cached build" if answer["compile"].get("cached") else "a new build"
    progress.say(f"judged in {time.monotonic() - started:.1f}s ({build})")
    for test, row in zip(tests, answer["tests"]):
        row["name"] = test.name
    return answer


class Judging:
    """The streamed answer's lines as progress: the build's end said once, then on a terminal a
    bar of the tests ended ("12/1000, running on test 13"), the first failure named as it comes."""

    def __init__(self, progress: Progress, names: list[str]):
        self.progress, self.names = progress, names
        self.ended: set[int] = set()
        self.lowest = 0  # the first test not ended: the one a site would say runs
        self.failed: str | None = None

    def heard(self, line: dict) -> None:
        if line["event"] == "compile":
            self.progress.stop()
            if line["exit_code"] != 0:
                self.progress.say("the build failed")
                return
            self.progress.say(f"built ({'cached' if line.get('cached') else 'new'}), running {len(self.names)} tests")
        elif line["event"] == "test":
            self.ended.add(line["index"])
            if self.failed is None and line["verdict"] not in ("AC", "SK"):
                self.failed = f"{line['verdict']} on test {self.names[line['index']]}"
                self.progress.stop()
                self.progress.say(f"first failure so far: {shown(self.failed)}")
            while self.lowest in self.ended:
                self.lowest += 1
            where = f", running on test {shown(self.names[self.lowest])}" if self.lowest < len(self.names) else ""
            self.progress.bar("judging", len(self.ended), len(self.names), suffix=where)


def read_package(folder: Path, pretests: bool = False) -> packages.Package | None:
    """The package in `folder` by its marker file, or None for a plain tests folder; with
    `pretests`, a package's pretests alone (a format without them is a usage error)."""
    reader = packages.reader_of(folder)
    if reader is None or not reader.PRETESTS:
        if pretests:
            raise UsageError(f"--pretests judges a DMOJ package's pretest_test_cases alone; {folder} is " + (f"a {reader.LAYOUT} package, which has no pretests" if reader else "no DMOJ package"))
        if reader is None:
            return None
    try:
        return reader.read(folder, pretests=True) if pretests else reader.read(folder)
    except packages.PackageError as error:
        raise UsageError(f"the {reader.LAYOUT} package in {folder}: {error}") from None


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
    """A file given on the command line, as UTF-8 text (the packages' reader's rule)."""
    try:
        return common.read_text(path, what)
    except packages.PackageError as error:
        raise UsageError(str(error)) from None


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
    if "score" in answer:  # points or groups (a package's)
        groups = "".join(f", group {shown(g['name'])} {g['score']}/{g['max_score']}" for g in answer.get("groups", []))
        print(f"score: {answer['score']}/{answer['max_score']}{groups}", file=out)
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

    def bar(self, label: str, done: int, total: int, width: int = 30, suffix: str = "") -> None:
        if self.tty:
            filled = width * done // max(total, 1)
            self._draw(f"{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}{suffix}")

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
