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
        ("", "42\n", ("tokens", {}, True)),
        ("", "Yes\n", ("tokens", {}, True)),  # Kattis ignores case unless case_sensitive
        ("float_tolerance 1e-6", "0.5 1e5\n", ("float", {"absolute_epsilon": 1e-6, "relative_epsilon": 1e-6, "float_rule": "kattis"}, True)),
        ("float_absolute_tolerance 1e-3 float_relative_tolerance 1e-3", "0.5\n", ("float", {"absolute_epsilon": 1e-3, "relative_epsilon": 1e-3, "float_rule": "kattis"}, True)),
        # separate tolerances, each alone: the one not given accepts only equal numbers (its -1)
        ("float_relative_tolerance 1e-6", "0.5\n", ("float", {"relative_epsilon": 1e-6, "float_rule": "kattis"}, True)),
        ("float_absolute_tolerance 0.1 float_relative_tolerance 0.01", "0.5\n", ("float", {"absolute_epsilon": 0.1, "relative_epsilon": 0.01, "float_rule": "kattis"}, True)),
        ("float_tolerance 0.5 float_absolute_tolerance 0.1", "1\n", ("float", {"absolute_epsilon": 0.1, "relative_epsilon": 0.5, "float_rule": "kattis"}, True)),  # read in order
        ("float_absolute_tolerance -1 float_relative_tolerance 0.1", "1\n", ("float", {"relative_epsilon": 0.1, "float_rule": "kattis"}, True)),  # negative: not used
        # problemtools' test_combined_flags: space_change_sensitive with a tolerance
        ("case_sensitive space_change_sensitive float_tolerance 0.5", "PI is 3.14\n", ("exact_floats", {"absolute_epsilon": 0.5, "relative_epsilon": 0.5, "float_rule": "kattis"}, False)),
        ("case_sensitive space_change_sensitive", "YES\n", ("exact", {}, False)),
        ("space_change_sensitive", "YES\n", ("exact", {}, True)),
        ("case_sensitive", "Yes\n", ("tokens", {}, False)),
    ],
)
def test_kattis_default_validation_becomes_the_compare_mode_that_does_the_same(tmp_path, flags, answer, mode):
    package = kattis.read(kattis_package(tmp_path, f"validator_flags: {flags}\nlimits: {{memory: 64, time_limit: 1.5}}\n", {"1": answer}))
    assert (package.compare, package.tolerance, package.ignore_case) == mode
    assert (package.time_ms, package.memory_bytes) == (1500, 64 << 20)


@pytest.mark.parametrize(
    ("flags", "answer", "named"),
    [
        ("float_relative_tolerance x", "0.5\n", "float_relative_tolerance 'x' is not a finite number"),
        ("float_tolerance inf", "0.5\n", "float_tolerance 'inf' is not a finite number"),
        ("ignore_case", "1\n", "ignore_case"),
    ],
)
def test_kattis_flags_kiln_cannot_honour_are_refused_by_name(tmp_path, flags, answer, named):
    with pytest.raises(PackageError, match=named):
        kattis.read(kattis_package(tmp_path, f"validator_flags: {flags}\n", {"1": answer}))


def test_kattis_tests_in_lexicographic_order_with_the_timelimit_file_and_multi_pass_refused(tmp_path):
    folder = kattis_package(tmp_path, "name: x\n", {"10": "1\n", "2": "1\n"})
    (folder / ".timelimit").write_text("3\n")
    package = kattis.read(folder)
    assert [t.name for t in package.tests] == ["secret/10", "secret/2"] and package.time_ms == 3000
    assert reader_of(folder) is kattis
    (folder / "problem.yaml").write_text("type: [interactive, multi-pass]\n")
    with pytest.raises(PackageError, match="multi-pass.*does not judge multi-pass"):
        kattis.read(folder)


@pytest.mark.parametrize("problem", ["validation: custom interactive\n", "type: interactive\n"])
def test_kattis_interactive_cpp_validator_becomes_an_interactor_adapter_with_its_files(tmp_path, problem):
    folder = kattis_package(tmp_path, problem + "validator_flags: queries 10\n", {"1": "5\n"})
    validator = folder / ("output_validator" if problem.startswith("type") else "output_validators/guess")
    validator.mkdir(parents=True)
    (validator / "guess.cpp").write_text('#include "validate.h"\nint main(int argc, char **argv) { return 42; }\n')
    (validator / "validate.h").write_text("#pragma once\n")
    package = kattis.read(folder)
    assert package.checker is None and package.compare is None
    interactor = package.interactor
    assert interactor.lang == "cpp" and "#define KILN_INTERACTIVE 1" in interactor.source and '"queries", "10"' in interactor.source
    assert [name for name, _ in interactor.files] == ["kattis_validator.inc", "validate.h"]


def test_kattis_interactive_python_validator_is_run_by_a_python_adapter(tmp_path):
    folder = kattis_package(tmp_path, "validation: custom interactive\nvalidator_flags: queries 10\n", {"1": "5\n"})
    validator = folder / "output_validators" / "guess"
    validator.mkdir(parents=True)
    (validator / "helpers.py").write_text("LIMIT = 10\n")
    (validator / "judge.py").write_text("import helpers\nif __name__ == '__main__':\n    raise SystemExit(42)\n")
    interactor = kattis.read(folder).interactor
    assert interactor.lang == "python" and "FLAGS = ['queries', '10']" in interactor.source
    assert [(name, path.name) for name, path in interactor.files] == [("kattis_validator.py", "judge.py"), ("helpers.py", "helpers.py")]
    compile(interactor.source, "main.py", "exec")  # the adapter is Python that builds
    (validator / "helpers.py").write_text("if __name__ == '__main__':\n    pass\n")  # two main files: which one?
    with pytest.raises(PackageError, match="which of helpers.py, judge.py"):
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
- {batched: [{in: b.in, out: b.out}], points: 20}
- {batched: [{in: c.in, out: c.out}], dependencies: [1]}
"""
    package = dmoj.read(dmoj_folder(tmp_path / "p", init, files))
    assert (package.compare, package.tolerance) == ("line_floats", {"epsilon": 1e-4, "float_rule": "dmoj"})
    assert [(t.name, t.points) for t in package.tests] == [("1", 5.0), ("2.1", None), ("3.1", None)]
    # dependencies name batches by their number among the batches: batch 1 is test case 2; points default to 1
    assert [(g["name"], g["tests"], g["points"], g["scoring"], g["depends"]) for g in package.groups] == [("2", [1], 20.0, "all", []), ("3", [2], 1.0, "all", ["2"])]
    assert package.time_ms is None and any("--time" in note for note in package.notes)


@pytest.mark.parametrize(
    ("checker", "tolerance"),
    [
        ("floats", {"epsilon": 1e-6, "float_rule": "dmoj"}),  # precision 6, error_mode default
        ("{name: floats, args: {error_mode: absolute, precision: 3}}", {"absolute_epsilon": 1e-3, "float_rule": "dmoj"}),
        ("{name: floats, args: {error_mode: relative}}", {"relative_epsilon": 1e-6, "float_rule": "dmoj"}),
        ("floatsabs", {"absolute_epsilon": 1e-6, "float_rule": "dmoj"}),
        ("{name: floatsrel, args: {precision: 2}}", {"relative_epsilon": 0.01, "float_rule": "dmoj"}),
        ("{name: floats, args: {precision: 0}}", {"epsilon": 1.0, "float_rule": "dmoj"}),
    ],
)
def test_dmoj_floats_each_error_mode_is_line_floats_with_its_tolerance(tmp_path, checker, tolerance):
    package = dmoj.read(dmoj_folder(tmp_path / "p", f"checker: {checker}\ntest_cases: [{{in: a.in, out: a.out}}]\n", {"a.in": "1\n", "a.out": "1\n"}))
    assert (package.compare, package.tolerance) == ("line_floats", tolerance)


def test_dmoj_a_zero_point_case_or_batch_is_a_barrier_every_later_case_depends_on(tmp_path):
    files = {f"{n}.{s}": "1\n" for n in "abcdef" for s in ("in", "out")}
    init = """test_cases:
- {in: a.in, out: a.out, points: 3}
- {in: b.in, out: b.out, points: 0}
- {in: c.in, out: c.out}
- {batched: [{in: d.in, out: d.out}], points: 0}
- {batched: [{in: e.in, out: e.out}], points: 10, dependencies: [1]}
- {in: f.in, out: f.out, points: 0}
"""
    package = dmoj.read(dmoj_folder(tmp_path / "p", init, files))
    assert package.compare == "line_tokens" and package.notes == (package.notes[0],)  # no note: DMOJ's skips are kiln's
    assert [(t.name, t.points) for t in package.tests] == [("1", 3.0), ("2", 0.0), ("3", 1.0), ("4.1", None), ("5.1", None), ("6", 0.0)]
    assert [(g["name"], g["tests"], g["points"], g["scoring"], g["depends"]) for g in package.groups] == [
        ("2", [1], 0.0, "sum", []),  # the first barrier; case 1 before it stays outside every group
        ("3", [2], 1.0, "sum", ["2"]),
        ("4", [3], 0.0, "all", ["2"]),  # a 0-point batch: the next barrier
        ("5", [4], 10.0, "all", ["4"]),  # its dependency, batch 1, is the barrier too
        ("6", [5], 0.0, "sum", ["4"]),  # the last case: a barrier of nothing, but after one
    ]


@pytest.mark.parametrize("dependencies", ["[2]", "[0]", "[x]"])
def test_dmoj_dependencies_must_be_earlier_batches(tmp_path, dependencies):
    files = {f"{n}.{s}": "1\n" for n in "ab" for s in ("in", "out")}
    init = f"test_cases:\n- {{in: a.in, out: a.out}}\n- {{batched: [{{in: b.in, out: b.out}}], dependencies: {dependencies}}}\n"
    with pytest.raises(PackageError, match="not earlier batches.*this is batch 1"):
        dmoj.read(dmoj_folder(tmp_path / "p", init, files))


@pytest.mark.parametrize(("binary", "given", "read"), [("", b"1\r\n2\r3", b"1\n2\n3\n"), ("", b"3\n", b"3\n"), ("", b"", b""), ("binary_data: true\n", b"1\r\n2", b"1\r\n2")])
def test_dmoj_inputs_and_answers_are_sent_as_dmoj_reads_them(tmp_path, binary, given, read):
    folder = dmoj_folder(tmp_path / "p", f"{binary}checker: identical\ntest_cases: [{{in: a.in, out: a.out}}]\n", {})
    (folder / "a.in").write_bytes(given)
    (folder / "a.out").write_bytes(given)
    [test] = dmoj.read(folder).tests
    assert test.input.read_bytes() == read and test.answer.read_bytes() == read
    assert (folder / "a.out").read_bytes() == given  # the package itself is left as it is
    assert (test.answer == folder / "a.out") is (read == given)  # copied only when it changes


def test_dmoj_refuses_what_does_not_map_and_an_archive_member_outside_it(tmp_path):
    with pytest.raises(PackageError, match="floatsabs sets error_mode itself"):
        dmoj.read(dmoj_folder(tmp_path / "a", "checker: {name: floatsabs, args: {error_mode: relative}}\ntest_cases: [{in: a.in, out: a.out, points: 1}]\n", {"a.in": "", "a.out": ""}))
    with pytest.raises(PackageError, match="error_mode 'ulp'"):
        dmoj.read(dmoj_folder(tmp_path / "d", "checker: {name: floats, args: {error_mode: ulp}}\ntest_cases: [{in: a.in, out: a.out, points: 1}]\n", {"a.in": "", "a.out": ""}))
    with pytest.raises(PackageError, match="generator"):
        dmoj.read(dmoj_folder(tmp_path / "b", "generator: gen.py\ntest_cases: [{in: a.in, points: 1}]\n", {}))
    folder = dmoj_folder(tmp_path / "c", "archive: t.zip\ntest_cases: [{in: a.in, out: a.out, points: 1}]\n", {})
    with zipfile.ZipFile(folder / "t.zip", "w") as archive:
        archive.writestr("../escape.in", "x")
    with pytest.raises(PackageError, match="outside the archive"):
        dmoj.read(folder)


def pretests_folder(folder: Path) -> Path:
    files = {f"{n}.{s}": "1\n" for n in "pqabc" for s in ("in", "out")}
    init = """test_cases:
- {in: a.in, out: a.out, points: 10}
- {batched: [{in: b.in, out: b.out}, {in: c.in, out: c.out}], points: 20, dependencies: [2]}
pretest_test_cases:
- {in: p.in, out: p.out, points: 5}
- {batched: [{in: q.in, out: q.out}], points: 7}
- {batched: [{in: a.in, out: a.out}]}
"""
    return dmoj_folder(folder, init, files)


def test_dmoj_pretests_are_judged_first_at_0_points_then_the_test_cases(tmp_path):
    package = dmoj.read(pretests_folder(tmp_path / "p"))
    assert [(t.name, t.points) for t in package.tests] == [("p1", 0.0), ("p2.1", None), ("p3.1", None), ("1", 10.0), ("2.1", None), ("2.2", None)]
    # each pretest a barrier: a failed one skips every case after it; batches are numbered on from the pretests' (DMOJ's counter)
    assert [(g["name"], g["tests"], g["points"], g["depends"]) for g in package.groups] == [
        ("p1", [0], 0.0, []),
        ("p2", [1], 0.0, ["p1"]),
        ("p3", [2], 0.0, ["p2"]),
        ("1", [3], 10.0, ["p3"]),
        ("2", [4, 5], 20.0, ["p3"]),  # its dependencies: [2] is the second batch, p3
    ]


def test_dmoj_pretests_alone_keep_their_points_and_a_package_without_them_is_refused(tmp_path):
    package = dmoj.read(pretests_folder(tmp_path / "p"), pretests=True)
    assert [(t.name, t.points) for t in package.tests] == [("p1", 5.0), ("p2.1", None), ("p3.1", None)]
    assert [(g["name"], g["points"], g["depends"]) for g in package.groups] == [("p2", 7.0, []), ("p3", 1.0, [])]
    plain = dmoj_folder(tmp_path / "q", "test_cases: [{in: a.in, out: a.out}]\n", {"a.in": "1\n", "a.out": "1\n"})
    with pytest.raises(PackageError, match="no pretest_test_cases: --pretests"):
        dmoj.read(plain, pretests=True)
