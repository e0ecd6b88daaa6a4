"""No network: a net namespace with only `lo`, down; nothing reachable, no resolver."""

from __future__ import annotations

import json

import pytest

from kilntest import flow_label_claims
from seclib import assert_exited, c_program


def _json(body: dict):
    assert_exited(body)
    return json.loads(body["stdout"])


def test_only_lo_exists_and_it_is_down(run_py):
    body = run_py(
        """
import fcntl, json, socket, struct
SIOCGIFFLAGS, IFF_UP, IFF_RUNNING = 0x8913, 0x1, 0x40
out = {"interfaces": socket.if_nameindex(), "flags": {}}
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    for _, name in out["interfaces"]:
        raw = fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, struct.pack("16sH14x", name.encode(), 0))
        out["flags"][name] = struct.unpack("16sH14x", raw)[1]
out["net_dev"] = [line.split(":")[0].strip() for line in open("/proc/self/net/dev").read().splitlines()[2:]]
out["routes"] = open("/proc/self/net/route").read().splitlines()[1:]
print(json.dumps(out))
"""
    )
    seen = _json(body)
    assert seen["interfaces"] == [[1, "lo"]]
    assert seen["net_dev"] == ["lo"]
    assert seen["flags"]["lo"] & 0x1 == 0  # not IFF_UP
    assert seen["routes"] == []


def test_ip_link_shows_lo_down(run_c):
    """The same through iproute2's view (netlink), when `ip` is installed."""
    body = run_c(
        c_program(
            r"""
    if (access("/usr/sbin/ip", X_OK) != 0 && access("/usr/bin/ip", X_OK) != 0) { say("no ip\n"); return 0; }
    execl("/bin/sh", "sh", "-c", "ip -o link show; ip -o addr show | wc -l", (char *)0);
"""
        )
    )
    assert_exited(body)
    if body["stdout"] == "no ip\n":
        pytest.skip("iproute2 is not installed on this host")
    lines = body["stdout"].splitlines()
    assert len(lines) == 2, body
    assert lines[0].startswith("1: lo: <LOOPBACK>") and "state DOWN" in lines[0], lines[0]
    assert lines[1] == "0"  # no address at all, 127.0.0.1 included


CONNECT = """
import errno, json, socket
def attempt(family, kind, address):
    try:
        with socket.socket(family, kind) as s:
            s.settimeout(3)
            if kind == socket.SOCK_STREAM:
                s.connect(address)
                return "connected"
            s.sendto(b"x", address)
            return "sent"
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
out = {
    "tcp-own-server": attempt(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", PORT)),
    "tcp-localhost-22": attempt(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 22)),
    "tcp-outside-dns": attempt(socket.AF_INET, socket.SOCK_STREAM, ("1.1.1.1", 53)),
    "tcp-outside-https": attempt(socket.AF_INET, socket.SOCK_STREAM, ("8.8.8.8", 443)),
    "udp-outside-dns": attempt(socket.AF_INET, socket.SOCK_DGRAM, ("1.1.1.1", 53)),
    "tcp6-loopback": attempt(socket.AF_INET6, socket.SOCK_STREAM, ("::1", PORT)),
    "tcp6-outside": attempt(socket.AF_INET6, socket.SOCK_STREAM, ("2606:4700:4700::1111", 53)),
    "tcp-metadata": attempt(socket.AF_INET, socket.SOCK_STREAM, ("169.254.169.254", 80)),
}
print(json.dumps(out))
"""


def test_connect_to_the_server_and_outside_fails(run_py, server):
    seen = _json(run_py(f"PORT = {server.port}\n" + CONNECT))
    # Network unreachable at once: there is no route at all (not a refused or timed-out try)
    assert seen == {
        "tcp-own-server": "ENETUNREACH",
        "tcp-localhost-22": "ENETUNREACH",
        "tcp-outside-dns": "ENETUNREACH",
        "tcp-outside-https": "ENETUNREACH",
        "udp-outside-dns": "ENETUNREACH",
        "tcp6-loopback": "EADDRNOTAVAIL",  # no IPv6 address at all, ::1 included
        "tcp6-outside": "EADDRNOTAVAIL",
        "tcp-metadata": "ENETUNREACH",
    }


def test_cannot_bring_lo_up(run_py):
    body = run_py(
        """
import errno, fcntl, socket, struct
SIOCSIFFLAGS = 0x8914
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    try:
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", 0x1))
        print("up")
    except OSError as e:
        print(errno.errorcode[e.errno])
"""
    )
    assert_exited(body)
    assert body["stdout"] == "EPERM\n"


def test_no_name_resolution(run_py):
    body = run_py(
        """
import json, os, socket
out = {"resolv.conf": os.path.lexists("/etc/resolv.conf"), "nsswitch": os.path.lexists("/etc/nsswitch.conf")}
for name in ("example.com", "kiln.invalid"):
    try:
        out[name] = socket.getaddrinfo(name, 80)
    except socket.gaierror as e:
        out[name] = "gaierror"
out["localhost"] = sorted({a[4][0] for a in socket.getaddrinfo("localhost", 80, socket.AF_INET)})
out["hostname"] = socket.gethostname()
print(json.dumps(out))
"""
    )
    seen = _json(body)
    assert seen == {
        "resolv.conf": False,
        "nsswitch": False,
        "example.com": "gaierror",
        "kiln.invalid": "gaierror",
        "localhost": ["127.0.0.1"],  # from the generated /etc/hosts, no DNS
        "hostname": "kiln",
    }


def test_abstract_unix_sockets_of_the_host_are_unreachable(run_py):
    """Abstract AF_UNIX names live in the net namespace: the host's (systemd's, dbus', ...)
    are not there. Probed with a name the test binds on the host itself."""
    import socket
    import uuid

    name = f"\0kiln-security-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as host_side:
        host_side.bind(name)
        host_side.listen()
        body = run_py(
            f"""
import errno, socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect({name!r})
    print("connected")
except OSError as e:
    print(errno.errorcode[e.errno])
"""
        )
    assert_exited(body)
    assert body["stdout"] == "ECONNREFUSED\n"


def test_no_vsock_sockets(run_py):
    """AF_VSOCK is not isolated by the network namespace: on a VM with a virtio-vsock device
    (this one has /dev/vsock), a vsock socket created in a run can address the hypervisor side
    (CID 2), whatever the run's net namespace. The test does not connect anywhere (the host's
    vsock peers are not ours to poke); it requires that the socket cannot be created at all."""
    body = run_py(
        """
import errno, socket
AF_VSOCK = 40
for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
    try:
        socket.socket(AF_VSOCK, kind).close()
        print("created")
    except OSError as e:
        print(errno.errorcode[e.errno])
"""
    )
    assert_exited(body)
    assert "created" not in body["stdout"].split(), body["stdout"]


def test_what_a_run_leaves_in_its_network_namespace_no_later_run_sees(start_server):
    """A slot's network namespace is its own: IPv6 flow labels outlive the socket that made them
    (up to their linger time, in the namespace), so a namespace a slot index kept from one slot
    to the next carried them from one run to the next, a channel between runs."""
    srv = start_server(RUN_CONCURRENCY="1")  # every run in the same slot index
    first, second = (srv.run(solution_text=flow_label_claims(labels=8, rounds=2), timeout="10s").json() for _ in range(2))
    assert first["stdout"] == " ".join(["new"] * 8) + "|" + " ".join(["taken"] * 8) + "\n", first  # they linger within a namespace
    assert second["stdout"] == first["stdout"], second
