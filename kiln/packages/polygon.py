"""A Polygon problem package as `kiln judge PACKAGE_DIR` reads it (DESIGN.md, "Judge API, round
2", `kiln judge PACKAGE_DIR`): problem.xml for the limits, the tests' points and groups, the
checker and the interactor; the tests' files by the testset's path patterns; the headers among
the package's resources (testlib.h) for the checker's and interactor's builds.

    problem.xml
      <judging><testset name="tests">
          <time-limit>1000</time-limit> <memory-limit>268435456</memory-limit>
          <test-count>3</test-count>
          <input-path-pattern>tests/%02d</input-path-pattern> <answer-path-pattern>tests/%02d.a</answer-path-pattern>
          <tests><test points="10" group="1"/>...</tests>
          <groups><group name="1" points="30" points-policy="complete-group|each-test">
              <dependencies><dependency group="0"/></dependencies></group></groups>
      </testset></judging>
      <files><resources><file path="files/testlib.h"/></resources></files>
      <assets><checker><source path="files/check.cpp" type="cpp.g++17"/></checker>
              <interactor><source path="files/interactor.cpp" type="cpp.g++17"/></interactor></assets>

Polygon's points-policy maps onto kiln's group scoring: complete-group -> "all" (the group's
points when every test passes), each-test -> "sum" (its tests' points). A group's points are its
`points`, else the sum of its tests'. Groups are sent in an order where each comes after those it
depends on (kiln's rule). What kiln does not take is said, never silently dropped: a test whose
file is missing (a package without its generated tests) is a UsageError saying how to get them.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

from kiln.packages.common import Helper, Package, PackageError, PackageTest, dependencies_first, number, read_text

LAYOUT = "Polygon"
PRETESTS = False  # whether its format has pretests (`kiln judge --pretests` judges them alone)
PROBLEM_XML = "problem.xml"
# Polygon's source types (cpp.g++17, python.3, java11, ...) by their start -> kiln's language
LANGUAGES = (("cpp.", "cpp"), ("python.", "python"), ("java", "java"), ("kotlin", "kotlin"), ("rust", "rust"), ("go", "golang"), ("csharp", "csharp"))
HEADER_SUFFIXES = (".h", ".hpp")
POINTS_POLICIES = {"complete-group": "all", "each-test": "sum"}


def is_package(folder: Path) -> bool:
    return (folder / PROBLEM_XML).is_file()


def read(folder: Path) -> Package:
    where = folder / PROBLEM_XML
    try:
        root = ElementTree.parse(where).getroot()
    except (OSError, ElementTree.ParseError) as error:
        raise PackageError(f"cannot read {where}: {error}") from None
    testset = root.find("judging/testset[@name='tests']")
    if testset is None:
        raise PackageError(f"{where} has no <judging><testset name=\"tests\">: is it a Polygon package's problem.xml?")
    tests = _tests(folder, testset, where)
    headers = tuple(
        folder / path for path in (f.get("path", "") for f in root.iterfind("files/resources/file")) if path.endswith(HEADER_SUFFIXES) and (folder / path).is_file()
    )
    return Package(
        layout=LAYOUT,
        tests=tests,
        groups=_groups(testset, tests, where),
        time_ms=number(testset.findtext("time-limit"), "time-limit", where, int),
        memory_bytes=number(testset.findtext("memory-limit"), "memory-limit", where, int),
        checker=_helper(folder, root.find("assets/checker/source"), "checker", headers, where),
        interactor=_helper(folder, root.find("assets/interactor/source"), "interactor", headers, where),
    )


def _tests(folder: Path, testset, where: Path) -> tuple[PackageTest, ...]:
    listed = testset.findall("tests/test")
    count = number(testset.findtext("test-count"), "test-count", where, int)
    count = len(listed) if count is None else count
    if count < 1:
        raise PackageError(f"{where}: the testset has no tests")
    inputs, answers = testset.findtext("input-path-pattern", "tests/%02d"), testset.findtext("answer-path-pattern", "tests/%02d.a")
    tests = []
    for i in range(1, count + 1):
        test = listed[i - 1] if i <= len(listed) else None
        path, answer = folder / _formatted(inputs, i, where), folder / _formatted(answers, i, where)
        if not path.is_file():
            generated = test is not None and test.get("method") == "generated"
            how = " (a generated test: download the package with its generated tests, Polygon's \"full\" package, or run its doall script)" if generated else ""
            raise PackageError(f"test {i}: {path} is missing{how}")
        points = number(test.get("points") if test is not None else None, f"test {i} points", where, float)
        tests.append(PackageTest(path.name, path, answer if answer.is_file() else None, points))
    return tuple(tests)


def _groups(testset, tests: tuple[PackageTest, ...], where: Path) -> tuple[dict, ...]:
    """kiln's groups: each with its tests' indexes (from 0), in an order where dependencies come first."""
    members: dict[str, list[int]] = {}
    for i, test in enumerate(testset.findall("tests/test")[: len(tests)]):
        if test.get("group") is not None:
            members.setdefault(test.get("group"), []).append(i)
    given = {}
    for group in testset.iterfind("groups/group"):
        name = group.get("name", "")
        policy = group.get("points-policy", "complete-group")
        if policy not in POINTS_POLICIES:
            raise PackageError(f"{where}: group {name!r} has points-policy {policy!r}: kiln knows {', '.join(POINTS_POLICIES)}")
        indexes = members.get(name, [])
        points = number(group.get("points"), f"group {name!r} points", where, float)
        if points is None:
            points = sum(tests[i].points or 0.0 for i in indexes)
        depends = [d.get("group", "") for d in group.iterfind("dependencies/dependency")]
        given[name] = {"name": name, "tests": indexes, "points": points, "scoring": POINTS_POLICIES[policy], "depends": depends}
    for name in members:
        if name not in given:  # a test's group without a <group>: Polygon's default policy
            given[name] = {"name": name, "tests": members[name], "points": sum(tests[i].points or 0.0 for i in members[name]), "scoring": "all", "depends": []}
    return dependencies_first(given, where)


def _helper(folder: Path, source, role: str, headers: tuple[Path, ...], where: Path) -> Helper | None:
    if source is None:
        return None
    path, program_type = folder / source.get("path", ""), source.get("type", "")
    lang = next((slug for prefix, slug in LANGUAGES if program_type.startswith(prefix)), None)
    if lang is None:
        raise PackageError(f"{where}: the {role}'s type {program_type!r} is no language kiln judges in (known: {', '.join(p for p, _ in LANGUAGES)}...)")
    if not path.is_file():
        raise PackageError(f"the {role}'s source {path} is missing")
    return Helper(lang, read_text(path, role + "'s source"), tuple((h.name, h) for h in headers if h != path))


def _formatted(pattern: str, index: int, where: Path) -> str:
    try:
        return pattern % index
    except (TypeError, ValueError):
        raise PackageError(f"{where}: the path pattern {pattern!r} is not printf's (tests/%02d)") from None
