"""A DMOJ problem data folder as `kiln judge PACKAGE_DIR` reads it:

    init.yml   archive: tests.zip            (optional: the files are read from the zip)
               test_cases:
                 - {in: s.in, out: s.out, points: 0}
                 - {batched: [{in: 1.in, out: 1.out}, ...], points: 40, dependencies: [1]}
               checker: standard | identical | {name: floats, args: {precision: 6, error_mode: default}}
                        | floatsabs | floatsrel
                        | {name: bridged, args: {files: check.cpp, lang: CPP17, type: testlib}}
               interactive: {files: interactor.cpp, lang: CPP17, type: testlib}
               pretest_test_cases: [...]   (as test_cases: judged first at 0 points; --pretests: alone)

A case scores its points when AC; a batch is a group scored all-or-nothing (kiln's "all"), its
`dependencies` (batch numbers) its `depends`; a failed 0-point case or batch skips every case after
it, as DMOJ short-circuits them (_cases). Checkers map onto kiln's modes: standard -> line_tokens
(DMOJ's is line-aware: dmoj/checkers/_checker.c), identical -> exact, floats -> line_floats
(its lines and tokens per line) with float_rule dmoj (its arithmetic in doubles) and epsilon
10^-precision for error_mode default, absolute_epsilon for absolute, relative_epsilon for
relative; floatsabs and floatsrel are floats with those error modes. Bridged testlib checkers and
interactors are sent with their files. Inputs and answers are sent as DMOJ
reads them, line ends normalized (_as_dmoj_reads). DMOJ keeps time and memory limits on
the site, not here: `kiln judge` takes them from --time and --memory. What does not map is a
PackageError naming it.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import zipfile
from pathlib import Path

from kiln.packages.common import Helper, Package, PackageError, PackageTest, dependencies_first, number, read_text, yaml_mapping

LAYOUT = "DMOJ"
PRETESTS = True  # whether its format has pretests (`kiln judge --pretests` judges them alone)
PRETEST_PREFIX = "p"  # a pretest's name: p1, p2.1 (test_cases keep 1, 2.1)
DEFAULT_POINTS = 1.0  # a case's or a batch's without `points` (DMOJ's ProblemConfig default)
INIT_YML = "init.yml"
COMPARES = {"standard": "line_tokens", "identical": "exact", "floats": "line_floats", "floatsabs": "line_floats", "floatsrel": "line_floats"}
# DMOJ floats' error_mode -> the request field its epsilon goes in (kiln/judge/numbers.py, rule dmoj)
ERROR_MODES = {"default": "epsilon", "absolute": "absolute_epsilon", "relative": "relative_epsilon"}
FLOATS_ALIASES = {"floatsabs": "absolute", "floatsrel": "relative"}  # dmoj/checkers/floatsabs.py, floatsrel.py
# DMOJ's language keys (CPP17, PY3, ...) by their start -> kiln's slug
LANGUAGES = (("CPP", "cpp"), ("C", "c"), ("PY", "python"), ("JAVA", "java"), ("RUST", "rust"), ("GO", "golang"))
CASE_KEYS = ("in", "out", "points", "batched", "dependencies", "is_pretest")
TOP_KEYS = ("archive", "binary_data", "test_cases", "checker", "interactive", "pretest_test_cases", "output_limit_length", "output_prefix_length", "unbuffered", "hints")


def is_package(folder: Path) -> bool:
    return (folder / INIT_YML).is_file()


def read(folder: Path, pretests: bool = False) -> Package:
    """The package as DMOJ judges it: its pretests (at 0 points) then its test cases, or with
    `pretests` its pretests alone, as a contest with pretests judges during the contest."""
    where = folder / INIT_YML
    config = yaml_mapping(where, "test_cases:, checker:", TOP_KEYS, hint="a generator's tests must be generated first; ")
    files = _files(folder, config.get("archive"), where)
    tests, groups = _cases(_sections(config, pretests, where), files, where)
    if not config.get("binary_data"):
        tests = _as_dmoj_reads(tests)
    notes = ["DMOJ keeps time and memory limits on the site, not in init.yml: they are --time and --memory (else the language's defaults)"]
    compare, tolerance, checker = _checker(config.get("checker", "standard"), folder, where)
    interactor = _bridged(config["interactive"], folder, where, "interactive") if config.get("interactive") else None
    return Package(
        layout=LAYOUT,
        tests=tuple(tests),
        groups=dependencies_first(groups, where),
        time_ms=None,
        memory_bytes=None,
        checker=checker,
        interactor=interactor,
        compare=compare,
        tolerance=tolerance,
        notes=tuple(notes),
    )


def _sections(config: dict, pretests: bool, where: Path) -> list[tuple[str, list, bool]]:
    """The lists of cases judged, in order, each as (its names' prefix, its cases, whether its
    points are forced to 0). DMOJ's judge (dmoj/graders/base.py, cases) judges a problem's
    pretest_test_cases first, each at 0 points, so that a failed pretest skips every case after it,
    then its test_cases; a contest that runs pretests only judges pretest_test_cases alone, with
    their own points. Pretests are named p1, p2.1, ..."""
    shape = "a list of {in, out, points} or {batched: [...], points}"
    given = config.get("pretest_test_cases")
    if given is not None and (not isinstance(given, list) or not given):
        raise PackageError(f"{where}: pretest_test_cases is not {shape}")
    if pretests:
        if not given:
            raise PackageError(f"{where} has no pretest_test_cases: --pretests judges a DMOJ problem's pretests alone; leave it out to judge its test_cases")
        return [(PRETEST_PREFIX, given, False)]
    cases = config.get("test_cases")
    if not isinstance(cases, list) or not cases:
        raise PackageError(f"{where}: test_cases is not {shape}")
    return ([(PRETEST_PREFIX, given, True)] if given else []) + [("", cases, False)]


def _cases(sections: list[tuple[str, list, bool]], files: Path, where: Path) -> tuple[list[PackageTest], dict[str, dict]]:
    """The tests and groups that judge as DMOJ's judge.py does: a batch is an all-or-nothing
    group, its `dependencies` (earlier batches by their number among the batches, from 1) its
    `depends`; a failed 0-point case or batch (a "barrier") makes DMOJ short-circuit every case
    after it, so each case after a barrier is in a group that depends on the latest barrier (a
    case alone: a one-test group, scored as the test), and the barrier one too. kiln's `depends`
    asks that every test of the group depended on is AC, which is DMOJ's "passed"; a barrier
    depending on the one before it carries the chain. Points absent are DMOJ's default, 1.
    Batches are numbered across the sections, pretests' first, as DMOJ's counter runs on."""
    tests: list[PackageTest] = []
    groups: dict[str, dict] = {}
    batches: list[str] = []  # batch number - 1 -> its group's name
    barrier: str | None = None
    listed = [(prefix, i, case, zero) for prefix, cases, zero in sections for i, case in enumerate(cases, 1)]
    for n, (prefix, i, case, zero) in enumerate(listed, 1):
        name, last = f"{prefix}{i}", n == len(listed)
        if not isinstance(case, dict) or any(k not in CASE_KEYS for k in case):
            raise PackageError(f"{where}: test case {name} is not {{in, out, points}} or {{batched: [...], points, dependencies}} (kiln takes {', '.join(CASE_KEYS)})")
        points = number(case.get("points"), f"test case {name} points", where, float)
        points = 0.0 if zero else DEFAULT_POINTS if points is None else points
        after = [barrier] if barrier is not None else []
        if "batched" in case:
            batch = case["batched"]
            if not isinstance(batch, list) or not batch:
                raise PackageError(f"{where}: test case {name}'s batched is not a list of {{in, out}}")
            first = len(tests)
            for j, member in enumerate(batch, 1):
                tests.append(_test(member, f"{name}.{j}", None, files, where))
            depends = case.get("dependencies") or []
            if not isinstance(depends, list) or not all(isinstance(d, int) and 1 <= d <= len(batches) for d in depends):
                raise PackageError(f"{where}: test case {name}'s dependencies are not earlier batches: a dependency is a batch's number among the batches (from 1), and this is batch {len(batches) + 1}")
            named = [batches[d - 1] for d in depends]
            groups[name] = {"name": name, "tests": list(range(first, len(tests))), "points": points, "scoring": "all", "depends": named + [b for b in after if b not in named]}
            batches.append(name)
        else:
            tests.append(_test(case, name, points, files, where))
            if after or (points == 0 and not last):  # alone in a group: to depend on the barrier, or to be one
                groups[name] = {"name": name, "tests": [len(tests) - 1], "points": points, "scoring": "sum", "depends": after}
        if points == 0 and not last:
            barrier = name
    return tests, groups


def _as_dmoj_reads(tests: list[PackageTest]) -> list[PackageTest]:
    """The tests' inputs and answers as DMOJ's judge reads them, unless binary_data: every \\r\\n
    and \\r a \\n, and a \\n at the end of a file that has none, an empty file left empty
    (dmoj/problem.py _normalize, dmoj/utils/normalize.py). It matters for `identical` (an answer
    `3` is `3\\n` there) and for what a submission reads. A file that changes is copied to a
    temporary folder (removed when kiln judge ends); the others are sent as they are."""
    copies: dict[Path, Path] = {}
    scratch: list[Path] = []

    def normalized(path: Path | None) -> Path | None:
        if path is None:
            return None
        if path not in copies:
            data = path.read_bytes()
            normal = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            normal += b"\n" if normal and not normal.endswith(b"\n") else b""
            copies[path] = path
            if normal != data:
                if not scratch:
                    scratch.append(Path(tempfile.mkdtemp(prefix="kiln-dmoj-normalized-")))
                    atexit.register(shutil.rmtree, scratch[0], True)
                copies[path] = scratch[0] / f"{len(copies)}-{path.name}"
                copies[path].write_bytes(normal)
        return copies[path]

    return [PackageTest(t.name, normalized(t.input), normalized(t.answer), t.points) for t in tests]


def _files(folder: Path, archive, where: Path) -> Path:
    """The folder the tests' files are in: the package's, or the archive's unpacked in a
    temporary folder (removed when kiln judge ends)."""
    if archive is None:
        return folder
    zipped = folder / str(archive)
    try:
        with zipfile.ZipFile(zipped) as opened:
            unpacked = Path(tempfile.mkdtemp(prefix="kiln-dmoj-"))
            atexit.register(shutil.rmtree, unpacked, True)
            for member in opened.infolist():
                target = (unpacked / member.filename).resolve()
                if not target.is_relative_to(unpacked.resolve()):  # a zip's "../" names stay inside
                    raise PackageError(f"{zipped}: member {member.filename!r} points outside the archive")
            opened.extractall(unpacked)
            return unpacked
    except (OSError, zipfile.BadZipFile) as error:
        raise PackageError(f"{where}: archive {zipped} cannot be read: {error}") from None


def _test(case, name: str, points: float | None, files: Path, where: Path) -> PackageTest:
    if not isinstance(case, dict) or "in" not in case:
        raise PackageError(f"{where}: test case {name} has no `in` file")
    given = files / str(case["in"])
    if not given.is_file():
        raise PackageError(f"{where}: test case {name}'s input {case['in']} is not in {files}")
    answer = files / str(case["out"]) if case.get("out") is not None else None
    if answer is not None and not answer.is_file():
        raise PackageError(f"{where}: test case {name}'s answer {case['out']} is not in {files}")
    return PackageTest(name, given, answer, points)


def _checker(checker, folder: Path, where: Path) -> tuple[str | None, dict, Helper | None]:
    name, args = (checker, {}) if isinstance(checker, str) else (checker.get("name"), checker.get("args") or {}) if isinstance(checker, dict) else (None, {})
    if name == "bridged":
        return None, {}, _bridged(args, folder, where, "checker")
    if name not in COMPARES:
        raise PackageError(f"{where}: checker {name!r}: kiln maps standard, identical, floats, floatsabs, floatsrel and bridged testlib checkers; write the others as a testlib checker")
    if COMPARES[name] != "line_floats":
        if args:
            raise PackageError(f"{where}: checker {name} with args {sorted(args)}: kiln takes the checker without them")
        return COMPARES[name], {}, None
    unknown = sorted(set(args) - {"precision", "error_mode"})
    if unknown:
        raise PackageError(f"{where}: checker {name} with args {unknown}: floats takes precision and error_mode")
    if name in FLOATS_ALIASES and "error_mode" in args:  # floatsabs.py passes its own: DMOJ's call fails on both
        raise PackageError(f"{where}: checker {name} sets error_mode itself: leave error_mode out of its args")
    mode = FLOATS_ALIASES.get(name) or args.get("error_mode", "default")
    if mode not in ERROR_MODES:
        raise PackageError(f"{where}: checker {name} error_mode {mode!r}: DMOJ's are {', '.join(ERROR_MODES)}")
    precision = number(args.get("precision", 6), "checker precision", where, int)
    epsilon = float(10 ** -precision)  # as floats.py computes it: 10 ** -int(precision)
    return "line_floats", {ERROR_MODES[mode]: epsilon, "float_rule": "dmoj"}, None


def _bridged(args, folder: Path, where: Path, role: str) -> Helper:
    """A testlib checker or interactor: its first file the main source, the others built with it."""
    if not isinstance(args, dict):
        raise PackageError(f"{where}: {role} is not a mapping ({{files, lang, type: testlib}})")
    program_type = args.get("type", "default")
    if program_type != "testlib":
        raise PackageError(f"{where}: {role} type {program_type!r}: kiln runs testlib-convention programs only (type: testlib)")
    names = args.get("files")
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names:
        raise PackageError(f"{where}: {role} names no files (files: check.cpp)")
    lang = str(args.get("lang", "CPP17"))
    slug = next((s for prefix, s in LANGUAGES if lang.upper().startswith(prefix)), None)
    if slug is None:
        raise PackageError(f"{where}: {role} lang {lang!r} is no language kiln maps (known: {', '.join(p for p, _ in LANGUAGES)}...)")
    paths = [folder / str(n) for n in names]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise PackageError(f"{where}: the {role}'s file {missing[0]} is missing")
    others = [p for p in folder.iterdir() if p.suffix in (".h", ".hpp") and p not in paths]  # testlib.h beside it
    return Helper(slug, read_text(paths[0], f"{role}'s source"), tuple((p.name, p) for p in [*paths[1:], *others]))
