"""What the client's parts share: the records of connections and calls,
the bounds of a call, and the words of its errors."""

from __future__ import annotations

import errno
import re
import socket
import threading
import time
from typing import Any, Deque, Dict, List, Optional, Set, Tuple, Union

from . import _wire as w
from ._errors import AuthError, Error, LimitMismatch, NotHeld, Refused, Timeout, Unavailable

REDIAL = 3.0
RELEASE_EVERY = 0.2
RELEASE_FOR = 5.0
DIAL_TIMEOUT = 2.0
FAILURE_TIMEOUT = 1.0
ACQUIRE_GRACE = 0.5
MAX_MOVES = 10
MAX_DROPS = 8
MAX_DYNAMIC = 16
# The most one read takes off a socket: far more than a burst of answers.
READ_SIZE = 65536

# Ops whose requests an M answer may answer: every op the client sends but S.
_MOVABLE = ("A", "R", "N", "Q", "K", "H", "X", "L", "U")


class _Dropped:
    """The result of a call whose connection dropped before it was answered."""

    __slots__ = ("err",)

    def __init__(self, err: BaseException) -> None:
        self.err = err


class _Call:
    __slots__ = ("op", "key", "ref", "seq", "conn", "gen", "done", "result", "state", "silent", "kick", "acq_id", "answered", "more")

    def __init__(self, op: str, key: str, silent: bool = False, kick: Optional[threading.Event] = None) -> None:
        self.op = op
        self.key = key
        self.ref: Optional[str] = None
        self.seq = 0
        self.conn: Optional[_Conn] = None
        self.gen = 0
        # Released once, when the result is in: a bare lock costs less than
        # an Event, and one is made for every request.
        self.done = threading.Lock()
        self.done.acquire()
        self.result: Any = None
        self.state = 0  # 0 waiting, 1 answered, 2 abandoned
        self.silent = silent
        self.kick = kick
        self.acq_id = ""
        self.answered = False  # a line answered it (whoever waits for it)
        self.more: Tuple[str, ...] = ()  # an acquire's keys after key, for a set


class _Conn:
    """One persistent connection slot to an address."""

    def __init__(self, addr: str) -> None:
        self.addr = addr
        self.state = "down"  # dialing, up, down
        self.gen = 0
        self.last_err: Optional[BaseException] = None
        self.redial_at = 0.0  # when down: when to dial again
        self.sock: Optional[socket.socket] = None
        self.wbuf = bytearray()
        self.want_write = False
        self.rbuf = bytearray()
        self.seq = 0
        self.answered = 0
        self.pending: Dict[Tuple[str, str], Deque[_Call]] = {}
        self.refs: Dict[str, _Call] = {}
        self.ref_seq = 0
        self.no_refs = False  # the node does not know ref=: an older lockd
        self.last_read = 0.0
        self.probes = 0
        self.probe_at = 0.0
        self.dead_err: Optional[BaseException] = None
        self.watching: Set[str] = set()

    def outstanding(self) -> bool:
        return bool(self.pending) or bool(self.refs)

    def acquiring(self, key: str) -> bool:
        return ("A", key) in self.pending or any(c.key == key for c in self.refs.values())


class _Attempt:
    """What one call remembers of the connections it tried."""

    __slots__ = ("busy_key", "target", "failed", "fresh", "drops", "moves", "moved_since", "last_err", "stale", "stale_since")

    def __init__(self, busy_key: str = "") -> None:
        self.busy_key = busy_key
        self.target = ""
        self.failed: Dict[_Conn, int] = {}
        self.fresh: Set[_Conn] = set()
        self.drops = 0
        self.moves = 0
        self.moved_since = 0.0
        self.last_err: Optional[BaseException] = None
        self.stale = 0
        self.stale_since = 0.0

    def redirected(self, cn_addr: str, addr: str, settle: float) -> float:
        """Count a redirect answered at once, and return how long to pause
        before following it. Nodes started or restarted together redirect
        to each other until they agree on an active node, which takes a
        failure timeout or two: more than MAX_MOVES redirects in a row
        for longer than settle raise Unavailable, a count alone would
        give up within a fraction of a second."""
        now = time.monotonic()
        if self.moves == 0:
            self.moved_since = now
        self.moves += 1
        if self.moves > MAX_MOVES and now - self.moved_since > settle:
            raise Unavailable(
                f"redirected {self.moves} times in a row over {now - self.moved_since:.1f}s, the last time by {cn_addr} to {addr}: "
                "the nodes disagree on which one is active; retry in a moment, and check lockctl status"
            )
        self.target = addr
        return 0.0 if self.moves <= 2 else min((self.moves - 2) * 0.025, 0.1)

    def wait_ran_out(self) -> Exception:
        """What a call raises when its wait ran out before it could be sent
        again: Unavailable when the nodes were sending it on to one another
        (a handoff takes one or two redirects), since none said the key was
        held; else _WaitElapsed."""
        if self.moves > 2:
            return Unavailable(
                f"the wait ran out while the request was redirected {self.moves} times in a row over "
                f"{time.monotonic() - self.moved_since:.1f}s{', the last time to ' + self.target if self.target else ''}: "
                "the nodes disagree on which one is active; retry in a moment, and check lockctl status"
            )
        return _WaitElapsed(self.last_err)

    def fail(self, cn: _Conn, gen: int, err: BaseException) -> None:
        self.failed[cn] = gen
        self.drops += 1
        self.last_err = err



class _WaitElapsed(Exception):
    def __init__(self, last: Optional[BaseException]) -> None:
        super().__init__("wait elapsed")
        self.last = last


class _Deadline(Exception):
    pass


_OPS = {"A": "acquire", "R": "release", "N": "renew", "Q": "queue", "K": "keys", "S": "status", "H": "handoff", "L": "watch", "X": "withdraw"}


def _token(token: Any) -> int:
    if isinstance(token, bool) or not isinstance(token, int):
        try:
            token = int(token)
        except (TypeError, ValueError):
            raise TypeError(f"lockd: a token is an unsigned 64-bit integer, not {token!r}") from None
    if token < 0 or token >= 1 << 64:
        raise ValueError(f"lockd: token {token} is not an unsigned 64-bit integer")
    return token


def _lease_seconds(lease: w.Seconds, op: str, key: str) -> float:
    s = w.seconds(lease, "lease")
    if s is None or s < 0.001 or s > w.MAX_SECONDS:
        raise ValueError(f"{op} {key}: lease {lease!r} is out of range; give at least 0.001 and at most {w.MAX_SECONDS} seconds")
    return s


def _hold_terms(key: str, lease: w.Seconds, max_hold: Optional[w.Seconds], least: float, ft: float) -> Tuple[float, Optional[float], float]:
    """A hold's lease and max_hold in seconds, checked, and its first
    lease; least is the client's min_hold_lease, ft its failure timeout."""
    lease_s = _lease_seconds(lease, "hold", key)
    if lease_s < least:
        raise ValueError(
            f"hold {key}: lease {lease_s:g} s is too short to be renewed across a failover: the shortest is {least:g} s "
            f"(twice the failure timeout, {ft:g} s); give a lease of at least {least:g} seconds, or, if the cluster "
            f"runs a shorter --failure-timeout, give the client the same failure_timeout"
        )
    cap = w.seconds(max_hold, "max_hold")
    if cap is not None and cap < 0.001:
        raise ValueError(f"hold {key}: max_hold {max_hold!r} is shorter than the shortest lease, 0.001 seconds")
    return lease_s, cap, (lease_s if cap is None else min(lease_s, cap))


def _timeout(key: str, wait: Optional[float]) -> Timeout:
    if wait is None:
        return Timeout(f"acquire {key}: another client holds the key (try-lock: it did not queue); retry later, or acquire with a wait")
    return Timeout(f"acquire {key}: timed out waiting for the lock after {wait:g}s; another client holds the key: retry later, or wait longer (a wait of 0 waits forever)")


def _not_held(op: str, key: str, token: int) -> NotHeld:
    return NotHeld(f"{op} {key} token {token}: the token does not hold the key: it was released already, its lease ran out, or it never held it; acquire the key again if you still need it")


def _server_error(op: str, key: str, a: w.Answer) -> Error:
    words = a.error_text()
    msg = f"lockd refused {_OPS.get(op, op)} {key}: {words}"
    if words.startswith(w.LIMIT_MISMATCH):
        return LimitMismatch(msg, op, key, words)
    if w.AUTH_FIRST in words or "needs the admin role" in words:
        return AuthError(msg)
    return Refused(msg, op, key, words)


def _orphan_grants(cl: _Call, a: w.Answer) -> List[Tuple[str, int]]:
    """The (key, token) pairs an A answer granted to the acquire cl, which
    its caller gave up: one per key of a set. Empty when a is no grant."""
    if cl.op != "A" or a.kind != "A":
        return []
    keys = (cl.key,) + cl.more
    g = w.parse_grant(a.fields, len(keys))
    if g is None:
        return []
    return list(zip(keys, g.tokens))


def _bad_answer(op: str, key: str, cn: Optional[_Conn], a: w.Answer) -> Error:
    where = cn.addr if cn is not None else "a node"
    line = " ".join([a.kind, a.key] + a.fields)
    return Error(f"{op} {key}: {where} answered {line!r}, which this client does not understand; check that client and server versions match")


def _dial_error(addr: str, e: Union[OSError, Error]) -> BaseException:
    """What a failed dial of addr leaves as the connection's last_err: an
    Error as it is, an OSError as a ConnectionError naming addr, and a
    ConnectionRefusedError when nothing listens there, by which
    _nothing_listens_locked tells a cluster not up yet from wrong
    addresses."""
    if isinstance(e, Error):
        return e
    msg = f"{addr}: {e.strerror or e}"
    if isinstance(e, ConnectionRefusedError) or e.errno == errno.ECONNREFUSED or _all_refused(e):
        return ConnectionRefusedError(msg)
    return ConnectionError(msg)


def _all_refused(e: OSError) -> bool:
    """Whether e is asyncio's one error for a name that resolved to several
    addresses ("Multiple exceptions: [Errno N] ..., [Errno N] ..."), each
    of them refused. It carries no errno of its own, only the words."""
    text = str(e)
    if e.errno is not None or not text.startswith("Multiple exceptions:"):
        return False
    codes = re.findall(r"\[Errno (\d+)\]", text)
    return bool(codes) and all(int(c) == errno.ECONNREFUSED for c in codes)
