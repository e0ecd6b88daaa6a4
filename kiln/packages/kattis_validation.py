"""How a Kattis package's outputs are judged, as kiln can do it exactly (kiln/packages/kattis.py).

Default validation: Kattis's default output validator compares tokens, case-insensitively unless
`case_sensitive`, whitespace-insensitively unless `space_change_sensitive`, numbers within
`float_tolerance E` (absolute or relative), `float_absolute_tolerance E`,
`float_relative_tolerance E` (problemtools' support/default_validator/default_validator.cc).
kiln's modes (DESIGN.md, compare modes) take: tokens; float with absolute_epsilon and
relative_epsilon (either suffices, a tolerance not given accepts only equal numbers, as its -1
does) and float_rule kattis (its arithmetic in doubles); exact (every whitespace byte as the
answer's) for space_change_sensitive without tolerances, exact_floats with them; each with
ignore_case unless case_sensitive (strcasecmp folds ASCII letters only, as ignore_case does).
A negative tolerance is as one not given (the validator's test is `>= 0`).

Custom validation: a C++ output validator runs as `validator input answer feedback_dir [flags] <
team_output`, exit 42 accepted, 43 wrong answer, else a judge error, its words in
feedback_dir/judgemessage.txt. kiln's checker convention is testlib's (`checker input output
answer`, exit 0, 1, 3), so the checker sent is an adapter written here (ADAPTER) that includes the
validator's source with its `main` renamed, runs it in a forked child (a validator ends with
exit(42) anywhere, which only a parent can see) with stdin reopened on the output and a feedback
folder in /tmp, and maps the exit code; it prints judgemessage.txt (the checker's message).
Built as an interactor (adapter(flags, interactive=True), kattis_interactive.py) the same adapter
leaves the validator the submission's pipes and prints judgemessage.txt to stderr.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from kiln.packages.common import Helper, PackageError, read_text

TOLERANCES = ("float_tolerance", "float_absolute_tolerance", "float_relative_tolerance")
SWITCHES = ("case_sensitive", "space_change_sensitive")
VALIDATOR_FOLDERS = ("output_validators", "output_validator")  # the legacy format's, the 2023 format's
CPP_SOURCES = (".cpp", ".cc", ".cxx", ".c++")
HEADERS = (".h", ".hpp", ".hh")
INCLUDED_NAME = "kattis_validator.inc"  # not *.cpp: the judge build compiles every *.cpp on its own
_MAIN = re.compile(r"\bint\s+main\s*\(")


def compare_mode(flags: list[str], where: Path) -> tuple[str, dict, bool]:
    """(kiln's compare mode, its tolerance fields, ignore_case) doing exactly what the default
    validator does with `flags`."""
    absolute = relative = None  # each tolerance's last value, in the order the validator reads its flags
    switches = set()
    i = 0
    while i < len(flags):
        flag = flags[i]
        if flag in SWITCHES:
            switches.add(flag)
        elif flag in TOLERANCES:
            if i + 1 == len(flags):
                raise PackageError(f"{where}: validator_flags {flag} lacks its value ({flag} 1e-6)")
            try:
                value = float(flags[i + 1])
            except ValueError:
                value = math.nan
            if not math.isfinite(value):  # its isfloat() refuses it: a judge error on every test
                raise PackageError(f"{where}: validator_flags {flag} {flags[i + 1]!r} is not a finite number")
            absolute = value if flag != "float_relative_tolerance" else absolute  # float_tolerance sets both
            relative = value if flag != "float_absolute_tolerance" else relative
            i += 1
        else:
            raise PackageError(f"{where}: validator_flags {flag!r} is not a flag of Kattis's default validator ({', '.join(SWITCHES + TOLERANCES)})")
        i += 1
    ignore_case = "case_sensitive" not in switches
    tolerances = {name: value for name, value in (("absolute_epsilon", absolute), ("relative_epsilon", relative)) if value is not None and value >= 0}
    if not tolerances:
        return ("exact" if "space_change_sensitive" in switches else "tokens"), {}, ignore_case
    return ("exact_floats" if "space_change_sensitive" in switches else "float"), {**tolerances, "float_rule": "kattis"}, ignore_case


def bridged_validator(folder: Path, flags: list[str]) -> Helper:
    """The checker that runs the package's C++ output validator in kiln's convention."""
    return Helper("cpp", adapter(flags, interactive=False), cpp_files(validator_folder(folder)))


def validator_folder(folder: Path) -> Path:
    """The package's one output validator folder: output_validators/<name>/ (legacy) or
    output_validator/ (2023)."""
    found = [folder / name for name in VALIDATOR_FOLDERS if (folder / name).is_dir()]
    candidates = [p for f in found for p in ([f] if f.name == "output_validator" else sorted(q for q in f.iterdir() if q.is_dir()))]
    if len(candidates) != 1:
        raise PackageError(f"{folder}: validation custom needs one output validator, output_validators/<name>/ (found {len(candidates)})")
    return candidates[0]


def cpp_files(validator: Path) -> tuple[tuple[str, Path], ...]:
    """A C++ validator's files as the adapter's build takes them: the source with `main` as
    INCLUDED_NAME, its other sources compiled and linked beside it, its headers."""
    files = sorted(p for p in validator.iterdir() if p.is_file())
    sources = [p for p in files if p.suffix in CPP_SOURCES]
    if not sources:
        others = ", ".join(p.name for p in files) or "nothing"
        raise PackageError(f"{validator} holds no C++ source ({others}): kiln bridges C++ output validators (and Python ones of interactive problems) only")
    with_main = [p for p in sources if _MAIN.search(read_text(p, "output validator's source"))]
    if len(with_main) != 1:
        raise PackageError(f"{validator}: kiln finds `int main(` in {len(with_main)} of its C++ sources, and needs it in exactly one")
    main = with_main[0]
    given = [(INCLUDED_NAME, main)]
    given += [(p.stem + ".cpp", p) for p in sources if p != main]  # compiled and linked beside it
    given += [(p.name, p) for p in files if p.suffix in HEADERS]
    return tuple(given)


def adapter(flags: list[str], interactive: bool) -> str:
    """The C++ adapter's source: a checker (interactive False) or an interactor."""
    arguments = "".join(f", {_c_string(flag)}" for flag in flags)
    return ADAPTER.replace("/*FLAGS*/", arguments).replace("/*INTERACTIVE*/", "1" if interactive else "0")


def _c_string(text: str) -> str:
    """A C string literal of `text`: every byte but letters, digits and " ._-+" as an octal escape."""
    safe = lambda b: chr(b).isalnum() or chr(b) in " ._-+"  # noqa: E731
    return '"' + "".join(chr(b) if b < 128 and safe(b) else f"\\{b:03o}" for b in text.encode()) + '"'


ADAPTER = r"""// Written by kiln judge: runs a Kattis output validator in testlib's convention.
// As a checker, argv: input output answer; the validator: input answer feedback_dir [flags] < output.
// As an interactor, argv: input record [answer], stdin and stdout the submission's; the validator
// gets them as they are (Kattis's interactive mode). Exit 42 -> 0 (AC), 43 -> 1 (WA), anything
// else -> 3 (the validator failed: IE). judgemessage.txt is printed where kiln reads the message:
// a checker's stdout, an interactor's stderr (its stdout goes to the submission).
#define KILN_INTERACTIVE /*INTERACTIVE*/
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>
#define main kattis_validator_main
#include "kattis_validator.inc"
#undef main

static int kiln_run(int (*validator)(int, char **), int argc, char **argv) { return validator(argc, argv); }
static int kiln_run(int (*validator)(int, const char **), int argc, char **argv) { return validator(argc, const_cast<const char **>(argv)); }
static int kiln_run(int (*validator)(), int, char **) { return validator(); }

static void kiln_print_file(const std::string &path, FILE *to) {
    FILE *file = fopen(path.c_str(), "r");
    if (!file) return;
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, file)) > 0) fwrite(buffer, 1, n, to);
    fclose(file);
}

int main(int argc, char **argv) {
#if KILN_INTERACTIVE
    if (argc < 2) { fprintf(stderr, "kiln's Kattis adapter: expected input record [answer]\n"); return 3; }
    const char *answer = argc > 3 ? argv[3] : "/dev/null";  // kiln sends the answer when the test has one
    FILE *message = stderr;
    // a submission that ends first leaves a closed pipe: the validator's writes fail (EPIPE) and
    // it goes on to judge what it read, rather than dying of SIGPIPE (a judge error)
    signal(SIGPIPE, SIG_IGN);
#else
    if (argc < 4) { fprintf(stderr, "kiln's Kattis adapter: expected input output answer\n"); return 3; }
    const char *answer = argv[3];
    FILE *message = stdout;
#endif
    char folder[] = "/tmp/kattis-feedback-XXXXXX";
    if (!mkdtemp(folder)) { perror("kiln's Kattis adapter: mkdtemp"); return 3; }
    std::string feedback = std::string(folder) + "/";
    std::vector<std::string> arguments = {"output_validator", argv[1], answer, feedback/*FLAGS*/};
    fflush(nullptr);
    pid_t child = fork();
    if (child < 0) { perror("kiln's Kattis adapter: fork"); return 3; }
    if (child == 0) {
#if !KILN_INTERACTIVE
        int output = open(argv[2], O_RDONLY);
        if (output < 0 || dup2(output, 0) < 0) { perror("kiln's Kattis adapter: the output"); _exit(3); }
        close(output);
#endif
        std::vector<char *> pointers;
        for (auto &argument : arguments) pointers.push_back(argument.data());
        pointers.push_back(nullptr);
        exit(kiln_run(kattis_validator_main, static_cast<int>(arguments.size()), pointers.data()));
    }
#if KILN_INTERACTIVE
    close(0);  // the validator's ends of the pipes are its own: the submission sees EOF when it ends
    close(1);
#endif
    int status = 0;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) { perror("kiln's Kattis adapter: waitpid"); return 3; }
    kiln_print_file(feedback + "judgemessage.txt", message);
    fflush(message);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 42) return 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 43) return 1;
    if (WIFEXITED(status)) fprintf(stderr, "kiln: the output validator exited %d (Kattis: 42 accepted, 43 wrong answer, else a judge error)\n", WEXITSTATUS(status));
    else fprintf(stderr, "kiln: the output validator was killed by signal %d\n", WTERMSIG(status));
    return 3;
}
"""
