"""POST /judge's body, checked field by field into a JudgeRequest (kiln/judge/request.py), or an
ApiError (400) that names the field and what is allowed (DESIGN.md, "Judge API"), read with
fields.py's readers as /run's body is. Nothing here runs anything."""

from __future__ import annotations

from kiln.http import fields
from kiln.http.responses import ApiError
from kiln.judge.compare import BYTE_MODES, FLOAT_MODES, MODES
from kiln.judge.files import FILE_ID
from kiln.judge.numbers import DEFAULT_EPSILON, RULES, Tolerance
from kiln.judge.request import FILE_NAME, GIVEN_FILES, JudgeRequest, Program, Source, Test, TestLimits
from kiln.judge.scoring import SCORINGS, Group, Scoring
from kiln.runtime import Runtime
from kiln.units import format_duration_ms

FILES_MAX = 64
GROUP_FIELDS = ("name", "tests", "points", "scoring", "depends")  # a group's, in `groups`
LIMITS = ("time", "wall_time", "memory", "output", "pids", "address_space")  # a test's, in `limits`
# limits.address_space's least: as limits.memory's, a size below which no program starts (a
# static binary's text and stack); a limit that small gives MLE, not an error
ADDRESS_SPACE_MIN = 1 << 20
COMPILE_TIMEOUT_MS = 30_000


def parse_judge(raw: bytes, runtime: Runtime) -> JudgeRequest:
    body = fields.json_object(raw)
    config = runtime.config
    slug = fields.required(body.get("lang_slug"), "lang_slug", str)
    solution = fields.required(body.get("solution_text"), "solution_text", str)
    workload = runtime.workloads.get(slug)
    if workload is None:
        raise ApiError(400, "unsupported lang_slug")
    if not workload.judges:
        raise ApiError(400, f"lang_slug {slug} cannot judge")
    interactor = _program(body.get("interactor"), "interactor", runtime)
    if interactor is not None and config.concurrency < 2:
        raise ApiError(400, "interactor: this server runs one slot (RUN_CONCURRENCY=1); an interactive test needs two at once")
    # an interactor alone gives the verdict; with a checker (Polygon's model), the checker judges
    # the interactor's record: compare is then checker, said or not
    with_checker, given = body.get("checker") is not None, body.get("compare")
    if interactor is not None and with_checker and given not in (None, "checker"):
        raise ApiError(400, f"interactor and checker are given: compare must be checker or omitted (got {str(given)[:40]})")
    if interactor is not None and given not in (None, "checker"):
        raise ApiError(400, "interactor is given: compare must not be (the interactor gives the verdict)")
    compare = fields.optional(body.get("compare"), "compare", str, "checker" if interactor and with_checker else "interactor" if interactor else "tokens")
    if compare not in MODES and not interactor:
        raise ApiError(400, f"compare must be one of {', '.join(MODES)} (got {compare[:40]!r})")
    checker = _program(body.get("checker"), "checker", runtime)
    if (compare == "checker") != (checker is not None):
        raise ApiError(400, "checker is required when compare is checker" if checker is None else f"checker is given: compare must be checker (got {compare})")
    tolerance = _tolerance(body, compare)
    ignore_case = fields.optional(body.get("ignore_case"), "ignore_case", bool, False)
    if ignore_case and compare not in BYTE_MODES:
        raise ApiError(400, f"ignore_case applies to compare {', '.join(BYTE_MODES)} (got compare {compare}): a checker or interactor decides case itself")
    judge_file = workload.language.judge_file
    files = ((judge_file, Source(text=fields.text(solution, "solution_text"))), *_files(body.get("files"), judge_file))
    tests = _tests(body.get("tests"), config.judge_tests_max, expected_needed=compare not in ("none", "checker", "interactor"))
    points = tuple(_points(test, f"tests[{i}]") for i, test in enumerate(body["tests"]))
    return JudgeRequest(
        slug=slug,
        files=files,
        tests=tests,
        compare=compare,
        tolerance=tolerance,
        ignore_case=ignore_case,
        limits=_limits(body.get("limits"), workload, config),
        compile_timeout_ms=fields.duration(body.get("compile_timeout"), "compile_timeout", min(COMPILE_TIMEOUT_MS, config.timeout_max_ms), config.timeout_max_ms),
        stop_on_failure=fields.optional(body.get("stop_on_failure"), "stop_on_failure", bool, False),
        checker=checker,
        interactor=interactor,
        scoring=Scoring(points, _groups(body.get("groups"), len(tests))),
    )


def _program(value, field: str, runtime: Runtime) -> Program | None:
    """A checker's (or an interactor's) {"lang_slug", "source", "files"}."""
    if value is None:
        return None
    fields.an_object(value, field, ' {"lang_slug": ..., "source": ...}')
    slug = fields.required(value.get("lang_slug"), f"{field}.lang_slug", str)
    source = fields.required(value.get("source"), f"{field}.source", str)
    workload = runtime.workloads.get(slug)
    if workload is None:
        raise ApiError(400, f"{field}.lang_slug: unsupported lang_slug")
    if not workload.judges:
        raise ApiError(400, f"{field}.lang_slug {slug} cannot judge")
    judge_file = workload.language.judge_file
    files = _files(value.get("files"), judge_file, f"{field}.", GIVEN_FILES[field])
    return Program(field, slug, ((judge_file, Source(text=fields.text(source, f"{field}.source"))), *files))


def _tolerance(body: dict, compare: str) -> Tolerance:
    """The float modes' tolerances: `epsilon` sets the absolute and the relative one (1e-6 when
    none is given); `absolute_epsilon` and `relative_epsilon` set one each, the other then 0 (it
    accepts only equal numbers, which the other accepts too: Kattis's tolerance not given);
    `float_rule` whose arithmetic decides (kiln/judge/numbers.py). Infinite tolerances are
    allowed: any difference is then within them (JSON reads 1e400 as inf)."""
    given = [name for name in ("absolute_epsilon", "relative_epsilon", "float_rule") if body.get(name) is not None]
    if given and compare not in FLOAT_MODES:
        raise ApiError(400, f"{given[0]} applies to compare {', '.join(FLOAT_MODES)} (got compare {compare})")
    absolute, relative = body.get("absolute_epsilon"), body.get("relative_epsilon")
    if body.get("epsilon") is not None and (absolute is not None or relative is not None):
        raise ApiError(400, "epsilon sets both absolute_epsilon and relative_epsilon: give epsilon alone, or absolute_epsilon and/or relative_epsilon")
    rule = fields.optional(body.get("float_rule"), "float_rule", str, "decimal")
    if rule not in RULES:
        raise ApiError(400, f"float_rule must be one of {', '.join(RULES)} (got {rule[:40]!r})")
    if absolute is None and relative is None:
        epsilon = body.get("epsilon")
        return Tolerance.both(DEFAULT_EPSILON if epsilon is None else fields.number(epsilon, "epsilon", finite=False), rule)
    tolerance = Tolerance(
        0.0 if absolute is None else fields.number(absolute, "absolute_epsilon", finite=False),
        0.0 if relative is None else fields.number(relative, "relative_epsilon", finite=False),
        rule,
    )
    if rule == "dmoj" and tolerance.dmoj_mode() is None:
        raise ApiError(400, "float_rule dmoj takes absolute_epsilon and relative_epsilon equal (DMOJ's error_mode default) or one of them alone (absolute, relative)")
    return tolerance


def _files(value, judge_file: str, where: str = "", given: tuple[str, ...] = ()) -> list[tuple[str, Source]]:
    """A `files` object (the submission's, or `where` a checker's or an interactor's): name ->
    text, or {"file": id} naming a file of the store (DESIGN.md, round 2). `given`: the names of
    the files kiln writes beside a checker's or an interactor's build for each test."""
    field = f"{where}files"
    if value is None:
        return []
    fields.an_object(value, field, ' of file name -> text or {"file": id}')
    if len(value) > FILES_MAX:
        raise ApiError(400, f"{field}: at most {FILES_MAX} files")
    files = []
    for name, content in value.items():
        if not FILE_NAME.fullmatch(name):
            raise ApiError(400, f"{field}: {name[:120]!r} is not a file name ([A-Za-z0-9_][A-Za-z0-9_.-]{{0,99}}: no '/', no '..', no leading '.')")
        if name == judge_file:
            raise ApiError(400, f"{field}: {name!r} is the judge file's name ({where}source is written there)" if where else f"{field}: {name!r} is the judge file's name (solution_text is written there)")
        if name in given:
            raise ApiError(400, f"{field}: {name!r} is the name of a file kiln gives the {where[:-1]} for each test ({', '.join(given)})")
        files.append((name, _file_content(content, f"{field}.{name}")))
    return files


def _file_content(content, field: str) -> Source:
    if type(content) is str:
        return Source(text=fields.text(content, field))
    if type(content) is not dict or set(content) != {"file"}:
        raise ApiError(400, f'{field} must be a string or {{"file": "sha256:..."}} (a file POST /files stored)')
    return Source(file_id=_file_id(content["file"], f"{field}.file"))


def _file_id(value, field: str) -> str:
    """A file of the store, named by the id POST /files answered."""
    if type(value) is not str or not FILE_ID.fullmatch(value):
        raise ApiError(400, f"{field} must be a file id sha256:<64 lowercase hex> (POST /files answers it)")
    return value


def _tests(value, tests_max: int, expected_needed: bool) -> tuple[Test, ...]:
    if value is None:
        raise ApiError(400, "tests is required")
    fields.an_array(value, "tests", " of {stdin or stdin_file, expected or expected_file}")
    if not 1 <= len(value) <= tests_max:
        raise ApiError(400, f"tests must have 1 to {tests_max} tests (got {len(value)})")
    return tuple(_test(i, test, expected_needed) for i, test in enumerate(value))


def _test(index: int, test, expected_needed: bool) -> Test:
    where = f"tests[{index}]"
    fields.an_object(test, where)
    stdin = _source(test, where, "stdin")
    expected = _source(test, where, "expected")
    if expected is None and expected_needed:
        raise ApiError(400, f"{where}: expected or expected_file is required (unless compare is checker or none, or an interactor is given)")
    return Test(stdin or Source(text=b""), expected, index)


def _points(test: dict, where: str) -> float | None:
    value = test.get("points")
    return None if value is None else fields.number(value, f"{where}.points")


def _groups(value, count: int) -> tuple[Group, ...]:
    """`groups` (IOI subtasks, Polygon's groups): each {"name", "tests" (indexes into tests, from
    0), "points", "scoring", "depends" (names of groups given before it)}; a test in one at most."""
    if value is None:
        return ()
    fields.an_array(value, "groups", " of {" + ", ".join(f'"{name}"' for name in GROUP_FIELDS) + "}")
    groups: list[Group] = []
    grouped: dict[int, str] = {}
    for i, group in enumerate(value):
        where = f"groups[{i}]"
        fields.an_object(group, where)
        unknown = fields.first_unknown(group, GROUP_FIELDS)
        if unknown is not None:
            raise ApiError(400, f"{where}.{unknown[:40]}: not a field of a group ({', '.join(GROUP_FIELDS)})")
        name = fields.required(group.get("name"), f"{where}.name", str)
        if not 1 <= len(name) <= 100 or any(g.name == name for g in groups):
            raise ApiError(400, f"{where}.name must be 1 to 100 characters, each group's its own")
        tests = group.get("tests")
        if type(tests) is not list or not tests or any(type(t) is not int or not 0 <= t < count for t in tests):
            raise ApiError(400, f"{where}.tests must be a non-empty array of test indexes (0 to {count - 1})")
        for t in tests:
            if t in grouped:
                raise ApiError(400, f"{where}.tests: test {t} is already in group {grouped[t]!r} (a test is in one group at most)")
            grouped[t] = name
        scoring = group.get("scoring", "all")
        if type(scoring) is not str or scoring not in SCORINGS:
            raise ApiError(400, f"{where}.scoring must be one of {', '.join(SCORINGS)}")
        # a sum group's points are its tests' (0 its own); a null given is refused, not the default
        points = fields.number(group.get("points", 0 if scoring == "sum" else None), f"{where}.points", "" if scoring == "sum" else " (the group's points)")
        depends = group.get("depends", [])
        if type(depends) is not list or any(type(d) is not str for d in depends):
            raise ApiError(400, f"{where}.depends must be an array of group names")
        for d in depends:
            if not any(g.name == d for g in groups):
                raise ApiError(400, f"{where}.depends: {d[:100]!r} names no group given before it")
        groups.append(Group(name, tuple(sorted(set(tests))), points, scoring, tuple(dict.fromkeys(depends))))
    return tuple(groups)


def _source(test: dict, where: str, field: str) -> Source | None:
    text, file_id = test.get(field), test.get(f"{field}_file")
    if text is not None and file_id is not None:
        raise ApiError(400, f"{where}: {field} and {field}_file are exclusive: give one")
    if text is not None:
        return Source(text=fields.text(fields.typed(text, f"{where}.{field}", str), f"{where}.{field}"))
    if file_id is not None:
        return Source(file_id=_file_id(file_id, f"{where}.{field}_file"))
    return None


def _limits(value, workload, config) -> TestLimits:
    value = {} if value is None else fields.an_object(value, "limits", f" ({', '.join(LIMITS)})")
    unknown = fields.first_unknown(value, LIMITS)
    if unknown is not None:
        raise ApiError(400, f"limits.{unknown[:40]}: not a limit (one of {', '.join(LIMITS)})")
    time_max = min(config.judge_time_max_ms, config.timeout_max_ms)
    time_ms = fields.duration(value.get("time"), "limits.time", min(workload.language.judge_time_ms, time_max), time_max)
    wall_default = max(time_ms, min(2 * time_ms + 1000, config.timeout_max_ms))
    wall_ms = fields.duration(value.get("wall_time"), "limits.wall_time", wall_default, config.timeout_max_ms)
    if wall_ms < time_ms:
        raise ApiError(400, f"limits.wall_time ({format_duration_ms(wall_ms)}) is below limits.time ({format_duration_ms(time_ms)})")
    return TestLimits(
        time_ms=time_ms,
        wall_time_ms=wall_ms,
        memory=fields.size(value.get("memory"), "limits.memory", workload.memory_max, low=1 << 20),
        output=fields.size(value.get("output"), "limits.output", config.output_max, low=1),
        pids=fields.count(value.get("pids"), "limits.pids", workload.pids_max),
        address_space=_address_space(value.get("address_space"), workload),
    )


def _address_space(value, workload) -> int:
    """limits.address_space: RLIMIT_AS of the submission's tests (0: none), for the languages
    whose address space says something of their memory (Language.address_space)."""
    if value is None:
        return 0
    if not workload.language.address_space:
        raise ApiError(400, f"limits.address_space: {workload.slug}'s runtime reserves address space it never uses, so that limit would say nothing of its memory; use limits.memory (resident memory)")
    return fields.size(value, "limits.address_space", 1 << 50, low=ADDRESS_SPACE_MIN)
