"""The bits of systemd kiln uses: sd_notify(3), socket activation, and a transient scope.

No libsystemd: a notification is one datagram on a Unix socket, an activated socket is
descriptor 3, and a scope is asked for with systemd-run.
"""

from __future__ import annotations

import os
import socket

LISTEN_FDS_START = 3


def notify(notify_socket: str | None, *lines: str) -> bool:
    """Send "READY=1", "WATCHDOG=1", "STOPPING=1", "STATUS=..." to the service manager.
    A no-op outside systemd; never raises (a notification is best effort)."""
    if not notify_socket:
        return False
    address = "\0" + notify_socket[1:] if notify_socket.startswith("@") else notify_socket
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto("\n".join(lines).encode(), address)
        return True
    except OSError:
        return False


def activated_listener() -> socket.socket:
    """The listening socket systemd passed (kiln.socket); refuses anything else."""
    listener = socket.socket(fileno=LISTEN_FDS_START)
    listener.set_inheritable(False)
    if listener.type != socket.SOCK_STREAM or listener.family not in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX):
        raise OSError(f"descriptor {LISTEN_FDS_START} from systemd is not a stream socket")
    if not listener.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        raise OSError(f"descriptor {LISTEN_FDS_START} from systemd is not listening")
    return listener


def booted() -> bool:
    """Whether systemd is this host's init (sd_booted(3))."""
    return os.path.isdir("/run/systemd/system")


def user_manager_reachable(environ: dict[str, str]) -> bool:
    """Whether this user's own service manager (systemd --user) answers on its bus."""
    runtime_dir = environ.get("XDG_RUNTIME_DIR")
    return bool(runtime_dir) and os.path.exists(os.path.join(runtime_dir, "bus"))


def scope_command(unit: str, argv: list[str], user: bool) -> list[str]:
    """`argv` run as the one process of a transient scope `<unit>.scope` whose cgroup is
    delegated to it; systemd-run registers the scope and then execs argv (the pid stays)."""
    manager = ["--user"] if user else []
    return ["systemd-run", *manager, "--scope", "--quiet", "--collect", f"--unit={unit}", "--property=Delegate=yes", "--", *argv]
