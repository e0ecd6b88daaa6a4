"""What startup resolves: test commands from Makefiles, served languages, the install layout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kiln import config, native, runtime
from kiln.runtime import Commands, StartupError, exec_last_command, read_commands

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("/usr/bin/python3 -B check/harness.py", "exec /usr/bin/python3 -B check/harness.py"),
        ("javac x.java\njava Main", "javac x.java\nexec java Main"),
        ("true", "exec true"),
        ("cd check && ./run", "cd check && ./run"),
        ("a | b", "a | b"),
        ("FOO=1 run", "FOO=1 run"),
        ("echo $HOME", "echo $HOME"),
        ("echo hi", "echo hi"),
        ("cd check", "cd check"),
        ("run 'quoted arg'", "run 'quoted arg'"),
        ("run > out", "run > out"),
        ("ls *.py", "ls *.py"),
    ],
)
def test_exec_last_command_only_for_plain_commands(script, expected):
    assert exec_last_command(script) == expected


@pytest.mark.parametrize(
    ("script", "memory_max", "expected"),
    [
        ("exec true", "0", ("/usr/bin/true",)),
        ("exec /usr/bin/python3 -B check/harness.py", "0", ("/usr/bin/python3", "-B", "check/harness.py")),
        ("exec check/run x", "0", ("check/run", "x")),
        ("exec no-such-program-here", "0", ("/bin/sh", "-e", "-c", "exec no-such-program-here")),
        ("make x\nexec run", "0", ("/bin/sh", "-e", "-c", "make x\nexec run")),
        ("cd check && ./run", "0", ("/bin/sh", "-e", "-c", "cd check && ./run")),
        ("exec true", "64m", ("/bin/sh", "-e", "-c", "ulimit -v 65536\nexec true")),
    ],
)
def test_task_argv_runs_a_plain_command_without_sh(script, memory_max, expected):
    cfg = config.load({"RUN_MEMORY_MAX": memory_max}, REPO)
    assert runtime.task_argv(script, cfg) == expected


def makefile(tmp_path: Path, text: str) -> Path:
    (tmp_path / "Makefile").write_text(text)
    return tmp_path


def test_test_command_is_the_recipe(tmp_path):
    folder = makefile(tmp_path, ".PHONY: test compile\ntest: compile\n\t@echo one\n\tpython3 run.py\ncompile:\n\t@cc -o x x.c\n")
    assert read_commands(folder).test == "cc -o x x.c\necho one\nexec python3 run.py"


def test_test_must_be_phony(tmp_path):
    with pytest.raises(StartupError, match="must be declared .PHONY"):
        read_commands(makefile(tmp_path, "test:\n\t@true\n"))


def test_test_may_not_depend_on_files(tmp_path):
    with pytest.raises(StartupError, match=r"depends on files \['x.o'\]"):
        read_commands(makefile(tmp_path, ".PHONY: test\ntest: x.o\n\t@true\nx.o:\n\t@true\n"))


def test_missing_test_target(tmp_path):
    with pytest.raises(StartupError):
        read_commands(makefile(tmp_path, ".PHONY: other\nother:\n\t@true\n"))


def test_a_workspace_without_prestart_has_none(tmp_path):
    assert read_commands(makefile(tmp_path, ".PHONY: test\ntest:\n\t@true\n")) == Commands("exec true")


def test_the_prestart_command_is_read_like_the_test_command(tmp_path):
    folder = makefile(tmp_path, ".PHONY: test prestart\ntest:\n\t@run\nprestart:\n\t@run --prestarted\n")
    assert read_commands(folder) == Commands("exec run", prestart="exec run --prestarted")


def test_the_template_command_is_read_like_the_others(tmp_path):
    folder = makefile(tmp_path, ".PHONY: test prestart template\ntest:\n\t@run\nprestart:\n\t@run --prestarted\ntemplate:\n\t@run --template\n")
    assert read_commands(folder) == Commands("exec run", prestart="exec run --prestarted", template="exec run --template")


def test_the_judge_commands_are_read_like_the_others(tmp_path):
    folder = makefile(tmp_path, ".PHONY: test build exec\ntest:\n\t@run\nbuild:\n\t@cc -o judge/main judge/*.c\nexec:\n\t@judge/main\n")
    assert read_commands(folder) == Commands("exec run", build="cc -o judge/main judge/*.c", exec="exec judge/main")


@pytest.mark.parametrize("target", ["build", "exec"])
def test_a_build_without_exec_or_the_reverse_is_refused(tmp_path, target):
    with pytest.raises(StartupError, match="`build` and `exec` go together"):
        read_commands(makefile(tmp_path, f".PHONY: test {target}\ntest:\n\t@run\n{target}:\n\t@run\n"))


def test_a_template_without_prestart_is_refused(tmp_path):
    with pytest.raises(StartupError, match="`template` needs a `prestart` target"):
        read_commands(makefile(tmp_path, ".PHONY: test template\ntest:\n\t@run\ntemplate:\n\t@run --template\n"))


@pytest.mark.parametrize(
    ("rules", "error"),
    [
        (".PHONY: test\ntest:\n\t@run\nprestart:\n\t@run\n", "`prestart` must be declared .PHONY"),
        (".PHONY: test prestart\ntest:\n\t@run\nprestart: x.o\n\t@run\nx.o:\n\t@true\n", r"`prestart` depends on files \['x.o'\]"),
        (".PHONY: test prestart\ntest:\n\t@run\nprestart:\n", "printed no command"),
    ],
)
def test_a_bad_prestart_target_is_refused_with_the_reason(tmp_path, rules, error):
    with pytest.raises(StartupError, match=error):
        read_commands(makefile(tmp_path, rules))


@pytest.mark.parametrize(("setting", "expected"), [("true", ("/usr/bin/python3", "-B", "check/harness.py", "--prestarted")), ("false", None)])
def test_python_and_js_prestart_unless_turned_off(setting, expected):
    rt = runtime.build(config.load({"RUN_PRESTART": setting, "RUN_LANGS": "python"}, REPO))
    assert rt.workloads["python"].prestart_argv == expected


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, ("/usr/bin/python3", "-B", "check/harness.py", "--template")),
        ({"RUN_TEMPLATES": "false"}, None),
        ({"RUN_TEMPLATES": "js"}, None),
        ({"RUN_PRESTART": "false"}, None),  # a forked task is a prestarted one
    ],
)
def test_python_forks_from_its_template_unless_turned_off(settings, expected):
    rt = runtime.build(config.load({"RUN_LANGS": "python", **settings}, REPO))
    assert rt.workloads["python"].template_argv == expected
    assert rt.workloads["python"].template_module == (str(native.TEMPLATE_MODULES["python"]) if expected else None)


def test_js_forks_from_its_template_with_the_node_module():
    rt = runtime.build(config.load({"RUN_LANGS": "js"}, REPO))
    assert rt.workloads["js"].template_argv == ("/usr/bin/node", "--single-threaded", "check/harness.js", "--template")
    assert rt.workloads["js"].template_module == str(native.TEMPLATE_MODULES["node"])


def test_a_template_for_a_runtime_kiln_has_no_module_for_is_refused(tmp_path):
    makefile(tmp_path, ".PHONY: test prestart template\ntest:\n\t@true\nprestart:\n\t@true\ntemplate:\n\t@true\n")
    rt = runtime.build(config.load({"RUN_WORKSPACE": str(tmp_path)}, REPO))
    reasons = {u.slug: u.reason for u in rt.unserved}
    assert "golang" not in rt.workloads and "no template module for golang's runtime" in reasons["golang"]
    assert rt.workloads["python"].template_module == str(native.TEMPLATE_MODULES["python"])


def test_build_serves_found_languages_and_says_why_not_others():
    cfg = config.load({}, REPO)
    rt = runtime.build(cfg)
    assert "python" in rt.workloads and "js" in rt.workloads
    assert rt.workloads["python"].script.startswith("exec /usr/bin/python3")
    assert rt.workloads["python"].lower == "/.kiln/lower/ws/python"
    reasons = {u.slug: u.reason for u in rt.unserved}
    assert "dart" in reasons and reasons["dart"]
    assert rt.versions["python"].startswith("Python 3")
    assert rt.staging_dir == "/run/kiln/root"


def test_single_workspace_serves_every_slug(tmp_path):
    makefile(tmp_path, ".PHONY: test\ntest:\n\t@true\n")
    rt = runtime.build(config.load({"RUN_WORKSPACE": str(tmp_path)}, REPO))
    assert set(rt.workloads) == set(config.load({}, REPO).langs or runtime.langs.LANGUAGES)
    assert {w.lower for w in rt.workloads.values()} == {"/.kiln/lower/ws"}


def test_run_langs_naming_an_unservable_language_stops_startup():
    with pytest.raises(StartupError, match="dart"):
        runtime.build(config.load({"RUN_LANGS": "python,dart"}, REPO))


def test_install_layout_refuses_kiln_under_a_bound_path(tmp_path):
    cfg = config.load({}, REPO)
    with pytest.raises(StartupError, match="install kiln elsewhere"):
        runtime.check_install_layout(cfg, (str(REPO),))
    runtime.check_install_layout(cfg, ("/usr", "/etc/alternatives"))


@pytest.mark.parametrize("path", ["/etc", "/proc", "/proc/sys", "/dev", "/tmp/x", "/sandbox", "/.kiln/lower/ws", "/sys/fs"])
def test_readonly_paths_may_not_cover_the_sandbox_own_places(path):
    with pytest.raises(StartupError, match="would cover"):
        runtime.check_readonly_paths(("/usr", path))


def test_readonly_paths_below_etc_are_fine():
    runtime.check_readonly_paths(("/usr", "/etc/java-17-openjdk", "/etc/alternatives", "/var/lib/ghc", "/opt/tool"))


def test_a_workspace_with_an_install_script_is_served_only_once_prepared(tmp_path):
    folder = tmp_path / "ruby"
    folder.mkdir()
    assert runtime.workspace_problem(folder) == f"no workspace at {folder}"
    (folder / "Makefile").write_text(".PHONY: test\ntest:\n\t@true\n")
    assert runtime.workspace_problem(folder) is None
    (folder / "install.sh").write_text("#!/bin/sh\n")
    assert runtime.workspace_problem(folder) == "workspace not prepared: run langs/install-toolchains.sh ruby"
    (folder / runtime.READY_STAMP).touch()
    assert runtime.workspace_problem(folder) is None
    later = (folder / runtime.READY_STAMP).stat().st_mtime_ns + 1_000_000
    os.utime(folder / "Makefile", ns=(later, later))  # a pull changed the Makefile since
    assert runtime.workspace_problem(folder) == "workspace prepared before its Makefile changed: run langs/install-toolchains.sh ruby"
    os.utime(folder / runtime.READY_STAMP, ns=(later, later))  # prepared again
    assert runtime.workspace_problem(folder) is None
