"""kiln/packages/polygon.py without a server: what a Polygon package's problem.xml becomes (a
package written here; the judged package, through a real server: tests/api/test_judge_cli.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kiln.packages import polygon as judge_package
from kiln.packages.common import PackageError


def package(folder: Path, groups: str = "", assets: str = "", tests: str = '<test/><test/>', count: int = 2) -> Path:
    (folder / "tests").mkdir(parents=True)
    (folder / "files").mkdir()
    for i in range(1, count + 1):
        (folder / "tests" / f"{i:02d}").write_text(f"{i}\n")
        (folder / "tests" / f"{i:02d}.a").write_text(f"{i}\n")
    for name in ("testlib.h", "check.cpp", "interactor.cpp", "olymp.sty"):
        (folder / "files" / name).write_text("//\n")
    (folder / "problem.xml").write_text(f"""<problem><judging><testset name="tests">
        <time-limit>1500</time-limit><memory-limit>67108864</memory-limit><test-count>{count}</test-count>
        <input-path-pattern>tests/%02d</input-path-pattern><answer-path-pattern>tests/%02d.a</answer-path-pattern>
        <tests>{tests}</tests><groups>{groups}</groups></testset></judging>
        <files><resources><file path="files/testlib.h"/><file path="files/olymp.sty"/></resources></files>
        <assets>{assets}</assets></problem>""")
    return folder


def test_limits_tests_and_an_interactor_with_its_checker(tmp_path):
    assets = '<checker><source path="files/check.cpp" type="cpp.g++17"/></checker><interactor><source path="files/interactor.cpp" type="cpp.gcc14-64-msys2-g++23"/></interactor>'
    read = judge_package.read(package(tmp_path, assets=assets))
    assert (read.time_ms, read.memory_bytes) == (1500, 64 << 20)
    assert [(t.name, t.input.name, t.answer.name, t.points) for t in read.tests] == [("01", "01", "01.a", None), ("02", "02", "02.a", None)]
    assert read.checker.lang == read.interactor.lang == "cpp" and read.interactor.source == "//\n"
    assert [name for name, _ in read.checker.files] == ["testlib.h"]  # a resource that is a header
    assert read.groups == ()


def test_points_policies_map_to_kilns_scoring_and_dependencies_come_first(tmp_path):
    tests = '<test group="b" points="5"/><test group="b" points="7"/><test group="a"/>'
    groups = ('<group name="b" points-policy="each-test"><dependencies><dependency group="a"/></dependencies></group>'
              '<group name="a" points="20" points-policy="complete-group"/>')  # fmt: skip
    read = judge_package.read(package(tmp_path, groups=groups, tests=tests, count=3))
    assert read.groups == (
        {"name": "a", "tests": [2], "points": 20.0, "scoring": "all", "depends": []},
        {"name": "b", "tests": [0, 1], "points": 12.0, "scoring": "sum", "depends": ["a"]},
    )


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"assets": '<checker><source path="files/check.cpp" type="pas.fpc"/></checker>'}, "the checker's type 'pas.fpc' is no language kiln judges in"),
        ({"groups": '<group name="a" points-policy="best"/>', "tests": '<test group="a"/><test/>'}, "points-policy 'best'"),
        ({"groups": '<group name="a"><dependencies><dependency group="b"/></dependencies></group><group name="b"><dependencies><dependency group="a"/></dependencies></group>'}, "make a cycle"),
        ({"groups": '<group name="a"><dependencies><dependency group="z"/></dependencies></group>'}, "name no group: 'z'"),
    ],
)
def test_what_kiln_cannot_take_is_said(tmp_path, fields, error):
    with pytest.raises(PackageError, match=re.escape(error)):
        judge_package.read(package(tmp_path, **fields))


def test_a_missing_generated_test_says_how_to_get_it(tmp_path):
    folder = package(tmp_path, tests='<test/><test method="generated" cmd="gen 2"/>')
    (folder / "tests" / "02").unlink()
    with pytest.raises(PackageError, match="doall"):
        judge_package.read(folder)
