"""What the blocking and the asyncio client decide alike about a request,
without I/O: the checked terms and the line of an acquire, renew and
release; what each answer means; the pacing of a release's re-sends; and
the words of the errors. Client (_requests.py, _loop.py) and AsyncClient
(_aio_acquire.py, _aio_client.py) call these and do only the sending and
the waiting themselves."""

from __future__ import annotations

import time
from typing import Callable, List, Optional, Tuple

from . import _wire as w
from ._conn import ACQUIRE_GRACE, _Attempt, _bad_answer, _Call, _Conn, _lease_seconds, _not_held, _timeout, _token
from ._errors import Closed, Error, NotHeld, Refused, Timeout, Unavailable

# ------------------------------------------------------------------ acquire


class Acquire:
    """One acquire of keys (one, or a set: all or none), its terms checked:
    the lease in seconds, the limit, the id, and the line of each send,
    whose wait is what is left of wait since the first send."""

    __slots__ = ("key", "more", "nkeys", "wait", "lease_s", "limit", "id", "_head", "_tail", "_start")

    def __init__(
        self,
        keys: List[str],
        lease: w.Seconds,
        wait: Optional[float],
        limit: Optional[int],
        first_lease: Optional[float],
        shared: bool,
        value: str,
        new_id: Callable[[], str],
    ) -> None:
        """wait None is a try-lock, 0 waits forever; first_lease, when given,
        is the lease of the grant (a hold's first one); value is encoded
        already; new_id gives the acquire's id once the terms are checked."""
        key, more = keys[0], keys[1:]
        w.check_key("acquire", key)
        lease_s = _lease_seconds(lease, "acquire", key)
        if first_lease is not None:
            lease_s = first_lease
        if wait is not None and (wait < 0 or wait > w.MAX_SECONDS):
            raise ValueError(f"acquire {key}: wait {wait:g}s is out of range; pass 0 or None to wait forever, or up to {w.MAX_SECONDS} seconds")
        lim = w.check_limit("acquire", key, limit, shared)
        lease_ms = max(1, w.millis(lease_s, False))
        id_ = new_id()
        w.check_acquire_line(keys, lease_ms, wait, lim, id_, shared, value)
        self.key = key
        self.more: Tuple[str, ...] = tuple(more)
        self.nkeys = len(keys)
        self.wait = wait
        self.lease_s = lease_s
        self.limit = lim
        self.id = id_
        # The line as w.acquire_line writes it, cut where the wait and the
        # ref go: each send fills those in.
        self._head = f"A {key} {w.format_ms(lease_ms)} "
        self._tail = w.acquire_tail(more, shared, lim, id_, value)
        self._start = 0.0

    def wait_word(self) -> Optional[str]:
        """The wait of the next send: '-' for a try-lock, '0' to wait
        forever, else the milliseconds left since the first send; None
        when nothing is left."""
        wait = self.wait
        if wait is None:
            return "-"
        if wait <= 0:
            return "0"
        now = time.monotonic()
        if not self._start:
            self._start = now
        ms = w.millis(wait - (now - self._start), True)
        if ms <= 0:
            return None
        return w.format_ms(ms)

    def wait_left(self) -> float:
        """What is left of a wait (wait > 0), in seconds, counted from the
        first send or, when none was made yet, from now: an outage before
        or after it counts against the wait."""
        now = time.monotonic()
        if not self._start:
            self._start = now
        return (self.wait or 0.0) - (now - self._start)

    def line(self, wait_word: str, ref: Optional[str]) -> bytes:
        if ref:
            return f"{self._head}{wait_word}{self._tail} ref={ref}\n".encode()
        return f"{self._head}{wait_word}{self._tail}\n".encode()

    def withdraw_line(self) -> bytes:
        """The X that takes the waiter out of the node's queue."""
        return f"X {self.key} {self.id}\n".encode()

    def may_withdraw(self, cl: _Call) -> bool:
        """Whether a given-up send of this acquire is withdrawn with X: it
        still waits on the live connection it was sent on, which knows ref=."""
        cn = cl.conn
        return cn is not None and cn.sock is not None and cn.gen == cl.gen and not cn.no_refs and self.wait is not None

    def deadline(self, ft: float) -> Optional[float]:
        """When the caller stops waiting for the answer: the wait, and a
        grace for the answer to come, for a failover, and a tenth of the
        wait for clocks that disagree; None without a bounded wait."""
        wait = self.wait
        if not wait:
            return None
        return time.monotonic() + wait + ACQUIRE_GRACE + ft + wait / 10

    def timeout(self) -> Timeout:
        return _timeout(self.key, self.wait)

    def grant(self, a: w.Answer, cn: Optional[_Conn]) -> w.Grant:
        """The grant an answer gives, or the error it means."""
        if a.kind == "A":
            g = w.parse_grant(a.fields, self.nkeys)
            if g is not None:
                return g
        if a.kind == "T":
            raise self.timeout()
        raise _bad_answer("acquire", self.key, cn, a)


# -------------------------------------------------------- other requests


def renew_line(key: str, token: int, lease: w.Seconds, value: str) -> Tuple[int, bytes]:
    """The token, checked, and the N line of a renewal (value encoded)."""
    w.check_key("renew", key)
    token = _token(token)
    lease_ms = max(1, w.millis(_lease_seconds(lease, "renew", key), False))
    b = f"N {key} {token} {w.format_ms(lease_ms)}{' value=' + value if value else ''}\n".encode()
    w.check_line("renew", key, b)
    return token, b


def renew_answer(a: w.Answer, cn: _Conn, key: str, token: int) -> None:
    """Returns when a renewal's answer says ok, else raises what it means."""
    if a.kind == "N" and len(a.fields) == 1:
        if a.fields[0] == "ok":
            return
        if a.fields[0] == "notheld":
            raise _not_held("renew", key, token)
    raise _bad_answer("renew", key, cn, a)


def renew_late(key: str, token: int) -> Unavailable:
    return Unavailable(f"renew {key} token {token}: no node answered in time")


def queue_line(key: str) -> bytes:
    w.check_key("queue", key)
    return f"Q {key}\n".encode()


def queue_answer(a: w.Answer, cn: _Conn, key: str) -> w.Queue:
    try:
        return w.parse_queue(key, a.fields)
    except w.BadLine as e:
        raise Error(f"queue {key}: {cn.addr} answered {e}; check that client and server versions match") from None


def keys_line(pattern: str) -> bytes:
    w.check_key("keys", pattern)
    return f"K {pattern}\n".encode()


def keys_answer(a: w.Answer, cn: _Conn, pattern: str) -> Tuple[List[str], int]:
    if a.fields:
        try:
            return a.fields[1:], int(a.fields[0])
        except ValueError:
            pass
    raise _bad_answer("keys", pattern, cn, a)


STATUS_LINE = b"S -\n"


def status_answer(a: w.Answer, cn: _Conn) -> w.Status:
    try:
        return w.parse_status(a.fields)
    except w.BadLine as e:
        raise Error(f"status: {cn.addr} answered {e}; check that client and server versions match") from None


def handoff_line(to: str) -> bytes:
    return (f"H - {to}\n" if to else "H -\n").encode()


def handoff_answer(a: w.Answer, cn: _Conn) -> str:
    """The new active's address a handoff's answer names."""
    if len(a.fields) == 2 and a.fields[0] == "ok":
        return a.fields[1]
    raise _bad_answer("handoff", "", cn, a)


def moved_to(cn: _Conn, a: w.Answer) -> str:
    """The active node an M answer names, as HOST:PORT."""
    if len(a.fields) != 1 or ":" not in a.fields[0]:
        raise Refused(f"node {cn.addr} redirected {a.key} without naming the active node as HOST:PORT; check the --peers and --advertise of that node")
    return a.fields[0]


def waits_out_outage(patient: bool, ever_up: bool, bounded: bool, nothing_listens: bool) -> bool:
    """Whether a call that found no node to serve it waits through the
    outage (outage_pause) instead of raising Unavailable: a patient call
    (an acquire that waits, not a try) on a client that has reached a node
    before, or an acquire with a bounded wait on one that never has, while
    the last dial of every connection was refused (nothing listens there
    yet: a cluster starting or restarting). Waiting forever on addresses
    never reached, or on nodes that take the connection and never answer,
    would hang a client given wrong addresses for good."""
    if not patient:
        return False
    return ever_up or (bounded and nothing_listens)


def outage_pause(outages: int, redial: float, wait_left: Optional[Callable[[], float]], cause: Error) -> float:
    """How long a patient call waits before its next round in an outage,
    which cause describes. An acquire with a wait (wait_left) waits no
    longer than what is left of it, and raises outage_outlasted_wait once
    nothing is."""
    pause = min(0.05 * 2 ** min(outages, 6), redial, 1.0)
    if wait_left is not None:
        left = wait_left()
        if left <= 0:
            raise outage_outlasted_wait(cause)
        pause = min(pause, left)
    return pause


def outage_outlasted_wait(cause: Error) -> Unavailable:
    """The error of an acquire whose wait ran out in an outage: no node
    said the key was busy, none could be reached."""
    return Unavailable(f"{cause}; it stayed so for the whole wait")


def dropped_after_send(err: BaseException) -> Unavailable:
    """What a call not re-sent after a drop raises (handoff)."""
    return Unavailable(f"{err}, after the request was sent: it may or may not have been applied; check with lockctl status before retrying")


def drops_error(drops: int, err: BaseException) -> Error:
    return Error(f"{drops} connections dropped during this request, last: {err}")


# ------------------------------------------------------------------ release


def release_line(key: str, token: int) -> Tuple[int, bytes]:
    """The token, checked, and the R line of a release."""
    w.check_key("release", key)
    token = _token(token)
    return token, f"R {key} {token}\n".encode()


def release_word(a: w.Answer) -> str:
    """'ok' or 'notheld' when a is a release's answer, else ''."""
    if a.kind == "R" and len(a.fields) == 1 and a.fields[0] in ("ok", "notheld"):
        return a.fields[0]
    return ""


class Release:
    """The sends of one release: re-sent every `every` seconds, on any live
    connection, until a node answers or `for_` seconds passed since start.
    The blocking and the asyncio client each wait their own way; this
    keeps the count, the pace and the calls out."""

    __slots__ = ("key", "token", "every", "for_", "start", "at", "calls", "sends", "last", "next_send", "waiting")

    def __init__(self, key: str, token: int, every: float, for_: float, start: float, at: _Attempt) -> None:
        self.key = key
        self.token = token
        self.every = every
        self.for_ = for_
        self.start = start
        self.at = at
        self.calls: List[_Call] = []
        self.sends = 0
        self.last: Optional[BaseException] = None
        self.next_send = start + every
        self.waiting = False

    def choose(self, pick: Callable[[_Attempt], Optional[_Conn]], ever_up: bool) -> Optional[_Conn]:
        """The connection for the next send (pick is the pool's choice), or
        None when there is none now: waiting says one is being dialled. An
        error is kept for the last word unless the client never reached a
        node, or is closed."""
        try:
            cn = pick(self.at)
        except Closed:
            raise
        except Error as e:
            if not ever_up:
                raise
            self.last = e
            return None
        self.waiting = cn is None
        return cn

    def sent(self, cl: _Call) -> None:
        self.calls.append(cl)
        if self.sends == 0:
            # The re-sends are paced from the first send, not from the
            # wait for a connection before it.
            self.next_send = time.monotonic() + self.every
        self.sends += 1

    def soon(self) -> None:
        """A node named a silent one as active: send again shortly, to the
        node if it is back (_stale_locked dialled it) or to whoever took
        over, rather than at the next re-send."""
        self.next_send = min(self.next_send, time.monotonic() + 0.025)

    def over(self, now: float) -> bool:
        return now - self.start >= self.for_

    def pace(self, now: float) -> None:
        """Time for a re-send: the next one is due a period on (or at the
        end), on any connection."""
        self.next_send = now + min(self.every, self.for_ - (now - self.start))
        self.at = _Attempt()

    def give_up(self) -> None:
        """Answers still to come are nobody's."""
        for cl in self.calls:
            if cl.state == 0:
                cl.state = 2

    def unavailable(self, err: BaseException) -> Unavailable:
        """What the release raises when no node answered in time."""
        key, token, for_ = self.key, self.token, self.for_
        if self.sends == 0:
            return Unavailable(f"release {key} token {token}: could not be sent within {for_:g}s: {err}; the lock frees itself when its lease ends")
        return Unavailable(f"release {key} token {token}: no node answered within {for_:g}s (sent {self.sends} times): {err}; the lock frees itself when its lease ends")


# -------------------------------------------------------- context managers


def lock_exit_raises(e: Error, body_failed: bool) -> bool:
    """Whether leaving a lock's (or a set's) with block raises e, its
    release's error: NotHeld never (the lock is gone either way); another
    (unreachable nodes: the lease frees the lock) only when no exception
    of the body is already on its way out, the one the caller needs."""
    return not isinstance(e, NotHeld) and not body_failed


def hold_exit_raises(e: Error, body_failed: bool, was_lost: bool) -> bool:
    """Whether leaving a hold's (or a hold set's) with block raises e, its
    release's error: NotHeld and Closed never; another (the release could
    not reach a node: the lease frees the lock) only when nothing else is
    on its way out and the lock still counted as held."""
    return not isinstance(e, (NotHeld, Closed)) and not body_failed and not was_lost
