"""The language table: which files a request's texts become, and what each language needs.

A slug's workspace is `<RUN_WORKSPACE>/<slug>/` (a Makefile whose `test` target is the test
command, and a harness in `check/`: what runs the asserts against the solution and reports). A
compiled language's harness comes with each /run request instead, as `checker_text` (Codebattle
calls it the checker; kiln keeps "checker" for a judge's testlib program): the client harness.
The request's texts are written below `/sandbox`, at the paths given here, and `asserts.json`
goes next to the solution file. A judge request's files go
in JUDGE_DIR: its solution as the language's `judge_file`, built by the workspace's `build`
target and run by its `exec` target.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
JUDGE_DIR = "judge"  # below /sandbox: a judge request's files, and what its build makes of them


@dataclass(frozen=True)
class Language:
    slug: str
    solution_file: str  # relative to /sandbox
    client_harness_file: str | None  # where checker_text goes; None: the workspace's harness runs the asserts
    tmp_size: int  # bytes, for both the workspace upper layer and /tmp
    toolchain: tuple[str, ...]  # executables that must be found on the sandbox PATH
    version_command: tuple[str, ...] = ()
    readonly_paths: tuple[str, ...] = ()  # host paths the toolchain needs besides /usr
    env: tuple[tuple[str, str], ...] = ()
    # workspace folders (relative to /sandbox) the task writes besides check/: build caches,
    # target dirs. They are chowned to the task per request (a metadata copy-up).
    writable_dirs: tuple[str, ...] = ()
    pids_max: int | None = None  # None: RUN_PIDS_MAX
    memory_max: int | None = None  # None: RUN_CGROUP_MEMORY_MAX
    # the runtime whose template module (kiln.native.TEMPLATE_MODULES) a workspace's `template`
    # command loads: None, the language cannot have a template
    template_module: str | None = None
    judge_file: str = ""  # the name a judge request's solution is written as, in JUDGE_DIR
    judge_time_ms: int = 1000  # a judge test's default CPU time: more where the runtime starts slowly
    # False: its runtime reserves address space it never uses (a JVM's heap and class space, V8's
    # and Dart's pointer cages, the BEAM's, GHC's and Go's heap reservations, Mono's), so RLIMIT_AS
    # says nothing of its memory; /judge refuses limits.address_space for it, as judges that count
    # address space give such languages their resident memory instead
    address_space: bool = True

    @property
    def has_client_harness(self) -> bool:
        return self.client_harness_file is not None

    @property
    def asserts_file(self) -> str:
        return posixpath.join(posixpath.dirname(self.solution_file), "asserts.json")

    @property
    def check_dir(self) -> str:
        return posixpath.dirname(self.solution_file)


def _lang(slug, solution, client_harness, tmp_size, toolchain, version=(), **extra) -> Language:
    folder = "lib" if slug == "dart" else "check"
    extra.setdefault("judge_file", JUDGE_FILES[slug])
    return Language(
        slug=slug,
        solution_file=f"{folder}/{solution}",
        client_harness_file=f"{folder}/{client_harness}" if client_harness else None,
        tmp_size=tmp_size,
        toolchain=tuple(toolchain),
        version_command=tuple(version),
        **extra,
    )


JUDGE_FILES = {
    "clojure": "main.clj", "cpp": "main.cpp", "csharp": "Main.cs", "dart": "main.dart", "elixir": "main.exs",
    "golang": "main.go", "haskell": "Main.hs", "java": "Main.java", "js": "main.js", "kotlin": "Main.kt",
    "php": "main.php", "python": "main.py", "ruby": "main.rb", "rust": "main.rs", "swift": "main.swift",
    "ts": "main.ts", "zig": "main.zig",
}  # fmt: skip

LANGUAGES: dict[str, Language] = {
    lang.slug: lang
    for lang in (
        _lang("clojure", "solution.clj", None, 256 * MiB, ["clojure", "java"], ["clojure", "-e", "(print (clojure-version))"], readonly_paths=("/etc/java-17-openjdk",), judge_time_ms=3000, address_space=False),
        _lang("cpp", "solution.cpp", "checker.cpp", 512 * MiB, ["g++"], ["g++", "--version"]),
        _lang("csharp", "Solution.cs", "Checker.cs", 1 * GiB, ["mcs", "mono"], ["mono", "--version"], readonly_paths=("/etc/mono",), address_space=False),
        _lang("dart", "solution.dart", "checker.dart", 128 * MiB, ["dart"], ["dart", "--version"], address_space=False),
        _lang("elixir", "solution.exs", None, 128 * MiB, ["elixir", "erl"], ["elixir", "--short-version"], judge_time_ms=2000, address_space=False),
        _lang("golang", "solution.go", "checker.go", 512 * MiB, ["go"], ["go", "version"], env=(("GOCACHE", "/sandbox/.cache/go-build"), ("CGO_ENABLED", "0"), ("GOMAXPROCS", "2"), ("GOPROXY", "off"), ("GOSUMDB", "off"), ("GOTOOLCHAIN", "local"), ("GOTELEMETRY", "off"), ("GOFLAGS", "")), address_space=False),
        _lang("haskell", "Solution.hs", "Checker.hs", 256 * MiB, ["ghc", "gcc", "ld.lld"], ["ghc", "--numeric-version"], readonly_paths=("/var/lib/ghc",), env=(("LANG", "C.UTF-8"), ("LC_ALL", "C.UTF-8")), address_space=False),
        _lang("java", "Solution.java", "Checker.java", 256 * MiB, ["javac", "java"], ["javac", "-version"], readonly_paths=("/etc/java-17-openjdk",), judge_time_ms=2000, address_space=False),
        _lang("js", "solution.js", None, 64 * MiB, ["node"], ["node", "--version"], template_module="node", address_space=False),
        _lang("kotlin", "solution.kt", "checker.kt", 256 * MiB, ["kotlinc", "java"], ["cat", "/usr/local/lib/node_modules/kotlin-compiler/build.txt"], readonly_paths=("/etc/java-17-openjdk",), memory_max=1536 * MiB, judge_time_ms=2000, address_space=False),
        _lang("php", "solution.php", None, 64 * MiB, ["php"], ["php", "-r", "echo PHP_VERSION;"], readonly_paths=("/etc/php",), template_module="php"),
        _lang("python", "solution.py", None, 256 * MiB, ["python3"], ["python3", "--version"], template_module="python"),
        _lang("ruby", "solution.rb", None, 64 * MiB, ["ruby"], ["ruby", "--version"], template_module="ruby"),
        _lang("rust", "solution.rs", "checker.rs", 256 * MiB, ["cargo", "rustc", "cc"], ["rustc", "--version"], env=(("CARGO_HOME", "/sandbox/.cargo"), ("CARGO_BUILD_JOBS", "2"), ("CARGO_INCREMENTAL", "0"), ("CARGO_NET_OFFLINE", "true"), ("CARGO_TERM_COLOR", "never"))),
        _lang("swift", "solution.swift", "checker.swift", 256 * MiB, ["swiftc"], ["swiftc", "--version"], env=(("SWIFT_BACKTRACE", "enable=no"),)),
        _lang("ts", "solution.js", None, 64 * MiB, ["node"], ["node", "--version"], template_module="node", address_space=False),
        _lang("zig", "solution.zig", "checker.zig", 128 * MiB, ["zig"], ["zig", "version"]),
    )
}


def get(slug: str) -> Language | None:
    return LANGUAGES.get(slug)
