"""The two bits of systemd's protocols kiln speaks: sd_notify(3) and socket activation.

No libsystemd: a notification is one datagram on a Unix socket, and an activated socket is
descriptor 3.
"""

from __future__ import annotations

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
