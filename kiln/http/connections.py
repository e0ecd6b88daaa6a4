"""The front's open connections: at most RUN_CONNECTIONS_MAX, shared by peer address.

One address may hold every connection while no other wants one. At the cap, a connection from an
address holding fewer than the address holding the most, less one (else the two would only trade
places), is admitted in place of one of that address's idle connections (waiting for a request's
first byte), which is closed as an idle one past RUN_IDLE_TIMEOUT is: HTTP lets a server close an
idle connection at any time. Otherwise it is refused (503 "too many connections"). Connections
busy with a request are never closed for another: their reading is bounded by RUN_READ_TIMEOUT
and their runs by the queue's shares. Behind a balancer every connection is the balancer's
(one address), whose own maxconn per host (deploy/haproxy.cfg) keeps them below the cap.
"""

from __future__ import annotations

import socket
from typing import Protocol


class Connection(Protocol):
    peer: str  # the client's address ("" for a Unix socket's)
    idle: bool  # waiting for a request's first byte
    socket: socket.socket


class Connections:
    def __init__(self, cap: int):
        self.cap = cap
        self.count = 0
        self.of: dict[str, set[Connection]] = {}  # by peer address

    def admit(self, connection: Connection) -> bool:
        """The new connection counted; False (refused) at the cap unless its address may take
        an idle one's place."""
        if self.count >= self.cap and not self._make_room_for(connection.peer):
            return False
        self.count += 1
        self.of.setdefault(connection.peer, set()).add(connection)
        return True

    def leave(self, connection: Connection) -> None:
        held = self.of.get(connection.peer)
        if held is None or connection not in held:
            return  # closed for another address's connection: counted out then
        held.remove(connection)
        if not held:
            del self.of[connection.peer]
        self.count -= 1

    def _make_room_for(self, peer: str) -> bool:
        heaviest = max(self.of.values(), key=len)
        if len(heaviest) < len(self.of.get(peer, ())) + 2:
            return False
        idle = next((connection for connection in heaviest if connection.idle), None)
        if idle is None:
            return False
        self.leave(idle)
        try:
            idle.socket.shutdown(socket.SHUT_RDWR)  # its handler reads end-of-file and ends quietly
        except OSError:
            pass
        return True
