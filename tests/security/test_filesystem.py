"""What the task sees of the filesystem: /proc, /sys, the read-only root, writable /tmp and
/sandbox, nothing of the runner, no other language's workspace, capped sizes and inodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kiln import native
from seclib import assert_exited, c_program

REPO = Path(__file__).resolve().parents[2]


def _json(body: dict):
    assert_exited(body)
    return json.loads(body["stdout"])


# --- /proc and /sys ------------------------------------------------------------------------


def test_proc_shows_only_the_tasks_own_processes(run_py):
    body = run_py(
        """
import json, os, time
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
me = os.getpid()
listed = sorted(int(e) for e in os.listdir("/proc") if e.isdigit())
print(json.dumps({"me": me, "child": child, "listed": listed, "ppid": os.getppid(),
                  "pid1": os.path.exists("/proc/1"), "pid1_status": os.path.exists("/proc/1/status")}))
os.kill(child, 9)
"""
    )
    seen = _json(body)
    assert seen["listed"] == sorted([seen["me"], seen["child"]])
    assert seen["ppid"] == 1  # init is PID 1 of the run's pid namespace ...
    assert seen["pid1"] is False and seen["pid1_status"] is False  # ... and invisible (root's)
    assert seen["me"] < 100  # a fresh pid namespace: the host's pids are elsewhere


WHERE_AM_I = """
import json
print(json.dumps({"cgroup": open("/proc/self/cgroup").read().splitlines(),
                  "mountinfo": open("/proc/self/mountinfo").read().splitlines()}))
"""


def _a_host_device(mountinfo_line: str) -> bool:
    fields = mountinfo_line.split()
    return fields[fields.index("-") + 1] == "devtmpfs" and fields[4] == "/dev" + fields[3]


@pytest.mark.parametrize("kind", ["plain (stdin)", "prestarted"])
def test_the_task_sees_nothing_of_the_hosts_cgroups_or_paths(run_py, server, kind):
    """Its cgroup namespace is rooted at its own slot's cgroup ("/" in every hierarchy, not
    the instance, the zygote's pid and the count of slots made), and its mount table names no
    host path: the workspaces folder's bind, whose mount root is its host path, is gone once
    the workspace overlay is mounted."""
    fields = {"stdin": ""} if kind == "plain (stdin)" else {}
    for _ in range(2):  # python's first run may take a plain slot: the second is prestarted
        seen = _json(run_py(WHERE_AM_I, **fields))
        assert seen["cgroup"] and all(line.endswith(":/") for line in seen["cgroup"]), seen["cgroup"]
        text = "\n".join(seen["mountinfo"])
        for secret in (str(REPO), server.instance, "slot-"):
            assert secret not in text, (secret, seen["mountinfo"])
        # a bind's mount root is its source's path: only binds at that same path (/usr, a
        # toolchain's /etc/...) show one, and it says nothing the task does not see there anyway;
        # rootless, /dev's nodes are the host's bound (/null of the host's devtmpfs at /dev/null)
        elsewhere = [line for line in seen["mountinfo"] if line.split()[3] not in ("/", line.split()[4]) and not _a_host_device(line)]
        assert elsewhere == [], elsewhere


def test_a_c_task_sees_nothing_of_the_hosts_cgroups_or_paths(run_c, c_workspace):
    body = run_c(
        c_program(
            r"""
    char line[4096];
    const char *files[] = {"/proc/self/cgroup", "/proc/self/mountinfo"};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(files[i], "r");
        while (f && fgets(line, sizeof line, f)) say("%s", line);
    }
"""
        )
    )
    assert_exited(body)
    assert str(c_workspace) not in body["stdout"] and "slot-" not in body["stdout"], body["stdout"]
    cgroups = [line for line in body["stdout"].splitlines() if line[:1].isdigit() and line.count(":") == 2 and " " not in line]
    assert cgroups and all(line.endswith(":/") for line in cgroups), body["stdout"]


HOST_WIDE = (
    "/proc/meminfo", "/proc/cpuinfo", "/proc/stat", "/proc/sys", "/proc/kcore", "/proc/sysrq-trigger",
    "/proc/kallsyms", "/proc/modules", "/proc/mounts", "/proc/net", "/proc/keys", "/proc/sched_debug",
    "/proc/self/../1", "/proc/config.gz", "/proc/kmsg", "/proc/timer_list", "/proc/version",
    "/proc/partitions", "/proc/swaps", "/proc/interrupts", "/proc/loadavg", "/proc/uptime", "/proc/acpi",
    "/proc/irq", "/proc/bus", "/proc/fs", "/proc/driver", "/proc/tty", "/proc/sys/kernel/core_pattern",
)  # fmt: skip


def test_proc_has_no_host_wide_files(run_py):
    body = run_py(
        "import json, os\n"
        f"paths = {list(HOST_WIDE)!r}\n"
        "print(json.dumps({'present': [p for p in paths if os.path.lexists(p)], 'root': sorted(os.listdir('/proc'))}))\n"
    )
    seen = _json(body)
    assert seen["present"] == []
    assert [e for e in seen["root"] if not e.isdigit()] == ["self", "thread-self"]


def test_proc_mount_options(run_py):
    body = run_py("print(open('/proc/self/mountinfo').read(), end='')\n")
    assert_exited(body)
    proc = [line for line in body["stdout"].splitlines() if line.split(" ")[4] == "/proc"]
    assert len(proc) == 1
    options = set(proc[0].split(" - ")[1].split()[2].split(","))
    assert {"hidepid=invisible", "subset=pid"} <= options
    assert {"nosuid", "nodev", "noexec"} <= set(proc[0].split(" ")[5].split(","))


def test_sys_is_empty_and_read_only(run_py):
    body = run_py(
        """
import json, os
result = {"listing": os.listdir("/sys")}
for what, attempt in (("create", lambda: open("/sys/kiln", "w")), ("mkdir", lambda: os.mkdir("/sys/fs"))):
    try:
        attempt()
        result[what] = "ok"
    except OSError as e:
        result[what] = e.errno
print(json.dumps(result))
"""
    )
    seen = _json(body)
    assert seen == {"listing": [], "create": 30, "mkdir": 30}  # EROFS


# --- read-only and writable places ---------------------------------------------------------

WRITE_PROBE = """
import errno, json, os
results = {}
def attempt(label, action):
    try:
        action()
        results[label] = "ok"
    except OSError as e:
        results[label] = errno.errorcode[e.errno]
for label, path in TARGETS:
    attempt(label + ":create", lambda: open(path, "x").close())
    attempt(label + ":mkdir", lambda: os.mkdir(path + ".d"))
    attempt(label + ":symlink", lambda: os.symlink("/sandbox", path + ".ln"))
for label, path in EXISTING:
    attempt(label + ":append", lambda: open(path, "ab").close())
    attempt(label + ":chmod", lambda: os.chmod(path, 0o777))
    attempt(label + ":utime", lambda: os.utime(path, (0, 0)))
    attempt(label + ":unlink", lambda: os.unlink(path))
print(json.dumps(results))
"""

READ_ONLY_TARGETS = [
    ("root", "/kiln-probe"),
    ("usr", "/usr/kiln-probe"),
    ("usr-bin", "/usr/bin/kiln-probe"),
    ("bin-link", "/bin/kiln-probe"),
    ("lib-link", "/lib/kiln-probe"),
    ("etc", "/etc/kiln-probe"),
    ("dev", "/dev/kiln-probe"),
    ("proc", "/proc/kiln-probe"),
    ("sys", "/sys/kiln-probe"),
]
READ_ONLY_EXISTING = [
    ("passwd", "/etc/passwd"),
    ("hosts", "/etc/hosts"),
    ("ld.so.cache", "/etc/ld.so.cache"),
    ("python", "/usr/bin/python3"),
    ("bin-sh", "/bin/sh"),
    ("dev-null", "/dev/null"),
    ("root-dir", "/sandbox"),
]


def test_writes_to_the_read_only_tree_fail(run_py):
    probe = f"TARGETS = {READ_ONLY_TARGETS!r}\nEXISTING = {READ_ONLY_EXISTING!r}\n" + WRITE_PROBE
    results = _json(run_py(probe))
    assert len(results) == 3 * len(READ_ONLY_TARGETS) + 4 * len(READ_ONLY_EXISTING)
    allowed = {"EROFS", "EACCES", "EPERM"}
    # /dev/null is the only one a task may open for appending; /sandbox is its own directory
    # (chmod/utime of it are allowed, unlinking the mount point is EBUSY/EACCES).
    exceptions = {"dev-null:append": "ok", "root-dir:chmod": "ok", "root-dir:utime": "ok", "root-dir:append": "EISDIR"}
    exceptions.update({"proc:create": "ENOENT", "proc:mkdir": "ENOENT", "proc:symlink": "ENOENT"})  # procfs itself
    wrong = {}
    for label, outcome in results.items():
        if label in exceptions:
            if outcome != exceptions[label]:
                wrong[label] = outcome
        elif outcome not in allowed:
            wrong[label] = outcome
    assert wrong == {}
    # the read-only mounts answer EROFS (not just a permission check a capability could pass)
    for label in ("root:create", "usr:create", "bin-link:create", "etc:create", "dev:create", "sys:create"):
        assert results[label] == "EROFS", (label, results[label])


def test_read_only_mount_flags(run_py):
    body = run_py("print(open('/proc/self/mountinfo').read(), end='')\n")
    assert_exited(body)
    mounts = {}
    for line in body["stdout"].splitlines():
        fields = line.split(" ")
        mounts[fields[4]] = set(fields[5].split(","))
    for point in ("/", "/usr", "/etc/ld.so.cache", "/etc/alternatives", "/dev", "/sys"):
        assert {"ro", "nosuid"} <= mounts[point], point
    for point in ("/", "/usr", "/etc/ld.so.cache", "/etc/alternatives", "/sys", "/tmp", "/sandbox"):
        assert "nodev" in mounts[point], point
    for point in ("/tmp", "/sandbox"):
        assert {"rw", "nosuid", "nodev"} <= mounts[point], point


def test_tmp_and_sandbox_are_writable(run_py):
    body = run_py(
        """
import json, os
out = {}
for path in ("/tmp/kiln-w", "/sandbox/kiln-w", "/sandbox/check/kiln-w", "/dev/shm/kiln-w"):
    with open(path, "w") as f:
        f.write("data")
    out[path] = open(path).read()
os.mkdir("/tmp/d")
os.mkdir("/sandbox/d")
st = os.stat("/tmp")
out["tmp_mode"] = oct(st.st_mode & 0o7777)
out["sandbox_owner"] = os.stat("/sandbox").st_uid == os.getuid()
out["cwd"] = os.getcwd()
print(json.dumps(out))
"""
    )
    seen = _json(body)
    assert seen == {
        "/tmp/kiln-w": "data",
        "/sandbox/kiln-w": "data",
        "/sandbox/check/kiln-w": "data",
        "/dev/shm/kiln-w": "data",
        "tmp_mode": "0o1777",
        "sandbox_owner": True,
        "cwd": "/sandbox/check",  # the python harness runs a plain program from check/
    }


# --- nothing of the runner -----------------------------------------------------------------


RUNNER_PATHS_PROBE = """
import errno, json, os
out = {"exists": [p for p in PATHS if os.path.lexists(p)]}
for path in ("/.kiln", "/.kiln/lower", "/.kiln/lower/ws", "/.kiln/upper", "/.kiln/upper/upper"):
    try:
        os.listdir(path)
        out[path] = "listed"
    except OSError as e:
        out[path] = errno.errorcode[e.errno]
out["kiln_mode"] = oct(os.stat("/.kiln").st_mode & 0o7777)
out["root"] = sorted(os.listdir("/"))
out["mount_points"] = [line.split(" ")[4] for line in open("/proc/self/mountinfo")]
# every file or directory outside the mounts: the root tmpfs's own content
own = []
for folder, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(folder, d) not in out["mount_points"]]
    own += [os.path.join(folder, n) for n in dirs + files]
out["root_tmpfs"] = sorted(own)
print(json.dumps(out))
"""


def test_runner_files_are_invisible(run_py, server):
    venv = REPO / ".venv"
    paths = ["/work", "/root", "/home", "/opt", "/run", "/var/log", "/var/lib/dpkg", "/srv", "/mnt", "/media", "/boot",
             str(REPO), str(REPO / "langs"), str(REPO / "kiln"), str(venv), f"/run/{server.instance}",
             "/etc/shadow", "/etc/resolv.conf", "/etc/hostname", "/etc/kiln", "/lost+found"]  # fmt: skip
    seen = _json(run_py(f"PATHS = {paths!r}\n" + RUNNER_PATHS_PROBE))
    assert seen["exists"] == []
    assert seen["/.kiln"] == "EACCES"
    assert seen["/.kiln/lower"] == seen["/.kiln/lower/ws"] == seen["/.kiln/upper"] == seen["/.kiln/upper/upper"] == "EACCES"
    assert seen["kiln_mode"] == "0o700"
    # The root holds the sandbox's own entries, plus only the parents of read-only binds of a
    # language's extra paths (e.g. /var for /var/lib/ghc): directories, nothing else in them.
    fixed = {".kiln", "bin", "dev", "etc", "lib", "lib64", "proc", "sandbox", "sbin", "sys", "tmp", "usr"}
    binds = [m for m in seen["mount_points"] if m not in ("/", "/proc", "/sys", "/dev", "/tmp", "/sandbox", "/.kiln/upper")]
    extra_tops = {m.split("/")[1] for m in binds} - fixed
    assert set(seen["root"]) == fixed | extra_tops
    parents = {"/".join(m.split("/")[:i]) for m in binds for i in range(2, m.count("/") + 1)}
    generated = {"/etc/passwd", "/etc/group", "/etc/hosts", "/bin", "/lib", "/lib64", "/sbin", "/dev/null", "/dev/zero",
                 "/dev/full", "/dev/random", "/dev/urandom", "/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr",
                 "/dev/shm", "/.kiln", "/.kiln/lower", "/.kiln/upper", "/proc", "/sys", "/dev", "/tmp", "/sandbox", "/etc"}  # fmt: skip
    # /dev's nodes live on /dev's own tmpfs, /proc, /sys, ... are mounts: the walk stops there
    unexpected = [p for p in seen["root_tmpfs"] if p not in generated and p not in parents and p not in binds]
    assert unexpected == []


FIND_WORKSPACES = """
import json, os
found = []
# /usr (and /bin, /lib, ... which link into it) is the host's, read-only: not walked; nor are
# the host's alternatives, bound read-only (Debian's nodejs names one "js")
for top in [p for p in os.listdir("/") if p not in ("proc", "sys", "usr") and not os.path.islink("/" + p)]:
    for folder, dirs, files in os.walk("/" + top):
        if folder == "/etc/alternatives":
            continue
        for name in dirs + files:
            if name in MARKERS:
                found.append(os.path.join(folder, name))
sandbox = sorted(os.path.relpath(os.path.join(d, n), "/sandbox") for d, ds, fs in os.walk("/sandbox") for n in ds + fs)
mounts = open("/proc/self/mountinfo").read()
print(json.dumps({"found": found, "sandbox": sandbox, "overlay_lower": [l for l in mounts.splitlines() if "overlay" in l]}))
"""


def _workspace_listing(slug: str) -> list[str]:
    folder = REPO / "langs" / slug
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_python_run_reaches_no_other_workspace(run_py, tmp_path):
    seen = _json(run_py("MARKERS = {'harness.js', 'node_modules', 'lodash', 'package.json', 'js', 'langs'}\n" + FIND_WORKSPACES))
    assert seen["found"] == []
    expected = sorted(set(_workspace_listing("python")) | {"check/solution.py"})
    assert [p for p in seen["sandbox"] if "__pycache__" not in p] == expected
    # the lower layer named by its path below the detached folder, or, where the kernel takes a
    # detached clone as a layer, relative to the zygote's clone of the workspaces folder
    held = native.probe_lower(str(tmp_path))
    assert len(seen["overlay_lower"]) == 1
    assert ("lowerdir=python," if held else "lowerdir=/.kiln/lower/ws/python,") in seen["overlay_lower"][0]


def test_js_run_reaches_no_other_workspace(server):
    source = """
const fs = require('fs'), path = require('path');
const markers = new Set(['harness.py', 'solution.py', 'python', 'langs']);
const found = [];
function walk(dir) {
  let entries;
  try { entries = fs.readdirSync(dir, {withFileTypes: true}); } catch (e) { return; }
  for (const e of entries) {
    const full = path.join(dir, e.name);
    if (markers.has(e.name)) found.push(full);
    if (e.isDirectory() && !e.isSymbolicLink()) walk(full);
  }
}
for (const top of fs.readdirSync('/', {withFileTypes: true}))
  if (!['proc', 'sys', 'usr'].includes(top.name) && !top.isSymbolicLink()) walk('/' + top.name);
console.log(JSON.stringify(found));
"""
    response = server.run(lang_slug="js", solution_text=source, timeout="20s")
    assert response.status_code == 200
    body = response.json()
    assert_exited(body)
    assert json.loads(body["stdout"]) == []
    assert server.client.get("/health").status_code == 200


# --- sizes and inodes ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_server(kiln_server):
    return kiln_server(RUN_LANGS="python", RUN_TMP_SIZE_PYTHON="16m", RUN_TMP_INODES="200", RUN_CONCURRENCY="2", RUN_UID_BASE="22000")


def _run_small(srv, source: str) -> dict:
    response = srv.run(lang_slug="python", solution_text=source, timeout="30s")
    assert response.status_code == 200, response.text
    assert srv.client.get("/health").status_code == 200
    return response.json()


FILL_BYTES = """
import json, os
written, error = 0, None
chunk = b"k" * (1 << 20)
try:
    with open(TARGET, "wb") as f:
        for _ in range(40):
            f.write(chunk)
            f.flush()
            written += len(chunk)
except OSError as e:
    error = e.errno
st = os.statvfs(os.path.dirname(TARGET))
print(json.dumps({"written": written, "error": error, "size": st.f_blocks * st.f_frsize}))
"""


@pytest.mark.parametrize("target", ["/tmp/big", "/sandbox/big", "/sandbox/check/big"])
def test_size_is_capped_at_the_language_tmp_size(small_server, target):
    seen = _json(_run_small(small_server, f"TARGET = {target!r}\n" + FILL_BYTES))
    assert seen["error"] == 28  # ENOSPC
    assert seen["written"] <= 16 * 1024 * 1024
    assert seen["size"] == 16 * 1024 * 1024


FILL_INODES = """
import json, os
made, error = 0, None
try:
    for i in range(1000):
        open(os.path.join(FOLDER, f"f{i}"), "w").close()
        made += 1
except OSError as e:
    error = e.errno
print(json.dumps({"made": made, "error": error, "inodes": os.statvfs(FOLDER).f_files}))
"""


@pytest.mark.parametrize("folder", ["/tmp", "/sandbox", "/sandbox/check"])
def test_inode_count_is_capped(small_server, folder):
    seen = _json(_run_small(small_server, f"FOLDER = {folder!r}\n" + FILL_INODES))
    assert seen["error"] == 28  # ENOSPC
    assert seen["made"] < 200
    assert seen["inodes"] == 200
