"""/judge with points and groups (DESIGN.md, "Judge API, round 2"): a checker's partial score
(testlib's quitp, exit 7), a test's points, IOI-style groups with their scoring and dependencies,
through a real server."""

from __future__ import annotations

import pytest

DOUBLES = "print(2 * int(input()))\n"
WRONG_ON_3 = "n = int(input())\nprint(2 * n if n != 3 else 0)\n"
# testlib's convention, quitp's words: exit 7 and "points <score> <message>" (on stderr, as testlib
# writes it without a result file); the input says what to give
PARTIAL = (
    "import sys\n"
    "given = open(sys.argv[1]).read().split()\n"
    "if given[1] == 'ac':\n    sys.exit(0)\n"
    "if given[1] == 'wa':\n    print('wrong'); sys.exit(1)\n"
    "if given[1] == 'silent':\n    sys.exit(7)\n"
    "print('points', given[1], 'partly right', file=sys.stderr)\n"
    "sys.exit(7)\n"
)


def judge(srv, solution, tests, **fields):
    return srv.client.post("/judge", json={"lang_slug": "python", "solution_text": solution, "tests": tests, **fields})


def verdicts(body) -> list[str]:
    return [t["verdict"] for t in body["tests"]]


def with_checker():
    return {"compare": "checker", "checker": {"lang_slug": "python", "source": PARTIAL}}


def test_a_checkers_partial_score_is_the_tests_score_in_its_points(server):
    tests = [{"stdin": "1 ac", "points": 3}, {"stdin": "2 1.5", "points": 3}, {"stdin": "3 0", "points": 3}, {"stdin": "4 3", "points": 3}, {"stdin": "5 wa", "points": 1}]
    body = judge(server, "print(1)\n", tests, **with_checker()).json()
    assert verdicts(body) == ["AC", "PT", "WA", "AC", "WA"], body
    assert [t["score"] for t in body["tests"]] == [3, 1.5, 0, 3, 0]
    assert (body["score"], body["max_score"], body["verdict"], body["passed"]) == (7.5, 13, "PT", 2)
    assert body["tests"][1]["checker_message"] == "points 1.5 partly right\n"
    assert list(body)[:5] == ["verdict", "passed", "total", "score", "max_score"]


def test_a_points_exit_without_a_score_is_the_checkers_failure(server):
    body = judge(server, "print(1)\n", [{"stdin": "1 silent", "points": 1}], **with_checker()).json()
    assert verdicts(body) == ["IE"], body


def test_without_points_the_answer_has_no_score_and_a_partial_check_is_measured_against_one(server):
    tests = [{"stdin": "1 ac"}, {"stdin": "2 0.25"}, {"stdin": "3 1"}]
    body = judge(server, "print(1)\n", tests, **with_checker()).json()
    assert verdicts(body) == ["AC", "PT", "AC"], body
    assert "score" not in body and "max_score" not in body and "groups" not in body
    assert all("score" not in t and "partial" not in t for t in body["tests"])


def test_groups_score_as_ioi_subtasks_and_a_failed_dependency_skips_its_dependents(server):
    tests = [{"stdin": str(n), "expected": str(2 * n)} for n in (1, 2, 3, 4, 5, 6, 7, 8)]
    tests[5]["points"], tests[6]["points"], tests[7]["points"] = 5, 10, 1
    tests[6]["stdin"], tests[6]["expected"] = "3", "6"  # wrong in the sum group
    groups = [
        {"name": "1", "tests": [0, 1], "points": 20},
        {"name": "2", "tests": [2, 3], "points": 30},  # test 2 (n=3) is wrong: all or nothing
        {"name": "3", "tests": [4], "points": 50, "scoring": "min", "depends": ["2"]},
        {"name": "4", "tests": [5, 6], "scoring": "sum", "depends": ["1"]},
    ]
    body = judge(server, WRONG_ON_3, tests, groups=groups).json()
    assert verdicts(body)[:5] == ["AC", "AC", "WA", "SK", "SK"], body
    assert verdicts(body)[5:] == ["AC", "WA", "AC"], body
    assert body["groups"] == [
        {"name": "1", "verdict": "AC", "score": 20, "max_score": 20},
        {"name": "2", "verdict": "WA", "score": 0, "max_score": 30},
        {"name": "3", "verdict": "SK", "score": 0, "max_score": 50},
        {"name": "4", "verdict": "WA", "score": 5, "max_score": 15},
    ]
    assert (body["score"], body["max_score"], body["verdict"]) == (26, 116, "WA"), body
    assert [t["score"] for t in body["tests"]][5:] == [5, 0, 1]
    assert list(body)[-2:] == ["groups", "stats"]


def test_a_min_group_scores_its_points_times_its_lowest_test(server):
    tests = [{"stdin": "1 ac"}, {"stdin": "2 0.5", "points": 2}, {"stdin": "3 0.9"}]
    body = judge(server, "print(1)\n", tests, groups=[{"name": "a", "tests": [0, 1, 2], "points": 10, "scoring": "min"}], **with_checker()).json()
    assert verdicts(body) == ["AC", "PT", "PT"], body
    assert body["groups"] == [{"name": "a", "verdict": "PT", "score": 2.5, "max_score": 10}], body  # 0.5 of 2 points: a quarter
    assert (body["score"], body["max_score"]) == (2.5, 10)


def test_stop_on_failure_stops_a_group_not_the_others(server):
    tests = [{"stdin": str(n), "expected": str(2 * n)} for n in (3, 1, 2, 4)]
    groups = [{"name": "a", "tests": [0, 1], "points": 1, "scoring": "sum"}, {"name": "b", "tests": [2, 3], "points": 1, "scoring": "sum"}]
    body = judge(server, WRONG_ON_3, tests, groups=groups, stop_on_failure=True).json()
    assert verdicts(body)[0] == "WA" and verdicts(body)[2:] == ["AC", "AC"], body
    assert verdicts(body)[1] in ("SK", "AC")  # started before the failure was known, or not


def test_a_dependency_on_a_zero_point_group_asks_every_test_of_it_ac(server):
    """A 0-point group of samples that fails skips what depends on it (Polygon's sample group,
    DMOJ's 0-point cases): a dependency passes when every test of it is AC, not when it scored its
    maximum (0 of 0 would always pass)."""
    tests = [{"stdin": "3", "expected": "6", "points": 0}, {"stdin": "1", "expected": "2"}, {"stdin": "2", "expected": "4"}]
    groups = [{"name": "samples", "tests": [0], "points": 0}, {"name": "main", "tests": [1, 2], "points": 10, "depends": ["samples"]}]
    body = judge(server, WRONG_ON_3, tests, groups=groups).json()
    assert verdicts(body)[0] == "WA" and verdicts(body)[1:] == ["SK", "SK"], body
    assert body["groups"] == [{"name": "samples", "verdict": "WA", "score": 0, "max_score": 0}, {"name": "main", "verdict": "SK", "score": 0, "max_score": 10}]
    assert (body["score"], body["max_score"]) == (0, 10)
    passing = judge(server, DOUBLES, tests, groups=groups).json()
    assert verdicts(passing) == ["AC", "AC", "AC"] and passing["score"] == 10, passing


def test_in_an_all_group_the_tests_after_its_first_failure_are_SK_every_time(start_server):
    """Even one that had started, and passed, when the failure was known (two run at once here):
    the answer does not depend on the scheduler, and is DMOJ's (a batch short-circuits)."""
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="4")
    slow_unless_first = "import time\nn = int(input())\nif n > 1:\n    time.sleep(0.5)\nprint(2 * n if n != 1 else 0)\n"
    tests = [{"stdin": str(n), "expected": str(2 * n)} for n in (1, 2, 3)]
    for _ in range(2):
        body = judge(srv, slow_unless_first, tests, groups=[{"name": "1", "tests": [0, 1, 2], "points": 10}]).json()
        assert verdicts(body) == ["WA", "SK", "SK"], body
        assert body["tests"][1] == {"verdict": "SK", "exit_code": None, "stdout": "", "stderr": "", "checker_message": None, "stats": None, "score": 0}
        assert (body["passed"], body["score"]) == (0, 0)


@pytest.mark.parametrize(
    ("groups", "error"),
    [
        ("all", 'groups must be an array of {"name", "tests", "points", "scoring", "depends"}'),
        ([{"name": "a", "tests": [0, 5], "points": 1}], "groups[0].tests must be a non-empty array of test indexes (0 to 1)"),
        ([{"name": "a", "tests": [0], "points": 1}, {"name": "b", "tests": [0], "points": 1}], "groups[1].tests: test 0 is already in group 'a' (a test is in one group at most)"),
        ([{"name": "a", "tests": [0], "points": 1, "depends": ["b"]}, {"name": "b", "tests": [1], "points": 1}], "groups[0].depends: 'b' names no group given before it"),
        ([{"name": "a", "tests": [0], "points": 1, "scoring": "max"}], "groups[0].scoring must be one of all, min, sum"),
        ([{"name": "a", "tests": [0]}], "groups[0].points must be a number >= 0 (the group's points)"),
        ([{"name": "a", "tests": [0], "points": 1, "weight": 2}], "groups[0].weight: not a field of a group (name, tests, points, scoring, depends)"),
        ([{"name": "a", "tests": [0], "points": 1}, {"name": "a", "tests": [1], "points": 1}], "groups[1].name must be 1 to 100 characters, each group's its own"),
    ],
)
def test_bad_groups_are_a_400_that_names_the_field(server, groups, error):
    answer = judge(server, DOUBLES, [{"stdin": "1", "expected": "2"}, {"stdin": "2", "expected": "4"}], groups=groups)
    assert answer.status_code == 400 and answer.json()["error"] == error


def test_a_negative_points_is_a_400_that_names_the_test(server):
    answer = judge(server, DOUBLES, [{"stdin": "1", "expected": "2", "points": -1}])
    assert answer.status_code == 400 and answer.json()["error"] == "tests[0].points must be a number >= 0"
