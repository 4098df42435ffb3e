"""The client's requests: acquire, release, renew and the questions
(queue, keys, status, handoff), each a round trip of Client."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

from . import _wire as w
from ._auth import NoAnswer
from ._conn import _Attempt, _Call, _Conn, _Deadline, _WaitElapsed
from ._errors import Closed, Error, Timeout
from ._rules import (
    lock_exit_raises,
    STATUS_LINE,
    Acquire,
    Release,
    handoff_answer,
    handoff_line,
    keys_answer,
    keys_line,
    queue_answer,
    queue_line,
    release_line,
    renew_answer,
    renew_late,
    renew_line,
    status_answer,
)

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
        except Error as e:
            if lock_exit_raises(e, exc_type is not None):
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
        rq = Acquire(keys, lease, wait, limit, first_lease, shared, value, lambda: self._acquire_id(name))

        def line(cn: _Conn, cl: _Call) -> Optional[bytes]:
            cl.acq_id = rq.id
            cl.more = rq.more
            if not cn.no_refs:
                cn.ref_seq += 1
                cl.ref = w.base36(cn.ref_seq % (36**16))
            wait_word = rq.wait_word()
            if wait_word is None:
                return None
            return rq.line(wait_word, cl.ref)

        def withdraw(cl: _Call) -> None:
            if rq.may_withdraw(cl):
                self._settle_locked(cl.conn, _Call("X", rq.key, silent=True), rq.withdraw_line())  # type: ignore[arg-type]

        try:
            a, cn = self._round_trip("A", rq.key, line, deadline=rq.deadline(self._ft), cancel=cancel, on_abandon=withdraw, patient=wait is not None, wait_left=rq.wait_left if wait else None)
        except _WaitElapsed as e:
            if isinstance(e.last, NoAnswer):
                with self._mu:
                    raise self._unavailable_locked(e.last) from None
            raise rq.timeout() from None
        except _Deadline:
            raise rq.timeout() from None
        return rq.grant(a, cn), rq.lease_s, rq.limit, rq.id

    def release(self, key: str, token: int) -> None:
        """Gives the lock back, so the next waiter is granted at once. The
        release is re-sent every 200 ms (release_every) on any live
        connection until a node answers or 5 s (release_for) have passed.
        Raises NotHeld when the token does not hold the key."""
        token, line = release_line(key, token)
        kick = threading.Event()
        rl = Release(key, token, self._release_every, self._release_for, time.monotonic(), _Attempt())

        def send() -> bool:
            with self._mu:
                cn = rl.choose(self._choose_locked, self._ever_up)
                if cn is None:
                    return False
                cl = _Call("R", key, kick=kick)
                self._queue_locked(cn, cl, line)
                rl.sent(cl)
                return True

        send()
        while True:
            now = time.monotonic()
            if now >= rl.next_send:
                if rl.over(now):
                    with self._mu:
                        rl.give_up()
                        err = self._unavailable_locked(rl.last)
                    raise rl.unavailable(err)
                rl.pace(now)
                send()
            t = max(0.0, rl.next_send - time.monotonic())
            calls = rl.calls
            if rl.waiting:
                t = min(t, 0.02)
                with self._mu:
                    if self._closed:
                        raise Closed("the lockd client is closed")
            if len(calls) == 1 and not rl.waiting:
                # The usual case, one send out: wait on its own lock, which
                # costs less than the shared event.
                if calls[0].done.acquire(timeout=t):
                    kick.clear()
            elif kick.wait(t):
                kick.clear()
            elif rl.waiting:
                send()
                continue
            done = self._collect_release(rl, send)
            if done is not None:
                with self._mu:
                    rl.give_up()
                if done is True:
                    return
                raise done

    def renew(self, key: str, token: int, lease: w.Seconds) -> None:
        """Restarts the lease of a held lock from now. Raises NotHeld when
        the token no longer holds the key."""
        self._renew(key, token, lease, None)

    def _renew(self, key: str, token: int, lease: w.Seconds, deadline: Optional[float], value: str = "") -> None:
        token, b = renew_line(key, token, lease, value)
        try:
            a, cn = self._round_trip("N", key, lambda cn, cl: b, deadline=deadline)
        except _Deadline:
            raise renew_late(key, token) from None
        renew_answer(a, cn, key, token)

    def queue(self, key: str) -> w.Queue:
        """The holders of key and its waiters, in queue order."""
        b = queue_line(key)
        a, cn = self._round_trip("Q", key, lambda cn, cl: b)
        return queue_answer(a, cn, key)

    def keys(self, pattern: str = "*") -> Tuple[List[str], int]:
        """The keys held or waited on that pattern selects ('*' all, 'pre*'
        a prefix, else that key), sorted, at most 1000; and how many match."""
        b = keys_line(pattern)
        a, cn = self._round_trip("K", pattern, lambda cn, cl: b)
        return keys_answer(a, cn, pattern)

    def status(self) -> w.Status:
        """How the node this client talks to (the active when known) sees
        itself and the cluster: its S answer as a lockd.Status, a dict of
        typed values: self, role, active ("" when none), replication and
        durability str; token, seq, keys, waiters int; uptime float
        seconds; sticky, degraded bool; peers a list of lockd.Peer (addr,
        role, up, seq, lag, token). A field this client does not know
        stays the text it was sent as."""
        a, cn = self._round_trip("S", "-", lambda cn, cl: STATUS_LINE)
        return status_answer(a, cn)

    def handoff(self, to: str = "") -> str:
        """Asks the active node to hand its role over (to its successor, or
        to the node at to); returns the new active's address. Needs the
        admin role. Not re-sent after a drop: it may have happened."""
        b = handoff_line(to)
        a, cn = self._round_trip("H", "-", lambda cn, cl: b, resend=False)
        addr = handoff_answer(a, cn)
        with self._mu:
            self._active = addr
        return addr
