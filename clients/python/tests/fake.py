"""A scripted lockd node for the unit tests: it answers S itself and hands
every other line to a handler, recording what the client sent."""

from __future__ import annotations

import socket
import threading
from typing import Callable, List, Optional, Tuple


class FakeNode:
    def __init__(self, handler: Callable[["Conn", str], Optional[List[str]]], port: int = 0) -> None:
        self.handler = handler
        self.lines: List[Tuple[int, str]] = []
        self.conns: List["Conn"] = []
        self.mu = threading.Lock()
        self.changed = threading.Condition(self.mu)
        self.answer_status = True
        self.status_words = "role=active"  # the S answer after self=
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(16)
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            with self.mu:
                if self.closed:
                    # Accepted while close ran, after it listed the
                    # connections to close: a stopped node keeps none.
                    s.close()
                    return
                c = Conn(self, s, len(self.conns))
                self.conns.append(c)
                self.changed.notify_all()
            threading.Thread(target=c.serve, daemon=True).start()

    def wait_for(self, pred: Callable[[], bool], timeout: float = 5.0) -> bool:
        with self.mu:
            return self.changed.wait_for(pred, timeout)

    def sent(self, prefix: str) -> List[str]:
        with self.mu:
            return [l for _, l in self.lines if l.startswith(prefix)]

    def close(self) -> None:
        with self.mu:
            self.closed = True
            conns = list(self.conns)
        try:
            # Wakes the accept: closing alone leaves it listening.
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        for c in conns:
            c.close()


class Conn:
    def __init__(self, node: FakeNode, s: socket.socket, n: int) -> None:
        self.node = node
        self.s = s
        self.n = n
        self.wmu = threading.Lock()

    def send(self, line: str) -> None:
        with self.wmu:
            try:
                self.s.sendall((line + "\n").encode())
            except OSError:
                pass

    def close(self) -> None:
        try:
            self.s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.s.close()

    def serve(self) -> None:
        f = self.s.makefile("rb")
        try:
            for raw in f:
                line = raw.decode().rstrip("\n")
                node = self.node
                with node.mu:
                    node.lines.append((self.n, line))
                    node.changed.notify_all()
                if line.startswith("S "):
                    if node.answer_status:
                        self.send("S " + line.split()[1] + " self=" + node.addr + " " + node.status_words)
                    continue
                out = node.handler(self, line)
                for o in out or []:
                    self.send(o)
        except (OSError, ValueError):
            pass
