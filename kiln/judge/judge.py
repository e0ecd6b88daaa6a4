"""One judge request, from its build to its answer (DESIGN.md, "Judge API"):

    answer = judge.run(request, files, gone)

build (once: the build cache, else a build job in one slot; its layer kept) -> tests (each an
exec job in a fresh slot on the build's layer, up to RUN_JUDGE_PARALLEL at a time, started in
index order, through the same Runner as /run) -> each test's verdict (its run's own, else the
comparison) -> a JudgeAnswer (kiln/judge/answer.py; its JSON is kiln/http/answers.py's).

With compare "checker", the checker is built first the same way (and cached), and runs after
each test whose run gave no verdict of its own, in a sandbox of its own on its own build, with its
input, the test's output and the expected answer as three files given as its arguments
(testlib's convention: exit 0 AC, 1 WA, 2 PE, anything else or any other end IE).

With an interactor, each test is the submission and the interactor at once, in a pair of slots;
with a checker too (Polygon's model), the interactor's record comes back with its result and the
checker judges it after the interactor's AC, as it would a test's output.

Failures that end the request are exceptions: Busy, NoWarmSlot, ShuttingDown (no slot for a
build), Cancelled (the client left: the tests not started never start, those running are
cancelled), UnknownFile (a test names a file the store lacks), DoesNotBuild (the checker or the
interactor), TooMuchSource (a build's stored files past what a build job carries).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from typing import Protocol

import gevent
import gevent.event
import gevent.threadpool

from kiln.judge import compare, scoring
from kiln.judge.answer import CompileResult, JudgeAnswer, TestResult, cut
from kiln.judge.offload import offload
from kiln.judge.builds import Build, Builds, not_runnable
from kiln.judge.files import FileStore
from kiln.judge.request import GIVEN_FILES, JudgeRequest, Source, Test, TestLimits
from kiln.judge.sources import given, read, read_build_files, stdin_of
from kiln.log import Log
from kiln.run.runner import Cancelled, Runner, Session, SlotLost
from kiln.runtime import Runtime
from kiln.wire.protocol import ByDescriptor, Job, Limits, ProtocolError, RunResult, read_layer

# verdicts of a test, in the order the first that applies is given (DESIGN.md)
VERDICTS = ("SK", "TLE", "MLE", "OLE", "SV", "RE", "AC", "PT", "WA", "PE", "IE")
CHECKER_WALL_MS = 10_000  # a checker's; an interactor's at least its test's wall time + 1 s; never past RUN_TIMEOUT_MAX
CHECKER_VERDICTS = {0: "AC", 1: "WA", 2: "PE"}  # testlib's exit codes; any other: IE
# an interactor's verdicts that stand when it ended before the submission (interactive_verdict)
INTERACTOR_FIRST_VERDICTS = ("WA", "PE")
# a comparison of at most this many bytes (output and inline expected answer) runs on the event
# loop (~3 ms of tokens at worst): a thread's hand-over would cost more than it saves
COMPARE_INLINE_MAX = 16 * 1024
COMPARE_THREADS = 2


class DoesNotBuild(Exception):
    """The checker's build failed: `detail` is its compiler's words."""

    def __init__(self, what: str, detail: str):
        super().__init__(f"{what} does not build")
        self.what, self.detail = what, detail


class Progress(Protocol):
    """Who hears a request's progress while it is judged (a streamed answer, kiln/http/judge_stream.py):
    the compile result once the build ends, then each test as the answer shows it, in the order
    the tests end (every test once; SK ones too)."""

    def compiled(self, compile: CompileResult) -> None: ...

    def tested(self, index: int, test: TestResult) -> None: ...


class _Unheard:
    def compiled(self, compile: CompileResult) -> None:
        pass

    def tested(self, index: int, test: TestResult) -> None:
        pass


_NO_PROGRESS = _Unheard()


class Judge:
    def __init__(self, runner: Runner, runtime: Runtime, builds: Builds, log: Log, parallel: int):
        self.runner = runner
        self.runtime = runtime
        self.builds = builds
        self.log = log
        self.parallel = parallel
        # comparisons too large for the event loop: a bounded pool (the GIL runs one at a time;
        # a second thread keeps a small one from waiting behind a 1 MiB one)
        self.comparisons = gevent.threadpool.ThreadPool(COMPARE_THREADS)

    def run(self, request: JudgeRequest, files: FileStore | None, gone: gevent.event.Event | None = None, client: str = "", progress: Progress | None = None) -> JudgeAnswer:
        """The request judged; `client` is whose it is (its admission's and its builds' turns);
        `progress` hears the compile result once the build ends, then each test as it ends."""
        progress = progress or _NO_PROGRESS
        started = time.monotonic()
        # every build's files read first (a stored one may be too large: a 400 before any build)
        limit = self.runtime.config.judge_part_max
        programs = [program for program in (request.checker, request.interactor) if program is not None]
        helper_sources = [read_build_files(p.files, files, limit, f"{p.role}.files") for p in programs]
        sources = read_build_files(request.files, files, limit, "files")
        with contextlib.ExitStack() as held:
            held.enter_context(self.runner.admitted(gone, client))  # RUN_JUDGE_MAX at once, the others wait their turn
            helpers: dict[str, Build] = {}  # the checker's and the interactor's builds, by role
            for program, program_sources in zip(programs, helper_sources):
                helper, compiled = self._build(program.slug, program_sources, request.compile_timeout_ms, gone, client)
                if helper is None:
                    raise DoesNotBuild(program.role, compiled.stdout + compiled.stderr)
                helpers[program.role] = held.enter_context(self.builds.held(helper))
            build, compiled = self._build(request.slug, sources, request.compile_timeout_ms, gone, client)
            progress.compiled(compiled)
            if build is None:  # a compile error: nothing runs
                verdict, tests = "CE", [TestResult.not_run() for _ in request.tests]
                for index, test in enumerate(tests):
                    progress.tested(index, scoring.shown_test(request.scoring, index, test))
            else:
                held.enter_context(self.builds.held(build))
                tests = self._tests(request, build, helpers, files, gone, progress)
                verdict = None
        scores = None
        if request.scoring.scored:
            scores, tests = scoring.score_answer(request.scoring, tests)
        verdict = verdict or next((t.verdict for t in tests if t.verdict not in ("AC", "SK")), "AC")
        return JudgeAnswer(verdict, compiled, tuple(tests), round((time.monotonic() - started) * 1000, 1), scores)

    # -- the build ------------------------------------------------------------------------------
    def _build(self, slug: str, sources: tuple[tuple[str, bytes], ...], timeout_ms: int, gone, client: str) -> tuple[Build | None, CompileResult]:
        """A build of these sources (None when it failed) and its compile result."""
        workload = self.runtime.workloads[slug]
        key = Builds.key(slug, self.runtime.versions.get(slug), workload.build_argv or (), sources)
        while True:  # an identical submission's build under way: wait for it, then look again
            cached = self.builds.get(key)
            if cached is not None:
                return cached, dataclasses.replace(cached.compile, cached=True)
            with self.builds.built_once(key) as mine:
                if mine:
                    return self._build_now(slug, key, sources, timeout_ms, gone, client)

    def _build_now(self, slug: str, key: str, sources: tuple[tuple[str, bytes], ...], timeout_ms: int, gone, client: str) -> tuple[Build | None, CompileResult]:
        job = Job(slug, timeout_ms, sources, command="build")
        result = self.runner.run(job, gone, client=client).result
        compiled = CompileResult.of(result)
        if result.outcome != "exited" or result.exit_code != 0 or result.returned is None:
            return None, compiled
        try:
            entries = offload(read_layer, result.returned)  # up to LAYER_MAX: parsed off the loop
        except ProtocolError as error:
            self.log.error("a build's layer is unusable", lang=slug, error=str(error))
            raise SlotLost(str(error)) from None
        workload = self.runtime.workloads[slug]
        reason = not_runnable(workload.exec_argv or (), entries, workload.folder)
        if reason is not None:  # CE: the submission's fault, said as the compiler's words are
            return None, dataclasses.replace(compiled, stderr=cut(reason.encode() + result.stderr))
        try:
            return self.builds.put(key, entries, compiled), compiled
        except ProtocolError as error:
            self.log.error("a build's layer is unusable", lang=slug, error=str(error))
            raise SlotLost(str(error)) from None

    # -- the tests ------------------------------------------------------------------------------
    def _tests(self, request: JudgeRequest, build: Build, helpers: dict[str, Build], files: FileStore | None, gone, progress: Progress) -> list[TestResult]:
        """Workers take the tests in index order, each test in a fresh sandbox, on at most
        RUN_JUDGE_PARALLEL slots at a time: a worker keeps its slot from one test to the next
        where the slot can (a Session); an interactive test takes a pair of slots of its own, so
        half as many workers run those (one at least: RUN_CONCURRENCY=1 refuses interactors)."""
        answers: list[TestResult | None] = [None] * len(request.tests)
        scored = request.scoring.scored
        failed_at = [len(request.tests)]  # the first test (by index) known not to be AC
        upcoming = iter(enumerate(request.tests))

        def worker() -> None:
            with self.runner.session(gone) as session:
                for index, test in upcoming:
                    if gone is not None and gone.is_set():
                        raise Cancelled
                    if index > failed_at[0]:
                        return
                    if scored and scoring.not_to_run(request.scoring, index, answers, request.stop_on_failure):
                        answers[index] = TestResult.not_run()
                        progress.tested(index, scoring.shown_test(request.scoring, index, answers[index]))
                        continue
                    if request.interactor:
                        answer = self._interactive_test(request, build, helpers, test, files, gone)
                    else:
                        answer = self._test(request, build, helpers.get("checker"), test, files, gone, session)
                    answers[index] = answer
                    progress.tested(index, scoring.shown_test(request.scoring, index, answer))
                    if request.stop_on_failure and not scored and answer.verdict != "AC":
                        failed_at[0] = min(failed_at[0], index)  # with points or groups: per group (not_to_run)

        slots_a_test = 2 if request.interactor else 1
        workers = [gevent.spawn(worker) for _ in range(min(max(1, self.parallel // slots_a_test), len(request.tests)))]
        try:
            gevent.joinall(workers, raise_error=True)
        except BaseException:
            gevent.killall(workers)
            raise
        for index, answer in enumerate(answers):
            if answer is None:  # after a failure with stop_on_failure: never started
                answers[index] = TestResult.not_run()
                progress.tested(index, scoring.shown_test(request.scoring, index, answers[index]))
        return answers

    def _test(self, request: JudgeRequest, build: Build, checker: Build | None, test: Test, files: FileStore | None, gone, session: Session) -> TestResult:
        """One test; an input of the store goes to the slot as a descriptor of its file (the
        task reads it there: no copy in the front)."""
        limits = request.limits
        with stdin_of(test.stdin, files) as (stdin, stdin_file):
            job = Job(request.slug, limits.wall_time_ms, (), stdin=stdin, stdin_file=stdin_file, command="exec", limits=_job_limits(limits), layer=build.name)
            try:
                result = session.run(job).result
            except SlotLost as error:
                self.log.error("a judge test's slot was lost", lang=request.slug, error=str(error))
                return TestResult.not_run("IE")
        verdict, message, partial = run_verdict(result, limits.time_ms, limits.memory), None, None
        if verdict is None and checker is not None:
            with contextlib.ExitStack() as opened:  # the store's files by descriptor, closed after the checker
                texts = (given(test.stdin, files, opened), result.stdout, given(test.expected, files, opened))
                verdict, message, partial = self._check(request, checker, texts, session, request.scoring.full(test.index))
        elif verdict is None:
            verdict = self._compared(request, result.stdout, test.expected, files)
        return TestResult.of(verdict, result, message, partial)

    def _compared(self, request: JudgeRequest, output: bytes, expected: Source | None, files: FileStore | None) -> str:
        """The comparison's verdict. A small one runs here; a larger one in the comparisons'
        worker thread (COMPARE_THREADS), which gives the event loop's thread the GIL every PACE
        tokens: /health and the other requests go on meanwhile. An expected answer of the store
        is mapped there, never read whole into the front."""
        if request.compare == "none":
            return "AC"
        if expected is None or expected.file_id is None:
            text = read(expected, files)
            if len(output) + len(text) <= COMPARE_INLINE_MAX:
                return "AC" if compare.same(request.compare, output, text, request.tolerance, None, request.ignore_case) else "WA"
            work, argument = compare.same, text
        else:
            assert files is not None  # the request's files are pinned in the store
            work, argument = compare.same_as_file, files.descriptor(expected.file_id)  # closed by same_as_file
        same = self.comparisons.apply(work, (request.compare, output, argument, request.tolerance, _give_the_gil, request.ignore_case))
        return "AC" if same else "WA"

    def _interactive_test(self, request: JudgeRequest, build: Build, helpers: dict[str, Build], test: Test, files: FileStore | None, gone) -> TestResult:
        """The submission and its interactor at once, each in its own slot: the submission's
        stdout is the interactor's stdin and the reverse (two pipes, passed on by their inits).
        An interactor's WA or PE if it ended first, else the submission's own verdict if it has
        one, else the interactor's exit code (interactive_verdict); with a
        checker (Polygon's model), an interactor's AC goes on to the checker, which judges the
        record the interactor wrote (its second argument, given back by its init) as a test's
        output: bounded by the test's `output`, past it OLE. The input and answer of the store
        reach the interactor and the checker as descriptors of the store's files."""
        with contextlib.ExitStack() as opened:
            stdin, expected = given(test.stdin, files, opened), given(test.expected, files, opened) if test.expected is not None else None
            return self._interact(request, build, helpers, test, stdin, expected, gone)

    def _interact(self, request: JudgeRequest, build: Build, helpers: dict[str, Build], test: Test, stdin: bytes | ByDescriptor, expected: bytes | ByDescriptor | None, gone) -> TestResult:
        assert request.interactor is not None
        interactor, checker = helpers["interactor"], helpers.get("checker")
        limits = request.limits
        to_interactor, to_submission = os.pipe2(os.O_CLOEXEC), os.pipe2(os.O_CLOEXEC)
        submission = Job(
            request.slug, limits.wall_time_ms, (), command="exec", layer=build.name, pipes=(to_submission[0], to_interactor[1]),
            limits=_job_limits(limits),
        )  # fmt: skip
        # testlib's interactor arguments: input, record (it may write it), answer when the test has one
        files_of_interactor = tuple(zip(GIVEN_FILES["interactor"], (stdin, b"") + ((expected,) if expected is not None else ())))
        wall_ms = min(max(CHECKER_WALL_MS, limits.wall_time_ms + 1000), self.runtime.config.timeout_max_ms)
        # with a checker, its record comes back, within the test's output limit (its stderr is cut there too)
        record = {"give_back": GIVEN_FILES["interactor"][1], "limits": Limits(output=limits.output)} if checker is not None else {}
        helper = Job(request.interactor.slug, wall_ms, files_of_interactor, command="exec", layer=interactor.name, pipes=(to_interactor[0], to_submission[1]), **record)
        try:
            ran, judged = self.runner.run_pair(submission, helper, gone)
        except SlotLost as error:
            self.log.error("an interactive test's slot was lost", lang=request.slug, error=str(error))
            return TestResult.not_run("IE")
        result, helper_result = ran.result, judged.result
        verdict = interactive_verdict(result, helper_result, limits)
        message = cut(helper_result.stderr)
        partial = None
        if verdict == "AC" and checker is not None:
            texts = (stdin, helper_result.returned or b"", expected if expected is not None else b"")
            verdict, message, partial = self._check_record(request, checker, texts, test, gone)
        return TestResult.of(verdict, result, message, partial)

    def _check_record(self, request: JudgeRequest, checker: Build, texts: tuple[bytes | ByDescriptor, bytes, bytes | ByDescriptor], test: Test, gone) -> tuple[str, str | None, float | None]:
        """The checker on an interactor's record, in a slot of its own taken after the pair
        (and given back at once: a worker holding it while it waits for its next pair could
        leave too few slots for any pair)."""
        if len(texts[1]) > request.limits.output:
            return "OLE", f"kiln: the interactor's record is over the test's output limit ({request.limits.output} bytes)", None
        with self.runner.session(gone) as session:
            return self._check(request, checker, texts, session, request.scoring.full(test.index))

    def _check(self, request: JudgeRequest, checker: Build, texts: tuple[bytes | ByDescriptor, bytes, bytes | ByDescriptor], session: Session, full: float) -> tuple[str, str, float | None]:
        """The checker's verdict on one test, its message (stdout then stderr, cut) and the score
        it gave (testlib's quitp, exit 7: PT, or AC at the test's `full` points, WA at 0). It runs
        in the test's slot where the slot can take another job, each in a fresh sandbox as a
        test is (a slot of its own cost as much CPU as the test), with its own language's
        limits: nothing of the test is left there but the three files it is given (the input
        and answer of the store as descriptors, the output as bytes)."""
        assert request.checker is not None
        wall_ms = min(CHECKER_WALL_MS, self.runtime.config.timeout_max_ms)
        job = Job(request.checker.slug, wall_ms, tuple(zip(GIVEN_FILES["checker"], texts)), command="exec", layer=checker.name)
        try:
            result = session.run(job).result
        except SlotLost as error:
            self.log.error("a checker's slot was lost", lang=request.checker.slug, error=str(error))
            return "IE", "kiln: the checker's sandbox was lost", None
        message = cut(result.stdout + result.stderr)
        if result.outcome != "exited":
            message = message or f"kiln: the checker ended {result.outcome}"
        if result.outcome == "exited" and result.exit_code == scoring.POINTS_EXIT_CODE:
            score = scoring.checker_score(message)
            if score is None:  # testlib's points without a score: the checker failed
                return "IE", message, None
            return scoring.partial_verdict(score, full), message, score
        return helper_verdict(result), message, None


def helper_verdict(result: RunResult) -> str:
    """A checker's or an interactor's verdict from its run, in testlib's convention: exit 0 AC,
    1 WA, 2 PE; any other exit code, or any other end (killed, timed out, lost), IE."""
    if result.outcome != "exited":
        return "IE"
    return CHECKER_VERDICTS.get(result.exit_code, "IE")


def interactive_verdict(submission: RunResult, interactor: RunResult, limits: TestLimits) -> str:
    """An interactive test's verdict by who ended first, as Kattis, DOMjudge and Codeforces
    judge: an interactor that ended first with WA or PE has its verdict, whatever the submission
    then did on the closed pipe (an EOFError, a SIGPIPE, or a wait until kiln stopped it for
    time: stopped by kiln, it ended when kiln reaped it, after the interactor); else the
    submission's own verdict if it has one (TLE, MLE, RE, ...), else the interactor's. kiln's own
    failure (IE) stands either way."""
    own = run_verdict(submission, limits.time_ms, limits.memory)
    said = helper_verdict(interactor)
    if said in INTERACTOR_FIRST_VERDICTS and own != "IE" and ended_first(interactor, submission):
        return said
    return own or said


def ended_first(one: RunResult, other: RunResult) -> bool:
    """`one` was reaped strictly before `other` (both stamps kiln-init's, on the host's one
    CLOCK_MONOTONIC). A tie or a missing stamp is no "first": the submission's verdict stands."""
    return 0 < one.ended_ms < other.ended_ms


def run_verdict(result: RunResult, time_ms: int, memory: int) -> str | None:
    """The test's verdict from its run alone (None: it exited 0, the comparison decides)."""
    if result.outcome == "infrastructure_failure":
        return "IE"
    if result.outcome == "timed_out" or result.cpu_ms > time_ms:
        return "TLE"
    if result.outcome == "out_of_memory" or result.memory_peak_bytes > memory:
        return "MLE"
    if result.output_overflow:
        return "OLE"
    if result.outcome == "policy_violation":
        return "SV"
    failed = result.outcome != "exited" or result.exit_code != 0
    if failed and result.address_space_reached:
        return "MLE"  # it failed after an allocation was refused for limits.address_space (as DMOJ, Codeforces)
    if failed:
        return "RE"
    return None


def _give_the_gil() -> None:
    """A comparison thread's pause: time.sleep(0) releases the GIL, and the event loop's thread,
    if it waits for it, takes it at once rather than after the interpreter's switch interval."""
    time.sleep(0)


def _job_limits(limits: TestLimits) -> Limits:
    """A test's limits as the exec job's own."""
    return Limits(cpu_ms=limits.time_ms, memory=limits.memory, pids=limits.pids, output=limits.output, address_space=limits.address_space)
