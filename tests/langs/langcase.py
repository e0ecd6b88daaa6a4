"""What the tests in tests/langs/ share: they run each language through the real HTTP API and the
real sandbox, on a kiln server serving only that language.

- LANGS: every language under test (Lang): what its tests need on the host (the skip reason
  when it is missing), its example files (examples/<slug>/: the a+b solution, the client harness, the
  argument lists in asserts.json) and what its runs send unless a test says otherwise;
- `run` (POST /run, status 200) and `items` (the report of a run that exited 0), and a few
  checks and builders several tests use.

test_every_language.py is the table of the tests every language (or every language of a group)
has, languages as rows; test_<slug>.py holds what is that language's own. conftest.py gives each
test its language (`lang`) and a server of it (`lang_server`): a test runs for the languages of
its `slug` parametrization (session-scoped, so that all the tests of one language share one
server whatever their module).

bench/langs.py posts each folder of examples/ as these tests do (its asserts.json included).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kilntest import REPO, Server

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
EXAMPLES = Path(__file__).parent / "examples"
SECONDS = re.compile(r"^\d+\.\d{7}$")  # an item's "time": seconds with 7 decimals
ITEM_KEYS = ["type", "value", "time", "output"]  # a result item's keys, in the protocol's order


def example(slug: str, name: str) -> str:
    """tests/langs/examples/<slug>/<name>."""
    return (EXAMPLES / slug / name).read_text()


def missing(hint: str, programs: tuple[str, ...] = (), paths: tuple[tuple[Path | str, str], ...] = ()) -> str | None:
    """Why this host cannot run a language's tests (None when it can): the first of programs not on
    the sandbox's PATH ("<program> is not installed: <hint>"), else the first of paths (path, what
    its absence means) that does not exist ("<what>: <hint>")."""
    for name in programs:
        if shutil.which(name, path=SANDBOX_PATH) is None:
            return f"{name} is not installed: {hint}"
    for path, what in paths:
        if not Path(path).exists():
            return f"{what}: {hint}"
    return None


def _dart_missing() -> str | None:
    if shutil.which("dart", path=SANDBOX_PATH) is None:
        return "no Dart SDK on this host (not packaged for Debian 12; langs/dart/README.md says how to install it)"
    if not (REPO / "langs" / "dart" / ".dart_tool" / "package_config.json").is_file():
        return "langs/dart/.dart_tool/package_config.json is missing: run langs/dart/install.sh"
    return None


def _swift_missing() -> str | None:
    if shutil.which("swiftc", path=SANDBOX_PATH) is None:
        glibc = os.confstr("CS_GNU_LIBC_VERSION") or "glibc unknown"
        return f"no Swift toolchain on this host ({glibc}; Debian 13's swiftlang needs glibc >= 2.38; langs/swift/README.md)"
    if not (REPO / "langs" / "swift" / ".kiln-installed").is_file():
        return "langs/swift/.module-cache is not filled: run langs/swift/install.sh"
    return None


@dataclass(frozen=True)
class Lang:
    """A language under test and what its runs send unless a test says otherwise."""

    slug: str
    missing: Callable[[], str | None]  # why this host cannot run it (None: it can)
    solution: str  # the example a+b (examples/<slug>/)
    client_harness: str | None = None  # checker_text: the example's client harness (Codebattle's checker)
    asserts: Any = None  # asserts: the example's argument lists (None: not sent)
    timeout: str = "30s"  # generous (compilers, JVMs): these tests assert behaviour, not speed
    ready_timeout: float = 60  # for the server's slots to be warm
    one_line: bool = True  # items(): the report is a single line, "\n"-terminated
    timed: bool = False  # items(): every call's item has a 7-decimal "time"

    def serve(self) -> Iterator[Server]:
        """The body of the server fixture: skips every test of the language, saying why, when the
        host lacks what it needs; else a server of this language only, two slots."""
        reason = self.missing()
        if reason:
            pytest.skip(f"{self.slug}: {reason}")
        server = Server({"RUN_LANGS": self.slug, "RUN_CONCURRENCY": "2"}).wait_ready(self.ready_timeout)
        yield server
        server.stop()

    def run(self, server: Server, solution: str, *, client_harness: str | None = None, arguments: list | None = None, **fields: Any) -> dict:
        """POST /run: solution, client harness (by default the language's), asserts {"arguments": arguments}
        (by default the language's asserts) and other fields (one given as None is not sent).
        The response's body (status 200)."""
        payload = {"checker_text": client_harness or self.client_harness, "asserts": self.asserts, "timeout": self.timeout, **fields}
        if arguments is not None:
            payload["asserts"] = {"arguments": arguments}
        sent = {key: value for key, value in payload.items() if value is not None}
        response = server.run(lang_slug=self.slug, solution_text=solution, **sent)
        assert response.status_code == 200, response.text
        return response.json()

    def items(self, body: dict) -> list[dict]:
        """The protocol's items a run printed: it exited 0, its stdout is one JSON array."""
        assert (body["exit_code"], body["stats"]["outcome"]) == (0, "exited"), body
        if self.one_line:
            assert body["stdout"].endswith("\n") and body["stdout"].count("\n") == 1, body
        got = json.loads(body["stdout"])
        if self.timed:
            for item in got:
                if item["type"] != "output":
                    assert SECONDS.match(item["time"]), item
        return got


def _harnessed(slug: str, solution: str, client_harness: str, **settings: Any) -> Lang:
    """A language whose example client harness is given asserts.json (cpp, golang, rust, zig)."""
    return Lang(slug, solution=example(slug, solution), client_harness=example(slug, client_harness), asserts=json.loads(example(slug, "asserts.json")), **settings)


LANGS = {
    lang.slug: lang
    for lang in (
        Lang(
            "clojure",
            lambda: missing(
                "run langs/clojure/install.sh",
                programs=("clojure", "java"),
                paths=((REPO / "langs" / "clojure" / "runner" / "harness.jar", "the workspace is not prepared (runner/harness.jar)"),),
            ),
            solution=example("clojure", "solution.clj"),
            asserts=json.loads(example("clojure", "asserts.json")),
            ready_timeout=120,
        ),
        _harnessed(
            "cpp",
            "solution.cpp",
            "checker.cpp",
            missing=lambda: missing(
                "run langs/install-toolchains.sh cpp",
                programs=("g++",),
                paths=(
                    ("/usr/include/nlohmann/json.hpp", "nlohmann-json3-dev is not installed"),
                    (REPO / "langs" / "cpp" / "prelude" / "kiln.hpp.gch", "the prelude is not precompiled"),
                    (REPO / "langs" / "cpp" / ".installed", "the workspace is not marked prepared"),
                ),
            ),
            ready_timeout=120,
            timeout="60s",  # a build of nlohmann::json's members took 30 s in the emulated stock VM
            one_line=False,
        ),
        Lang(
            "csharp",
            lambda: missing(
                "run langs/csharp/install.sh",
                programs=("mcs", "mono"),
                paths=(
                    ("/usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll", "Newtonsoft.Json is not installed"),
                    (REPO / "langs" / "csharp" / "runner" / "run.exe", "the workspace is not prepared (runner/run.exe)"),
                ),
            ),
            solution=example("csharp", "Solution.cs"),
            client_harness=example("csharp", "Checker.cs"),
            ready_timeout=120,
        ),
        # the VM compiles first: its report is not one line
        Lang("dart", _dart_missing, solution=example("dart", "solution.dart"), client_harness=example("dart", "checker.dart"), one_line=False),
        Lang(
            "elixir",
            lambda: missing(
                "run langs/elixir/install.sh",
                paths=(
                    ("/usr/bin/elixir", "/usr/bin/elixir is not installed"),
                    (REPO / "langs" / "elixir" / "ebin" / "Elixir.KilnHarness.beam", "langs/elixir/ebin is not built"),
                ),
            ),
            solution=example("elixir", "solution.exs"),
            timed=True,
        ),
        _harnessed(
            "golang",
            "solution.go",
            "checker.go",
            missing=lambda: missing(
                "run langs/install-toolchains.sh golang",
                programs=("go",),
                paths=(
                    (REPO / "langs" / "golang" / ".cache" / "go-build" / "README", "the Go build cache is not warm"),
                    (REPO / "langs" / "golang" / ".installed", "the workspace is not marked prepared"),
                ),
            ),
            ready_timeout=120,
            one_line=False,
        ),
        Lang(
            "haskell",
            lambda: missing(
                "run langs/haskell/install.sh",
                programs=("ghc", "gcc", "ld.lld"),
                paths=((REPO / "langs" / "haskell" / "boot" / "main.o", "langs/haskell/boot/main.o is not built"),),
            ),
            solution=example("haskell", "Solution.hs"),
            client_harness=example("haskell", "Checker.hs"),
            one_line=False,
        ),
        Lang(
            "java",
            lambda: missing(
                "run langs/java/install.sh",
                programs=("javac", "java"),
                paths=(
                    ("/usr/share/java/gson.jar", "gson is not installed"),
                    (REPO / "langs" / "java" / "runner" / "run.jar", "the workspace is not prepared (runner/run.jar)"),
                ),
            ),
            solution=example("java", "Solution.java"),
            client_harness=example("java", "Checker.java"),
            ready_timeout=120,
        ),
        Lang(
            "kotlin",
            lambda: missing(
                "run langs/kotlin/install.sh",
                programs=("kotlinc", "java"),
                paths=(
                    ("/usr/share/java/gson.jar", "gson is not installed"),
                    (REPO / "langs" / "kotlin" / "runner" / "run.jar", "the workspace is not prepared (runner/run.jar)"),
                ),
            ),
            solution=example("kotlin", "solution.kt"),
            client_harness=example("kotlin", "checker.kt"),
            timeout="60s",  # the Kotlin compiler takes seconds: runs get a minute
            ready_timeout=120,
        ),
        Lang("php", lambda: missing("run langs/php/install.sh", paths=(("/usr/bin/php", "/usr/bin/php is not installed"),)), solution=example("php", "solution.php"), timed=True),
        Lang("ruby", lambda: missing("run langs/ruby/install.sh", paths=(("/usr/bin/ruby", "/usr/bin/ruby is not installed"),)), solution=example("ruby", "solution.rb"), timed=True),
        _harnessed(
            "rust",
            "solution.rs",
            "checker.rs",
            missing=lambda: missing(
                "run langs/install-toolchains.sh rust",
                programs=("cargo", "rustc", "cc"),
                paths=(
                    (REPO / "langs" / "rust" / "target" / "debug" / "checker", "the dependencies are not prebuilt"),
                    (REPO / "langs" / "rust" / ".installed", "the workspace is not marked prepared"),
                ),
            ),
            ready_timeout=120,
            one_line=False,
        ),
        # swiftc with Foundation: runs get a minute
        Lang("swift", _swift_missing, solution=example("swift", "solution.swift"), client_harness=example("swift", "checker.swift"), timeout="60s", one_line=False),
        Lang(
            "ts",
            lambda: missing(
                "run langs/ts/install.sh",
                paths=(
                    ("/usr/bin/node", "/usr/bin/node is not installed"),
                    (REPO / "langs" / "ts" / "node_modules" / "esbuild", "langs/ts/node_modules is not installed"),
                ),
            ),
            solution=example("ts", "solution.ts"),
            timed=True,
        ),
        _harnessed(
            "zig",
            "solution.zig",
            "checker.zig",
            missing=lambda: missing(
                "run langs/install-toolchains.sh zig",
                programs=("zig",),
                paths=(
                    (REPO / "langs" / "zig" / ".cache" / "zig", "the zig cache is not prewarmed"),
                    (REPO / "langs" / "zig" / ".installed", "the workspace is not marked prepared"),
                ),
            ),
            ready_timeout=120,
            one_line=False,
        ),
    )
}


def only(slug: str) -> pytest.MarkDecorator:
    """`pytestmark = only("<slug>")`: every test of a test_<slug>.py runs for its language alone."""
    return pytest.mark.parametrize("slug", [slug], scope="session")


def ran(body: dict) -> tuple:
    """(exit_code, stdout, stderr) of a run."""
    return body["exit_code"], body["stdout"], body["stderr"]


def assert_gson_report(body: dict) -> None:
    """The report of a Codebattle-shaped client harness (one gson object a line) around a solution that
    prints b and returns the sorted keys of c and "a:<len(d)>", called with 7, "bee", {k, j}, [1.5, 2.5]."""
    assert body["exit_code"] == 0, body
    got = json.loads(body["stdout"])
    assert got["type"] == "result"
    assert got["value"] == ["j", "k", "7:2"]
    assert got["output"] == "bee\n"
