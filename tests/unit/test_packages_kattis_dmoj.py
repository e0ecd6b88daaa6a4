"""kiln/packages/kattis.py, kattis_validation.py and dmoj.py without a server: what a package's
files become, and what is refused (the judged packages, through a real server:
tests/api/test_judge_packages.py)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from kiln.packages import dmoj, kattis, reader_of
from kiln.packages.common import PackageError


def kattis_package(folder: Path, problem: str, answers: dict[str, str]) -> Path:
    (folder / "data" / "secret").mkdir(parents=True)
    (folder / "problem.yaml").write_text(problem)
    for name, answer in answers.items():
        (folder / "data" / "secret" / f"{name}.in").write_text("1\n")
        (folder / "data" / "secret" / f"{name}.ans").write_text(answer)
    return folder


@pytest.mark.parametrize(
    ("flags", "answer", "mode"),
    [
        ("", "42\n", ("tokens", None)),
        ("float_tolerance 1e-6", "0.5 1e5\n", ("float", 1e-6)),
        ("float_absolute_tolerance 1e-3 float_relative_tolerance 1e-3", "0.5\n", ("float", 1e-3)),
        ("case_sensitive space_change_sensitive", "YES\n", ("exact", None)),
        ("case_sensitive", "Yes\n", ("tokens", None)),
    ],
)
def test_kattis_default_validation_becomes_the_compare_mode_that_does_the_same(tmp_path, flags, answer, mode):
    package = kattis.read(kattis_package(tmp_path, f"validator_flags: {flags}\nlimits: {{memory: 64, time_limit: 1.5}}\n", {"1": answer}))
    assert (package.compare, package.epsilon) == mode
    assert (package.time_ms, package.memory_bytes) == (1500, 64 << 20)


@pytest.mark.parametrize(
    ("flags", "answer", "named"),
    [
        ("", "Yes\n", "case_sensitive"),  # Kattis ignores case by default; kiln cannot
        ("float_relative_tolerance 1e-6", "0.5\n", "float_relative_tolerance"),
        ("space_change_sensitive float_tolerance 1e-6", "0.5\n", "space_change_sensitive"),
        ("ignore_case", "1\n", "ignore_case"),
    ],
)
def test_kattis_flags_kiln_cannot_honour_are_refused_by_name(tmp_path, flags, answer, named):
    with pytest.raises(PackageError, match=named):
        kattis.read(kattis_package(tmp_path, f"validator_flags: {flags}\n", {"1": answer}))


def test_kattis_tests_in_lexicographic_order_with_the_timelimit_file_and_interactive_refused(tmp_path):
    folder = kattis_package(tmp_path, "name: x\n", {"10": "1\n", "2": "1\n"})
    (folder / ".timelimit").write_text("3\n")
    package = kattis.read(folder)
    assert [t.name for t in package.tests] == ["secret/10", "secret/2"] and package.time_ms == 3000
    assert reader_of(folder) is kattis
    (folder / "problem.yaml").write_text("validation: custom interactive\n")
    with pytest.raises(PackageError, match="interactive"):
        kattis.read(folder)


def dmoj_folder(folder: Path, init: str, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    (folder / "init.yml").write_text(init)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_dmoj_floats_precision_and_batch_dependencies(tmp_path):
    files = {f"{n}.{s}": "1\n" for n in "abc" for s in ("in", "out")}
    init = """checker: {name: floats, args: {precision: 4}}
test_cases:
- {in: a.in, out: a.out, points: 5}
- {batched: [{in: b.in, out: b.out}], points: 20, dependencies: [3]}
- {batched: [{in: c.in, out: c.out}], points: 30}
"""
    package = dmoj.read(dmoj_folder(tmp_path / "p", init, files))
    assert (package.compare, package.epsilon) == ("float", pytest.approx(1e-4))
    assert [(t.name, t.points) for t in package.tests] == [("1", 5.0), ("2.1", None), ("3.1", None)]
    assert [(g["name"], g["tests"], g["points"], g["scoring"], g["depends"]) for g in package.groups] == [("3", [2], 30.0, "all", []), ("2", [1], 20.0, "all", ["3"])]
    assert package.time_ms is None and any("--time" in note for note in package.notes)


def test_dmoj_refuses_what_does_not_map_and_an_archive_member_outside_it(tmp_path):
    with pytest.raises(PackageError, match="floatsabs"):
        dmoj.read(dmoj_folder(tmp_path / "a", "checker: floatsabs\ntest_cases: [{in: a.in, out: a.out, points: 1}]\n", {"a.in": "", "a.out": ""}))
    with pytest.raises(PackageError, match="generator"):
        dmoj.read(dmoj_folder(tmp_path / "b", "generator: gen.py\ntest_cases: [{in: a.in, points: 1}]\n", {}))
    folder = dmoj_folder(tmp_path / "c", "archive: t.zip\ntest_cases: [{in: a.in, out: a.out, points: 1}]\n", {})
    with zipfile.ZipFile(folder / "t.zip", "w") as archive:
        archive.writestr("../escape.in", "x")
    with pytest.raises(PackageError, match="outside the archive"):
        dmoj.read(folder)
