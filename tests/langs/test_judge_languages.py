"""Every language's `build` and `exec` targets through POST /judge, languages as rows (the judge
itself: tests/api/test_judge.py). The programs are tests/langs/judge/<slug>/: `ab` (a+b), `multi`
(a+b with the addition in a second file, built the language's own way) and `ce` (a compile or
syntax error). The servers are tests/langs' own (one per language, shared by its tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln import langs
from langcase import LANGS

PROGRAMS = Path(__file__).parent / "judge"
TESTS = [{"stdin": "1 2\n", "expected": "3"}, {"stdin": "-5 5", "expected": "0"}, {"stdin": "1000000000 2000000000\n", "expected": "3000000000"}]
rows = pytest.mark.parametrize("slug", list(LANGS), scope="session")


def program(slug: str, name: str) -> tuple[str, dict[str, str]]:
    """The program's judge file's text, and its other files by name."""
    folder = PROGRAMS / slug / name
    judge_file = langs.LANGUAGES[slug].judge_file
    others = {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.name != judge_file}
    return (folder / judge_file).read_text(), others


def judge(server, slug: str, name: str, tests=TESTS) -> dict:
    solution, files = program(slug, name)
    payload = {"lang_slug": slug, "solution_text": solution, "tests": tests, "compile_timeout": "2m", "limits": {"time": "10s", "wall_time": "30s"}}
    answer = server.client.post("/judge", json={**payload, **({"files": files} if files else {})}, timeout=180)
    assert answer.status_code == 200, (answer.text, server.logged("no warm slot"), server.logged("slot warm-up failed"), server.slots())
    return answer.json()


@rows
def test_a_plus_b_is_judged_AC(lang, lang_server):
    body = judge(lang_server, lang.slug, "ab")
    assert (body["verdict"], body["passed"]) == ("AC", 3), body
    assert [t["stdout"].strip() for t in body["tests"]] == ["3", "0", "3000000000"]


@rows
def test_a_submission_of_two_files_is_built_together(lang, lang_server):
    body = judge(lang_server, lang.slug, "multi")
    assert (body["verdict"], body["passed"]) == ("AC", 3), body


@rows
def test_a_compile_error_is_CE_with_the_toolchains_words(lang, lang_server):
    body = judge(lang_server, lang.slug, "ce", TESTS[:1])
    assert body["verdict"] == "CE", body
    assert body["compile"]["exit_code"] != 0 and (body["compile"]["stdout"] + body["compile"]["stderr"]).strip(), body["compile"]
    assert [t["verdict"] for t in body["tests"]] == ["SK"]


@rows
def test_the_language_says_it_judges(lang, lang_server):
    [served] = [l for l in lang_server.client.get("/languages").json()["languages"] if l["slug"] == lang.slug]
    assert (served["judge"], served["judge_file"]) == (True, langs.LANGUAGES[lang.slug].judge_file)
    # the exact command lines, the workspace's build and exec targets, and the compiler's version
    assert "judge" in served["judge_build"] and "judge" in served["judge_exec"], served
    assert served["version"] and not served["version"].startswith("unknown"), served


# A build that exits 0 and leaves nothing runnable (a Go package not named main, a class without
# main) is CE with the reason in compile.stderr, never a test's IE (DESIGN.md, round 2). The
# programs are `norun`, for the languages whose toolchain can build something that is no program.
NORUN = [slug for slug in LANGS if (PROGRAMS / slug / "norun").is_dir()]


@pytest.mark.parametrize("slug", NORUN, scope="session")
def test_a_build_that_leaves_nothing_runnable_is_CE_never_IE(lang, lang_server):
    body = judge(lang_server, lang.slug, "norun", TESTS[:1])
    assert (body["verdict"], [t["verdict"] for t in body["tests"]]) == ("CE", ["SK"]), body
    assert body["compile"]["stderr"].strip(), body["compile"]
    if lang.slug == "golang":  # the compiler's own words
        assert "main package" in body["compile"]["stderr"], body["compile"]


# The class run is named by the source, as Kattis, DMOJ, Codeforces and DOMjudge name it
# (DESIGN.md, round 2): `named` declares a public class other than Main, `unnamed` none (the class
# declaring main runs). The programs, for the languages where a class name matters.
NAMED = [(slug, name) for slug in LANGS for name in ("named", "unnamed") if (PROGRAMS / slug / name).is_dir()]


@pytest.mark.parametrize(("slug", "name"), NAMED, scope="session")
def test_the_class_run_is_the_one_the_source_names(lang, lang_server, name):
    body = judge(lang_server, lang.slug, name)
    assert (body["verdict"], body["passed"]) == ("AC", 3), body


# /judge builds as judges do (DESIGN.md, round 2, "Judge-grade builds"), not as /run's Codebattle
# builds: `grade` prints what its build was. C++: -O2 and ONLINE_JUDGE, no kiln prelude (Codeforces'
# flags); Rust: optimized, an i32 overflow wraps where the dev profile panics, ONLINE_JUDGE; Java and
# Kotlin: the JVM as DOMjudge runs it (ONLINE_JUDGE, both JIT tiers, a 64 MiB stack); Haskell:
# DOMjudge's -O -cpp -DONLINE_JUDGE.
GRADE = {
    "cpp": ("", "judge-grade"),
    "rust": ("100000", "1410065408 judge-grade"),
    "java": ("", "judge-grade"),
    "kotlin": ("", "judge-grade"),
    "haskell": ("10000000", "50000005000000 judge-grade"),
}


@pytest.mark.parametrize("slug", list(GRADE), scope="session")
def test_the_judge_builds_as_judges_do(lang, lang_server):
    stdin, expected = GRADE[lang.slug]
    body = judge(lang_server, lang.slug, "grade", [{"stdin": stdin, "expected": expected}])
    assert (body["verdict"], body["tests"][0]["stdout"].strip()) == ("AC", expected), body
    [served] = [l for l in lang_server.client.get("/languages").json()["languages"] if l["slug"] == lang.slug]
    assert "ONLINE_JUDGE" in served["judge_build"] + served["judge_exec"], served
