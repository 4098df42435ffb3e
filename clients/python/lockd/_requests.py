"""The client's requests: acquire, release, renew and the questions
(queue, keys, status, handoff), each a round trip of Client."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

from . import _wire as w
from ._auth import NoAnswer
from ._conn import ACQUIRE_GRACE, _Attempt, _Call, _Conn, _Deadline, _Dropped, _WaitElapsed, _bad_answer, _lease_seconds, _not_held, _server_error, _timeout, _token
from ._errors import Closed, Error, NotHeld, Timeout, Unavailable

if TYPE_CHECKING:
    from ._client import Client

class Lock:
    """A granted lock, or one place of a semaphore. token is its fencing
    token: hand it to the protected resource, which refuses tokens smaller
    than the largest it has seen. shared says it is held as a reader;
    place is the semaphore place (1 to limit) the node granted, None when
    it named none."""

    def __init__(
        self, client: "Client", key: str, token: int, lease: float, limit: int, id_: str, place: Optional[int] = None, shared: bool = False
    ) -> None:
        self.client: Client = client
        self.key: str = key
        self.token: int = token
        self.lease: float = lease
        self.limit: int = limit
        self.id: str = id_
        self.place: Optional[int] = place
        self.shared: bool = shared

    def release(self) -> None:
        """Gives the lock back; the next waiter is granted at once."""
        self.client.release(self.key, self.token)

    def renew(self, lease: Optional[w.Seconds] = None) -> None:
        """Restarts the lease from now (the lease it was acquired with by default)."""
        self.client.renew(self.key, self.token, self.lease if lease is None else lease)

    def __enter__(self) -> "Lock":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self.release()
        except NotHeld:
            pass
        except Error:
            # Unreachable nodes: the lease frees the lock. An exception
            # already on its way out is the one the caller needs to see.
            if exc_type is None:
                raise

    def __repr__(self) -> str:
        return f"<lockd.Lock key={self.key!r} token={self.token}>"


class TryLock:
    """What try_acquire returns: the Lock when the key was free, or word
    that it was busy. True when acquired. As a context manager it gives
    the Lock, or None when the key was busy, and releases the lock at the
    end of the block:

        with client.try_acquire("report", lease=30) as lock:
            if lock is None:
                print("busy")           # nothing was queued
            else:
                write(fence=lock.token)

    token, release() and renew() reach the lock, and raise Timeout when
    there is none."""

    def __init__(self, key: str, lock: Optional[Lock]) -> None:
        self.key: str = key
        self.lock: Optional[Lock] = lock

    @property
    def acquired(self) -> bool:
        """Whether the key was free and is now held."""
        return self.lock is not None

    def __bool__(self) -> bool:
        return self.lock is not None

    def _held(self) -> Lock:
        if self.lock is None:
            raise Timeout(f"try_acquire {self.key}: the key was busy and nothing is held; test the result (if lock:, or lock.acquired) before using it")
        return self.lock

    @property
    def token(self) -> int:
        """The lock's fencing token."""
        return self._held().token

    def release(self) -> None:
        """Gives the lock back (Lock.release)."""
        self._held().release()

    def renew(self, lease: Optional[w.Seconds] = None) -> None:
        """Restarts the lease from now (Lock.renew)."""
        self._held().renew(lease)

    def __enter__(self) -> Optional[Lock]:
        return self.lock

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.lock is not None:
            self.lock.__exit__(exc_type, exc, tb)

    def __repr__(self) -> str:
        if self.lock is None:
            return f"<lockd.TryLock key={self.key!r} busy>"
        return f"<lockd.TryLock key={self.key!r} token={self.lock.token}>"


class _Requests:
    """The requests of Client."""

    # ------------------------------------------------------------ requests

    def acquire(
        self,
        key: str,
        lease: w.Seconds,
        wait: Optional[w.Seconds] = None,
        limit: Optional[int] = None,
        cancel: Optional[threading.Event] = None,
        *,
        shared: bool = False,
    ) -> Lock:
        """Waits for key and returns the Lock with its fencing token. The
        node keeps it for lease seconds unless renewed or released. wait
        bounds the wait (None or 0: forever), counted from the first send,
        also when the request moves to another connection. limit=N takes one
        of N places of a semaphore. shared=True takes key as a reader: any
        number of readers hold it at once, never beside a writer (an
        acquire without it). Raises Timeout, LimitMismatch, Refused,
        Unavailable, Cancelled (cancel, a threading.Event, was set) or Closed."""
        return self._acquire(key, lease, w.seconds(wait, "wait") or 0.0, limit, cancel, None, shared=shared)

    def try_acquire(self, key: str, lease: w.Seconds, limit: Optional[int] = None, *, shared: bool = False) -> TryLock:
        """Takes key if nobody holds it (shared=True: if no writer holds it
        or waits), without queueing: a TryLock, true and holding the Lock
        when the key was free, false when others hold it. with
        client.try_acquire(...) as lock gives the Lock or None."""
        try:
            return TryLock(key, self._acquire(key, lease, None, limit, None, None, shared=shared))
        except Timeout:
            return TryLock(key, None)

    def _acquire(
        self,
        key: str,
        lease: w.Seconds,
        wait: Optional[float],
        limit: Optional[int],
        cancel: Optional[threading.Event],
        name: Optional[str],
        first_lease: Optional[float] = None,
        shared: bool = False,
        value: str = "",
    ) -> Lock:
        g, lease_s, lim, id_ = self._grant([key], lease, wait, limit, cancel, name, first_lease, shared, value)
        return Lock(self, key, g.tokens[0], lease_s, lim, id_, g.place, shared)

    def _grant(
        self,
        keys: List[str],
        lease: w.Seconds,
        wait: Optional[float],
        limit: Optional[int],
        cancel: Optional[threading.Event],
        name: Optional[str],
        first_lease: Optional[float],
        shared: bool,
        value: str,
    ) -> Tuple[w.Grant, float, int, str]:
        """Acquires keys (one, or a set: all or none) and returns the grant,
        the lease in seconds, the limit and the acquire's id. value is
        encoded already."""
        key, more = keys[0], keys[1:]
        w.check_key("acquire", key)
        lease_s = self._lease(lease, "acquire", key)
        if first_lease is not None:
            lease_s = first_lease
        if wait is not None and (wait < 0 or wait > w.MAX_SECONDS):
            raise ValueError(f"acquire {key}: wait {wait:g}s is out of range; pass 0 or None to wait forever, or up to {w.MAX_SECONDS} seconds")
        limit = w.check_limit("acquire", key, limit, shared)
        lease_ms = max(1, w.millis(lease_s, False))
        id_ = self._acquire_id(name)
        w.check_acquire_line(keys, lease_ms, wait, limit, id_, shared, value)
        start: List[float] = []

        def line(cn: _Conn, cl: _Call) -> Optional[bytes]:
            cl.acq_id = id_
            cl.more = tuple(more)
            if not cn.no_refs:
                cn.ref_seq += 1
                cl.ref = w.base36(cn.ref_seq % (36**16))
            wait_ms: Optional[int] = 0
            if wait is None:
                wait_ms = None
            elif wait > 0:
                now = time.monotonic()
                if not start:
                    start.append(now)
                wait_ms = w.millis(wait - (now - start[0]), True)
                if wait_ms <= 0:
                    return None
            return w.acquire_line(key, lease_ms, wait_ms, limit, id_, cl.ref, more, shared, value)

        def withdraw(cl: _Call) -> None:
            cn = cl.conn
            if cn is not None and cn.sock is not None and cn.gen == cl.gen and not cn.no_refs and wait is not None:
                self._settle_locked(cn, _Call("X", key, silent=True), f"X {key} {id_}\n".encode())

        deadline = None
        if wait:
            deadline = time.monotonic() + wait + ACQUIRE_GRACE + self._ft + wait / 10
        try:
            a, cn = self._round_trip("A", key, line, deadline=deadline, cancel=cancel, on_abandon=withdraw, patient=wait == 0.0)
        except _WaitElapsed as e:
            if isinstance(e.last, NoAnswer):
                with self._mu:
                    raise self._unavailable_locked(e.last) from None
            raise _timeout(key, wait) from None
        except _Deadline:
            raise _timeout(key, wait) from None
        if a.kind == "A":
            g = w.parse_grant(a.fields, len(keys))
            if g is not None:
                return g, lease_s, limit, id_
        if a.kind == "T":
            raise _timeout(key, wait)
        raise _bad_answer("acquire", key, cn, a)

    @staticmethod
    def _lease(lease: w.Seconds, op: str, key: str) -> float:
        return _lease_seconds(lease, op, key)

    def release(self, key: str, token: int) -> None:
        """Gives the lock back, so the next waiter is granted at once. The
        release is re-sent every 200 ms (release_every) on any live
        connection until a node answers or 5 s (release_for) have passed.
        Raises NotHeld when the token does not hold the key."""
        w.check_key("release", key)
        token = _token(token)
        kick = threading.Event()
        line = f"R {key} {token}\n".encode()
        at = _Attempt()
        calls: List[_Call] = []
        sends = 0
        last: Optional[BaseException] = None
        start = time.monotonic()
        next_send = start + self._release_every
        waiting = False

        def send() -> bool:
            nonlocal sends, last, waiting, next_send
            with self._mu:
                try:
                    cn = self._choose_locked(at)
                except Closed:
                    raise
                except Error as e:
                    if not self._ever_up:
                        raise
                    last = e
                    return False
                if cn is None:
                    waiting = True
                    return False
                waiting = False
                cl = _Call("R", key, kick=kick)
                self._queue_locked(cn, cl, line)
                calls.append(cl)
                if sends == 0:
                    # The re-sends are paced from the first send, not from
                    # the wait for a connection before it.
                    next_send = time.monotonic() + self._release_every
                sends += 1
                return True

        def soon() -> None:
            # A node named a silent one as active: send again shortly, to
            # the node if it is back (_stale_locked dialled it) or to
            # whoever took over, rather than at the next release_every.
            nonlocal next_send
            next_send = min(next_send, time.monotonic() + 0.025)

        send()
        while True:
            now = time.monotonic()
            if now >= next_send:
                if now - start >= self._release_for:
                    with self._mu:
                        for cl in calls:
                            if cl.state == 0:
                                cl.state = 2
                        err = self._unavailable_locked(last)
                    if sends == 0:
                        raise Unavailable(f"release {key} token {token}: could not be sent within {self._release_for:g}s: {err}; the lock frees itself when its lease ends")
                    raise Unavailable(f"release {key} token {token}: no node answered within {self._release_for:g}s (sent {sends} times): {err}; the lock frees itself when its lease ends")
                next_send = now + min(self._release_every, self._release_for - (now - start))
                at = _Attempt()
                at.target = ""
                send()
            t = max(0.0, next_send - time.monotonic())
            if waiting:
                t = min(t, 0.02)
                with self._mu:
                    if self._closed:
                        raise Closed("the lockd client is closed")
            if len(calls) == 1 and not waiting:
                # The usual case, one send out: wait on its own lock, which
                # costs less than the shared event.
                if calls[0].done.acquire(timeout=t):
                    kick.clear()
            elif kick.wait(t):
                kick.clear()
            elif waiting:
                send()
                continue
            done = self._collect_release(key, token, calls, at, send, soon)
            if done is not None:
                with self._mu:
                    for cl in calls:
                        if cl.state == 0:
                            cl.state = 2
                if done is True:
                    return
                raise done

    def renew(self, key: str, token: int, lease: w.Seconds) -> None:
        """Restarts the lease of a held lock from now. Raises NotHeld when
        the token no longer holds the key."""
        self._renew(key, token, lease, None)

    def _renew(self, key: str, token: int, lease: w.Seconds, deadline: Optional[float], value: str = "") -> None:
        w.check_key("renew", key)
        token = _token(token)
        lease_ms = max(1, w.millis(self._lease(lease, "renew", key), False))
        b = f"N {key} {token} {w.format_ms(lease_ms)}{' value=' + value if value else ''}\n".encode()
        w.check_line("renew", key, b)
        try:
            a, cn = self._round_trip("N", key, lambda cn, cl: b, deadline=deadline)
        except _Deadline:
            raise Unavailable(f"renew {key} token {token}: no node answered in time") from None
        if a.kind == "N" and len(a.fields) == 1:
            if a.fields[0] == "ok":
                return
            if a.fields[0] == "notheld":
                raise _not_held("renew", key, token)
        raise _bad_answer("renew", key, cn, a)

    def queue(self, key: str) -> w.Queue:
        """The holders of key and its waiters, in queue order."""
        w.check_key("queue", key)
        b = f"Q {key}\n".encode()
        a, cn = self._round_trip("Q", key, lambda cn, cl: b)
        try:
            return w.parse_queue(key, a.fields)
        except w.BadLine as e:
            raise Error(f"queue {key}: {cn.addr} answered {e}; check that client and server versions match") from None

    def keys(self, pattern: str = "*") -> Tuple[List[str], int]:
        """The keys held or waited on that pattern selects ('*' all, 'pre*'
        a prefix, else that key), sorted, at most 1000; and how many match."""
        w.check_key("keys", pattern)
        b = f"K {pattern}\n".encode()
        a, cn = self._round_trip("K", pattern, lambda cn, cl: b)
        if a.fields:
            try:
                total = int(a.fields[0])
                return a.fields[1:], total
            except ValueError:
                pass
        raise _bad_answer("keys", pattern, cn, a)

    def status(self) -> w.Status:
        """How the node this client talks to (the active when known) sees
        itself and the cluster: its S answer as a lockd.Status, a dict of
        typed values: self, role, active ("" when none), replication and
        durability str; token, seq, keys, waiters int; uptime float
        seconds; sticky, degraded bool; peers a list of lockd.Peer (addr,
        role, up, seq, lag, token). A field this client does not know
        stays the text it was sent as."""
        a, cn = self._round_trip("S", "-", lambda cn, cl: b"S -\n")
        try:
            return w.parse_status(a.fields)
        except w.BadLine as e:
            raise Error(f"status: {cn.addr} answered {e}; check that client and server versions match") from None

    def handoff(self, to: str = "") -> str:
        """Asks the active node to hand its role over (to its successor, or
        to the node at to); returns the new active's address. Needs the
        admin role. Not re-sent after a drop: it may have happened."""
        b = (f"H - {to}\n" if to else "H -\n").encode()
        a, cn = self._round_trip("H", "-", lambda cn, cl: b, resend=False)
        if len(a.fields) == 2 and a.fields[0] == "ok":
            with self._mu:
                self._active = a.fields[1]
            return a.fields[1]
        raise _bad_answer("handoff", "", cn, a)
