"""A lock that renews itself and signals its loss, and an election on top."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

from . import _wire as w
from ._conn import _hold_terms
from ._errors import Closed, Error, LockLost, LostReason, NotHeld, Refused, Unavailable
from ._holding import _HoldRules, renew_retry
from ._rules import hold_exit_raises

if TYPE_CHECKING:
    from ._client import Client, Lock, Watch


class Hold(_HoldRules):
    """A lock held for a block of code, renewed in the background every
    third of its lease.

    lost is a threading.Event, set the moment the lock can no longer be
    proven held: when the lease that the last acknowledged renewal started
    (counted from the moment that renewal was sent) ends, when lockd says
    the token no longer holds the key, when max_hold is reached, when it is
    released, or when the client is closed. reason says which: 'expired',
    'notheld', 'max', 'released' or 'closed'. The body stops when lost is
    set (check() raises LockLost); the fencing token stops a process that
    was itself frozen past its lease from doing harm."""

    reason: Optional[LostReason]
    error: Optional[LockLost]

    def __init__(self, client: "Client", lock: "Lock", lease: float, cap_at: Optional[float]) -> None:
        super().__init__(lock, lease, cap_at)
        self.client: Client = client
        self.lost: threading.Event = threading.Event()
        # Called once the hold ends, from the thread that ends it (a set's).
        self._on_end: Optional[Callable[["Hold"], None]] = None
        self._mu = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @classmethod
    def _start(
        cls,
        client: "Client",
        key: str,
        lease: w.Seconds,
        wait: Optional[w.Seconds],
        limit: Optional[int],
        cancel: Optional[threading.Event],
        max_hold: Optional[w.Seconds],
        name: Optional[str],
        shared: bool = False,
        value: str = "",
    ) -> "Hold":
        lease_s, cap, first = cls._terms(client, key, lease, max_hold)
        asked = time.monotonic()  # the lease cannot have started before
        lock = client._acquire(key, lease_s, w.seconds(wait, "wait") or 0.0, limit, cancel, name, first_lease=first, shared=shared, value=value)
        return cls._begin(client, [lock], lease_s, cap, first, asked)[0]

    @staticmethod
    def _terms(client: "Client", key: str, lease: w.Seconds, max_hold: Optional[w.Seconds]) -> Tuple[float, Optional[float], float]:
        """A hold's lease and max_hold in seconds, checked, and its first lease."""
        return _hold_terms(key, lease, max_hold, client.min_hold_lease, client._ft)

    @classmethod
    def _begin(cls, client: "Client", locks: List["Lock"], lease_s: float, cap: Optional[float], first: float, asked: float) -> List["Hold"]:
        """Holds for locks granted together (one, or a set's), renewing in
        the background. Without them for the caller (an error, an
        interrupt), every lock goes back rather than stay held for its
        lease; after an interrupt the process may be on its way out, so it
        is released now."""
        holds: List[Hold] = []
        try:
            got = time.monotonic()
            starts: List[float] = []
            for lock in locks:
                h = cls(client, lock, lease_s, None if cap is None else asked + cap)
                holds.append(h)
                start = asked
                if time.monotonic() - asked > lease_s / 3:
                    # The grant may be as old as the request: confirm it with a
                    # renewal so that a fresh hold has most of a lease ahead.
                    start = h._confirm(first, got)
                starts.append(start)
            with client._mu:
                if client._closed:
                    raise Closed("the lockd client is closed")
                client._holds.update(holds)
            for h, start in zip(holds, starts):
                h._extend(start + first)
                h._thread = threading.Thread(target=h._renew_loop, args=(start,), name="lockd-hold", daemon=True)
                h._thread.start()
            return holds
        except BaseException as e:
            with client._mu:
                client._holds.difference_update(holds)
            for lock in locks:
                if isinstance(e, Exception):
                    threading.Thread(target=client._release_quietly, args=(lock.key, lock.token), daemon=True).start()
                else:
                    client._release_quietly(lock.key, lock.token)
            raise

    def _confirm(self, lease: float, got: float) -> float:
        end = got + lease
        while True:
            sent = time.monotonic()
            if sent >= end:
                raise self._unconfirmed()
            try:
                self.client._renew(self.key, self.token, lease, end)
                return sent
            except NotHeld as e:
                raise self._not_held(e) from None
            except (Unavailable, Refused):
                time.sleep(renew_retry(lease))

    def _extend(self, end: float) -> None:
        with self._mu:
            self._expires = end

    def _expire(self) -> None:
        with self._mu:
            if time.monotonic() < self._expires:
                return
        err = self._expiry(time.monotonic())
        self._end(err.reason or "expired", err)

    def _end(self, reason: LostReason, err: LockLost) -> None:
        with self._mu:
            if self.lost.is_set():
                return
            self.reason = reason
            self.error = err
            self.lost.set()
        self._stop.set()
        with self.client._mu:
            self.client._holds.discard(self)
        if self._on_end is not None:
            self._on_end(self)

    def _renew_loop(self, start: float) -> None:
        """Renews every third of the lease, retries a failed renewal soon,
        and ends the hold the moment the lease the last acknowledged
        renewal started is over. A renewal in flight is given up at that
        moment too (its deadline), so nothing delays the signal."""
        every, retry = self.lease / 3, renew_retry(self.lease)
        nxt = start + every
        while True:
            with self._mu:
                end = self._expires
            now = time.monotonic()
            if self._stop.wait(max(0.0, min(nxt, end) - now)):
                return
            now = time.monotonic()
            if now >= end:
                self._expire()
                return
            if now < nxt:
                continue
            lease = self._next_lease(now)
            if lease is None:
                nxt = float("inf")  # no more renewals: the lease runs out at max_hold
                continue
            try:
                self.client._renew(self.key, self.token, lease, end)
            except Error as e:
                lost = self._renew_loss(e)
                if lost is None:
                    nxt = time.monotonic() + retry
                    continue
                self._end(lost.reason or "notheld", lost)
                return
            self._extend(now + lease)
            nxt = now + every

    @property
    def expires(self) -> float:
        """When the lease the last acknowledged renewal started ends, on
        time.monotonic()'s clock."""
        with self._mu:
            return self._expires

    def check(self) -> None:
        """Raises LockLost when the lock is lost or no longer provably held:
        call it between steps of the critical section. It reads the clock
        itself: once the lease the last acknowledged renewal started is
        over, it raises, even if the renewing thread has not run since
        (a busy or starved process), and sets lost."""
        if not self.lost.is_set():
            with self._mu:
                over = time.monotonic() >= self._expires
            if over:
                self._expire()
        if self.lost.is_set():
            assert self.error is not None
            raise self.error

    def release(self) -> None:
        """Stops renewing and gives the lock back. Raises NotHeld when the
        node says the token no longer held the key, and Unavailable when no
        node answered, but only while the hold counted as held: after a
        loss (lost is set, reason says why) it raises nothing, so that a
        finally block releasing it does not hide what ended the body. It
        still sends the release then, which hands on sooner a lock whose
        renewals only failed to reach a node."""
        with self._mu:
            if self._released:
                return
            self._released = True
        if not self.lost.is_set() and time.monotonic() >= self.expires:
            self._expire()
        was_lost = self.lost.is_set()
        self._end("released", self._released_loss())
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(2)
        if was_lost:
            if self._quiet_release_due():
                self.client._release_quietly(self.key, self.token)
            return
        self.client.release(self.key, self.token)

    def __enter__(self) -> "Hold":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        was_lost = self.lost.is_set()
        try:
            self.release()
        except Error as e:
            if hold_exit_raises(e, exc_type is not None, was_lost):
                raise

    def __repr__(self) -> str:
        return f"<lockd.Hold key={self.key!r} token={self.token} lost={self.lost.is_set()}>"


class Election:
    """Leader election on one key. The leader holds the key, renewing it;
    its value, 1 to 1024 bytes of UTF-8 text (spaces included), travels
    with its hold, so everyone who looks at the key sees it, and the
    leader can change it without giving the key up (proclaim)."""

    def __init__(self, client: "Client", key: str) -> None:
        self.client: Client = client
        self.key: str = key
        self._hold: Optional[Hold] = None

    def _check_value(self, op: str, value: str) -> str:
        """value encoded for the wire, or ValueError saying why it cannot be one."""
        return w.encode_value(f"{op} {self.key}", value)

    @staticmethod
    def _old_server(e: Refused, value: str) -> bool:
        """Whether e is a node refusing value=, as one older than values
        does, and value can go in the acquire's id instead, as such a node
        shows a leader's value."""
        b = value.encode("utf-8")
        fits = len(b) <= w.MAX_NAME_LEN and "#" not in value and not any(c <= 0x20 or c == 0x7F for c in b)
        return fits and '"value=' in e.words

    def campaign(self, value: str, lease: w.Seconds = 10.0, cancel: Optional[threading.Event] = None) -> Hold:
        """Waits until this client leads with value (1 to 1024 bytes of
        UTF-8), then returns the leader's Hold (renewed in the background;
        its lost event says leadership ended)."""
        enc = self._check_value("campaign", value)
        c = self.client
        h: Optional[Hold] = None
        if not c._values_refused:
            try:
                h = Hold._start(c, self.key, lease, None, None, cancel, None, None, value=enc)
            except Refused as e:
                if not self._old_server(e, value):
                    raise
                c._values_refused = True
        if h is None:
            h = Hold._start(c, self.key, lease, None, None, cancel, None, value)
        self._hold = h
        return h

    def proclaim(self, value: str) -> None:
        """Changes the leader's value without giving leadership up: the
        observers see the new one at once. It renews the lease as it goes.
        Raises NotHeld when this election does not lead (it never
        campaigned, or resigned), LockLost when leadership was lost,
        Refused when the node does not take values (an older lockd)."""
        enc = self._check_value("proclaim", value)
        h = self._hold
        if h is None:
            raise NotHeld(f"proclaim {self.key}: this election does not lead; campaign first")
        h.check()
        sent = time.monotonic()
        try:
            self.client._renew(self.key, h.token, h.lease, h.expires, enc)
        except NotHeld as e:
            h._end("notheld", h._not_held(e))
            h.check()
        h._extend(max(h.expires, sent + h.lease))

    def leader(self) -> "Leader":
        """The current leader: (value, token), (None, None) when none."""
        return self._leader_of(self.client.queue(self.key))

    @staticmethod
    def _leader_of(q: w.Queue) -> "Leader":
        if not q.holders:
            return Leader(None, None, q.stale)
        h = q.holders[0]
        if h.value is not None:
            return Leader(h.value, h.token, q.stale)
        return Leader((w.id_name(h.id) if h.id else None), h.token, q.stale)

    def observe(self) -> "Observer":
        """The leader now and at every change of leader: iterate the
        Observer for Leader pairs (value, token), (None, None) while there
        is none. When the observer loses the cluster it yields the last
        leader known again with stale=True; once it reaches the cluster
        again, who leads there (the same leader too). close() it (or the
        client) to stop."""
        return Observer(self.client.watch(self.key))

    def resign(self) -> None:
        """Gives leadership up, if this election object holds it. After a
        loss of leadership it raises nothing (Hold.release)."""
        h, self._hold = self._hold, None
        if h is not None:
            h.release()


class Leader(Tuple[Optional[str], Optional[int]]):
    """Who leads an election: the pair (value, token), (None, None) when
    nobody does, which also says (stale) whether the observer that yields
    it had lost the cluster: then it is the last leader known, which may
    have changed since. It compares and unpacks as the pair."""

    stale: bool

    def __new__(cls, value: Optional[str], token: Optional[int], stale: bool = False) -> "Leader":
        self = super().__new__(cls, (value, token))
        self.stale = stale
        return self

    @property
    def value(self) -> Optional[str]:
        return self[0]

    @property
    def token(self) -> Optional[int]:
        return self[1]

    def __repr__(self) -> str:
        return f"Leader(value={self[0]!r}, token={self[1]!r}, stale={self.stale})"


class Observer:
    """Leaders of an election as they change; see Election.observe."""

    def __init__(self, watch: "Watch") -> None:
        self._watch = watch
        self._last: Any = object()
        self._stale = False

    @property
    def stale(self) -> bool:
        """Whether the leader last yielded said the observer had lost the
        cluster (Leader.stale)."""
        return self._stale

    def __iter__(self) -> "Observer":
        return self

    def __next__(self) -> Leader:
        for q in self._watch:
            cur = Election._leader_of(q)
            if cur.stale or self._stale or cur != self._last:
                self._stale = cur.stale
                if not cur.stale:
                    self._last = cur
                return cur
        raise StopIteration

    def close(self) -> None:
        self._watch.close()

    def __enter__(self) -> "Observer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
