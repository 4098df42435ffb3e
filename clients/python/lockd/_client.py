"""The lockd client: connections, pipelining, answer matching, failover,
release re-sends. One background I/O thread per Client owns every socket
(_loop.py); callers queue their request lines (_requests.py), the I/O
thread writes them, reads the answers and hands each to its caller;
watches (_watch.py) follow the active node."""

from __future__ import annotations

import atexit
import getpass
import itertools
import os
import selectors
import socket
import ssl
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple, Union

from . import _wire as w
from ._auth import check_secret
from ._conn import (
    DIAL_TIMEOUT,
    FAILURE_TIMEOUT,
    MAX_DROPS,
    READ_SIZE,
    REDIAL,
    RELEASE_EVERY,
    RELEASE_FOR,
    _OPS,
    _Attempt,
    _Call,
    _Conn,
    _Deadline,
    _Dropped,
    _server_error,
)
from ._errors import Cancelled, Closed, Unavailable
from ._loop import _Loop
from ._requests import Lock, TryLock, _Requests
from ._rules import dropped_after_send, drops_error, outage_outlasted_wait, outage_pause
from ._sets import _Sets
from ._watch import Watch, _Watches, _WatchState

if TYPE_CHECKING:
    from ._hold import Election, Hold


# Every client not closed yet: at exit, each is closed, which waits a
# moment for the withdrawals of acquires that an interrupt gave up.
_open_clients: "weakref.WeakSet[Client]" = weakref.WeakSet()


@atexit.register
def _close_open_clients() -> None:
    for c in list(_open_clients):
        c.close()


def _env_bool(v: Optional[str]) -> bool:
    return (v or "").strip().lower() in ("1", "true", "yes", "on")


def _default_name() -> str:
    try:
        user = getpass.getuser()
    except Exception:
        user = "unknown"
    return f"{user}@{socket.gethostname()}:{os.getpid()}"


def _configure(
    self: Any,
    addrs: Union[None, str, List[str]],
    secret: Union[None, str, bytes],
    secret_file: Optional[str],
    role: str,
    tls: Union[None, bool, ssl.SSLContext],
    tls_ca: Optional[str],
    tls_cert: Optional[str],
    tls_key: Optional[str],
    tls_server_name: Optional[str],
    failure_timeout: w.Seconds,
    name: Optional[str],
    conns_per_addr: int,
    redial: w.Seconds,
    release_every: w.Seconds,
    release_for: w.Seconds,
    dial_timeout: w.Seconds,
) -> int:
    """Reads a client's options (Client's and AsyncClient's) into its
    fields; returns the connections to keep per address."""
    if addrs is None:
        addrs = os.environ.get("LOCKD_ADDR") or "127.0.0.1:7070"
    self._addrs = w.split_addrs(addrs)
    self._ft = _pos(failure_timeout, "failure_timeout")
    self._redial = _pos(redial, "redial")
    self._release_every = _pos(release_every, "release_every")
    self._release_for = _pos(release_for, "release_for")
    self._dial_timeout = _pos(dial_timeout, "dial_timeout")
    if role not in ("client", "admin", "peer"):
        raise ValueError(f"lockd: role {role!r} is not client, admin or peer")
    self._role = role
    if secret is None and secret_file is None:
        secret_file = os.environ.get("LOCKD_SECRET_FILE") or None
    self._secret = None
    if secret is not None:
        self._secret = check_secret(secret.encode() if isinstance(secret, str) else bytes(secret))
    elif secret_file:
        try:
            with open(secret_file, "rb") as f:
                self._secret = check_secret(f.read())
        except OSError as e:
            raise ValueError(f"lockd: secret_file {secret_file}: {e.strerror}") from None
    self._tls, self._server_name = Client._tls_context(tls, tls_ca, tls_cert, tls_key, tls_server_name)
    if name is None:
        name = os.environ.get("LOCKD_NAME") or _default_name()
    prefix = os.urandom(8).hex()
    self._id_prefix = (w.clean_name(name) + "#" + prefix) if name else prefix
    self._ids = itertools.count(1)
    # A node refused value= (an older lockd): campaigns carry their value
    # in the acquire's id, as such a node shows it.
    self._values_refused = False
    if conns_per_addr <= 0:
        conns_per_addr = 2 if len(self._addrs) == 1 else 1
    return conns_per_addr


def _pos(d: w.Seconds, what: str) -> float:
    s = w.seconds(d, what)
    if s is None or s <= 0:
        raise ValueError(f"lockd: {what} must be more than 0 seconds, got {d!r}")
    return s


class Client(_Requests, _Sets, _Watches, _Loop):
    """A client of the lockd nodes at addrs, safe to share between threads.

    addrs is a list of HOST:PORT or a comma-separated string; None reads
    LOCKD_ADDR, else 127.0.0.1:7070. Durations are seconds (float) or
    datetime.timedelta. The client dials in the background and returns at
    once; the first request waits for the first dial."""

    def __init__(
        self,
        addrs: Union[None, str, List[str]] = None,
        *,
        secret: Union[None, str, bytes] = None,
        secret_file: Optional[str] = None,
        role: str = "client",
        tls: Union[None, bool, ssl.SSLContext] = None,
        tls_ca: Optional[str] = None,
        tls_cert: Optional[str] = None,
        tls_key: Optional[str] = None,
        tls_server_name: Optional[str] = None,
        failure_timeout: w.Seconds = FAILURE_TIMEOUT,
        name: Optional[str] = None,
        conns_per_addr: int = 0,
        redial: w.Seconds = REDIAL,
        release_every: w.Seconds = RELEASE_EVERY,
        release_for: w.Seconds = RELEASE_FOR,
        dial_timeout: w.Seconds = DIAL_TIMEOUT,
    ) -> None:
        conns_per_addr = _configure(
            self, addrs, secret, secret_file, role, tls, tls_ca, tls_cert, tls_key, tls_server_name,
            failure_timeout, name, conns_per_addr, redial, release_every, release_for, dial_timeout,
        )

        self._mu = threading.Lock()
        self._changed = threading.Condition(self._mu)
        self._closed = False
        self._conns: List[_Conn] = []
        self._dynamic = 0
        self._active = ""
        self._rr = 0
        self._ever_up = False
        self._last_err: Optional[BaseException] = None
        self._watches: Dict[str, "_WatchState"] = {}
        self._holds: Set[Any] = set()
        self._rmem = memoryview(bytearray(READ_SIZE))
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._woken = False
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._dialed: List[Tuple[_Conn, Optional[socket.socket], bytes, Optional[BaseException]]] = []
        self._dirty: Set[_Conn] = set()
        # Requests that put a node right after a caller gave up (_settle_locked).
        self._settling: Set[_Call] = set()
        # The call each thread has in flight, for _abandon.
        self._inflight = threading.local()
        self._inflight.call = None
        _open_clients.add(self)
        with self._mu:
            for a in self._addrs:
                for _ in range(conns_per_addr):
                    self._add_conn_locked(a, False)
        self._thread = threading.Thread(target=self._loop, name="lockd-io", daemon=True)
        self._thread.start()

    @staticmethod
    def _tls_context(
        tls: Union[None, bool, ssl.SSLContext],
        ca: Optional[str],
        cert: Optional[str],
        key: Optional[str],
        server_name: Optional[str],
    ) -> Tuple[Optional[ssl.SSLContext], Optional[str]]:
        env = os.environ
        if tls is None:
            ca = ca or env.get("LOCKD_TLS_CA") or None
            cert = cert or env.get("LOCKD_TLS_CERT") or None
            key = key or env.get("LOCKD_TLS_KEY") or None
            server_name = server_name or env.get("LOCKD_TLS_SERVER_NAME") or None
            tls = _env_bool(env.get("LOCKD_TLS")) or bool(ca or cert)
        if isinstance(tls, ssl.SSLContext):
            return tls, server_name
        if not tls:
            if server_name:
                raise ValueError("lockd: tls_server_name is for TLS: pass tls=True (system CAs) or tls_ca=FILE")
            return None, None
        ctx = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
        if cert:
            ctx.load_cert_chain(cert, key)
        elif key:
            raise ValueError("lockd: tls_key without tls_cert; pass both, or neither")
        return ctx, server_name

    # ------------------------------------------------------------------ life

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stops the I/O thread and closes every connection. Calls still
        waiting raise Closed; locks still held stay held until their lease
        ends; holds end with reason 'closed'. It first waits, a failure
        timeout at most, for the answers to withdrawals of acquires given
        up (a KeyboardInterrupt, a cancel) and to releases of the grants
        that crossed them, so that the node has them before the
        connections close."""
        end = time.monotonic() + self._ft
        with self._mu:
            if threading.current_thread() is not self._thread:
                while not self._closed and not self._settled_locked() and time.monotonic() < end:
                    self._changed.wait(0.01)
            if self._closed:
                return
            self._closed = True
            holds = list(self._holds)
            self._changed.notify_all()
        for h in holds:
            h._end("closed", Closed(f"hold {h.key} token {h.token}: the client was closed"))
        self._wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(5)

    # ----------------------------------------------------------- round trip

    def _wait_call(self, cl: _Call, deadline: Optional[float], cancel: Optional[threading.Event]) -> str:
        """Waits for cl's answer: '' when it came, else 'deadline' or 'cancel'."""
        while True:
            if cancel is not None and cancel.is_set():
                return "cancel"
            t = None if deadline is None else deadline - time.monotonic()
            if t is not None and t <= 0:
                return "deadline"
            if cancel is not None:
                t = 0.02 if t is None else min(t, 0.02)
            if cl.done.acquire(timeout=-1 if t is None else t):
                return ""

    def _wait_change(self, deadline: Optional[float], cancel: Optional[threading.Event]) -> str:
        with self._mu:
            if self._closed:
                return ""
            t = 0.05
            if deadline is not None:
                t = min(t, max(0.0, deadline - time.monotonic()))
            self._changed.wait(t)
        if cancel is not None and cancel.is_set():
            return "cancel"
        if deadline is not None and time.monotonic() >= deadline:
            return "deadline"
        return ""

    def _round_trip(
        self,
        op: str,
        key: str,
        line: Callable[[_Conn, _Call], Optional[bytes]],
        *,
        resend: bool = True,
        deadline: Optional[float] = None,
        cancel: Optional[threading.Event] = None,
        on_abandon: Optional[Callable[[_Call], None]] = None,
        patient: bool = False,
        wait_left: Optional[Callable[[], float]] = None,
    ) -> Tuple[w.Answer, _Conn]:
        """Sends a request and returns its answer, moving it to another
        connection when one drops (if resend) and following M answers.

        patient (an acquire that waits, not a try) waits through an outage
        too: where another call raises Unavailable because no node can be
        reached, it keeps trying, dialling every node, until cancelled or,
        for an acquire with a wait (wait_left: what is left of it), until
        the wait runs out. A client that never reached a node waits so only
        for an acquire with a wait, and only while every node refuses the
        connection (nothing listens there yet: a cluster starting or
        restarting); one that waits forever raises at once, as it does when
        a node takes the connection and never answers, since its addresses
        may well be wrong and it would hang on them for good. A node that
        refuses its secret or TLS (AuthError) ends it at once too.

        An exception that is not an Error (KeyboardInterrupt, SystemExit)
        abandons the call on its way out: a waiting acquire is withdrawn,
        and a grant that came is released."""
        try:
            return self._trip(op, key, line, resend, deadline, cancel, on_abandon, patient, wait_left)
        except BaseException as e:
            if not isinstance(e, Exception):
                self._abandon(on_abandon)
            raise

    def _abandon(self, on_abandon: Optional[Callable[[_Call], None]]) -> None:
        """Abandons the call this thread has in flight, if any."""
        cl = getattr(self._inflight, "call", None)
        if cl is None:
            return
        with self._mu:
            self._abandon_call_locked(cl, on_abandon)

    def _trip(
        self,
        op: str,
        key: str,
        line: Callable[[_Conn, _Call], Optional[bytes]],
        resend: bool,
        deadline: Optional[float],
        cancel: Optional[threading.Event],
        on_abandon: Optional[Callable[[_Call], None]],
        patient: bool,
        wait_left: Optional[Callable[[], float]],
    ) -> Tuple[w.Answer, _Conn]:
        at = _Attempt(key if op == "A" else "")
        outages = 0
        inflight = self._inflight
        inflight.call = None
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"{_OPS.get(op, op)} {key}: cancelled by the caller")
            outage: Optional[Unavailable] = None
            with self._mu:
                try:
                    cn = self._choose_locked(at)
                except Unavailable as e:
                    if not self._waits_out_locked(patient, wait_left):
                        raise
                    cn, outage = None, e
                cl: Optional[_Call] = None
                if cn is not None:
                    cl = _Call(op, key)
                    b = line(cn, cl)
                    if b is None:
                        raise at.wait_ran_out()
                    self._queue_locked(cn, cl, b)
                    inflight.call = cl
                    if at.moves > 0:
                        self._probe_locked(cn, time.monotonic())
            if outage is not None:
                self._wait_outage(outage_pause(outages, self._redial, wait_left, outage), cancel, True)
                outages += 1
                at = _Attempt(at.busy_key)
                if wait_left is not None and wait_left() <= 0:
                    raise outage_outlasted_wait(outage)
                continue
            if cl is None or cn is None:
                why = self._wait_change(deadline, cancel)
                if why == "cancel":
                    raise Cancelled(f"{_OPS.get(op, op)} {key}: cancelled by the caller")
                if why == "deadline":
                    raise _Deadline()
                continue
            why = self._wait_call(cl, deadline, cancel)
            if why:
                with self._mu:
                    if cl.state == 0:
                        cl.state = 2
                        if on_abandon is not None:
                            on_abandon(cl)
                        abandoned = True
                    else:
                        abandoned = False
                if abandoned:
                    inflight.call = None
                    if why == "cancel":
                        raise Cancelled(f"{_OPS.get(op, op)} {key}: cancelled by the caller")
                    raise _Deadline()
            res = cl.result
            if isinstance(res, _Dropped):
                inflight.call = None
                if isinstance(res.err, Closed):
                    raise Closed("the lockd client is closed")
                at.fail(cn, cl.gen, res.err)
                if not resend:
                    raise dropped_after_send(res.err)
                if at.drops >= MAX_DROPS:
                    with self._mu:
                        err = self._unavailable_locked(drops_error(at.drops, res.err))
                        waits = self._waits_out_locked(patient, wait_left)
                    if waits:
                        # Connections that come up and drop again: pause
                        # before the next round, whatever is up.
                        self._wait_outage(outage_pause(outages, self._redial, wait_left, err), cancel, False)
                        outages += 1
                        at = _Attempt(at.busy_key)
                        if wait_left is not None and wait_left() <= 0:
                            raise outage_outlasted_wait(err)
                        continue
                    raise err
                continue
            a, landed = res
            outages = 0
            if a.kind == "M":
                inflight.call = None
                with self._mu:
                    pause = self._moved_locked(cn, a, at, landed, patient and wait_left is None)
                if pause:
                    time.sleep(pause)
                continue
            if a.kind == "E":
                inflight.call = None
                if op == "A" and cl.ref is not None and a.ref is None:
                    # A node that knows ref= echoes it in every answer to
                    # the acquire: this is an older lockd. Ask again without.
                    with self._mu:
                        cn.no_refs = True
                    continue
                raise _server_error(op, key, a)
            inflight.call = None
            if op != "H":
                with self._mu:
                    self._active = cn.addr
            return a, cn

    def _wait_outage(self, pause: float, cancel: Optional[threading.Event], early: bool) -> None:
        """Waits out a spell with no node to serve a patient call: pause
        seconds, or (early) until a connection is up."""
        end = time.monotonic() + pause
        with self._mu:
            while not self._closed and not (early and self._any_up_locked()):
                left = end - time.monotonic()
                if left <= 0 or (cancel is not None and cancel.is_set()):
                    return
                self._changed.wait(min(left, 0.02 if cancel is not None else left))

    def hold(
        self,
        key: str,
        lease: w.Seconds,
        wait: Optional[w.Seconds] = None,
        limit: Optional[int] = None,
        cancel: Optional[threading.Event] = None,
        max_hold: Optional[w.Seconds] = None,
        *,
        shared: bool = False,
    ) -> "Hold":
        """Acquires key and keeps it, renewing it in the background every
        third of lease until released, lost, max_hold reached or the client
        closed. Use it as a context manager; the body checks lock.lost (a
        threading.Event) or calls lock.check(), which raises LockLost.
        shared=True holds key as a reader (see acquire)."""
        from ._hold import Hold

        return Hold._start(self, key, lease, wait, limit, cancel, max_hold, None, shared=shared)

    def election(self, key: str) -> "Election":
        """An election on key: campaign, leader, observe, resign."""
        from ._hold import Election

        w.check_key("election", key)
        return Election(self, key)
