"""The lockd client: connections, pipelining, answer matching, failover,
release re-sends. One background I/O thread per Client owns every socket;
callers queue their request lines, the I/O thread writes them, reads the
answers and hands each to its caller."""

from __future__ import annotations

import collections
import getpass
import itertools
import os
import selectors
import socket
import ssl
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Optional, Set, Tuple, Union

from . import _wire as w
from ._auth import NoAnswer, check_secret, open_conn
from ._errors import (
    AuthError,
    Cancelled,
    Closed,
    Error,
    LimitMismatch,
    NotHeld,
    Refused,
    Timeout,
    Unavailable,
)

REDIAL = 3.0
RELEASE_EVERY = 0.2
RELEASE_FOR = 5.0
DIAL_TIMEOUT = 2.0
FAILURE_TIMEOUT = 1.0
ACQUIRE_GRACE = 0.5
MAX_MOVES = 10
MAX_DROPS = 8
MAX_DYNAMIC = 16

# Ops whose requests an M answer may answer: every op the client sends but S.
_MOVABLE = ("A", "R", "N", "Q", "K", "H", "X", "L", "U")


class _Dropped:
    """The result of a call whose connection dropped before it was answered."""

    __slots__ = ("err",)

    def __init__(self, err: BaseException) -> None:
        self.err = err


class _Call:
    __slots__ = ("op", "key", "ref", "seq", "conn", "gen", "done", "result", "state", "silent", "kick", "acq_id")

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

    def __init__(self, busy_key: str = "") -> None:
        self.busy_key = busy_key
        self.target = ""
        self.failed: Dict[_Conn, int] = {}
        self.fresh: Set[_Conn] = set()
        self.drops = 0
        self.moves = 0
        self.last_err: Optional[BaseException] = None
        self.stale = 0
        self.stale_since = 0.0

    def fail(self, cn: _Conn, gen: int, err: BaseException) -> None:
        self.failed[cn] = gen
        self.drops += 1
        self.last_err = err


class Lock:
    """A granted lock, or one place of a semaphore. token is its fencing
    token: hand it to the protected resource, which refuses tokens smaller
    than the largest it has seen."""

    def __init__(self, client: "Client", key: str, token: int, lease: float, limit: int, id_: str) -> None:
        self.client = client
        self.key = key
        self.token = token
        self.lease = lease
        self.limit = limit
        self.id = id_

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


def _env_bool(v: Optional[str]) -> bool:
    return (v or "").strip().lower() in ("1", "true", "yes", "on")


def _default_name() -> str:
    try:
        user = getpass.getuser()
    except Exception:
        user = "unknown"
    return f"{user}@{socket.gethostname()}:{os.getpid()}"


class Client:
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
        if addrs is None:
            addrs = os.environ.get("LOCKD_ADDR") or "127.0.0.1:7070"
        self._addrs = w.split_addrs(addrs)
        self._ft = self._pos(failure_timeout, "failure_timeout")
        self._redial = self._pos(redial, "redial")
        self._release_every = self._pos(release_every, "release_every")
        self._release_for = self._pos(release_for, "release_for")
        self._dial_timeout = self._pos(dial_timeout, "dial_timeout")
        if role not in ("client", "admin", "peer"):
            raise ValueError(f"lockd: role {role!r} is not client, admin or peer")
        self._role = role
        if secret is None and secret_file is None:
            secret_file = os.environ.get("LOCKD_SECRET_FILE") or None
        self._secret: Optional[bytes] = None
        if secret is not None:
            self._secret = check_secret(secret.encode() if isinstance(secret, str) else bytes(secret))
        elif secret_file:
            try:
                with open(secret_file, "rb") as f:
                    self._secret = check_secret(f.read())
            except OSError as e:
                raise ValueError(f"lockd: secret_file {secret_file}: {e.strerror}") from None
        self._tls, self._server_name = self._tls_context(tls, tls_ca, tls_cert, tls_key, tls_server_name)
        if name is None:
            name = os.environ.get("LOCKD_NAME") or _default_name()
        prefix = os.urandom(8).hex()
        self._id_prefix = (w.clean_name(name) + "#" + prefix) if name else prefix
        self._ids = itertools.count(1)
        if conns_per_addr <= 0:
            conns_per_addr = 2 if len(self._addrs) == 1 else 1

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
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._woken = False
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._dialed: List[Tuple[_Conn, Optional[socket.socket], bytes, Optional[BaseException]]] = []
        self._dirty: Set[_Conn] = set()
        with self._mu:
            for a in self._addrs:
                for _ in range(conns_per_addr):
                    self._add_conn_locked(a, False)
        self._thread = threading.Thread(target=self._loop, name="lockd-io", daemon=True)
        self._thread.start()

    @staticmethod
    def _pos(d: w.Seconds, what: str) -> float:
        s = w.seconds(d, what)
        if s is None or s <= 0:
            raise ValueError(f"lockd: {what} must be more than 0 seconds, got {d!r}")
        return s

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
        ends; holds end with reason 'closed'."""
        with self._mu:
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

    @property
    def active(self) -> str:
        """The address of the node last known to be active, '' until known."""
        with self._mu:
            return self._active

    def _acquire_id(self, name: Optional[str] = None) -> str:
        n = next(self._ids)  # atomic under the GIL: no lock to contend for
        prefix = self._id_prefix
        if name is not None:
            prefix = name + "#" + prefix.rsplit("#", 1)[-1]
        return prefix + "-" + w.base36(n)

    # ------------------------------------------------------------ I/O thread

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def _add_conn_locked(self, addr: str, dynamic: bool) -> _Conn:
        cn = _Conn(addr)
        self._conns.append(cn)
        if dynamic:
            self._dynamic += 1
        self._dial_locked(cn)
        return cn

    def _dial_locked(self, cn: _Conn) -> None:
        cn.state = "dialing"
        threading.Thread(target=self._dial, args=(cn,), name="lockd-dial", daemon=True).start()

    def _dial(self, cn: _Conn) -> None:
        sock: Optional[socket.socket] = None
        rest = b""
        err: Optional[BaseException] = None
        try:
            sock, rest = open_conn(cn.addr, self._dial_timeout, self._ft, self._tls, self._server_name, self._secret, self._role)
        except AuthError as e:
            err = e
        except NoAnswer as e:
            err = e
        except (OSError, Error) as e:
            err = e if isinstance(e, Error) else ConnectionError(f"{cn.addr}: {e.strerror or e}")
        with self._mu:
            if self._closed:
                if sock is not None:
                    sock.close()
                return
            self._dialed.append((cn, sock, rest, err))
        self._wake()

    def _loop(self) -> None:
        tick = min(max(self._ft / 10, 0.001), 0.1)
        next_tick = time.monotonic() + tick
        try:
            while True:
                timeout = max(0.0, next_tick - time.monotonic())
                events = self._sel.select(timeout)
                with self._mu:
                    if self._closed:
                        break
                    for key, mask in events:
                        if key.data is None:
                            try:
                                while self._wake_r.recv(4096):
                                    pass
                            except (BlockingIOError, InterruptedError):
                                pass
                            continue
                        cn: _Conn = key.data
                        if mask & selectors.EVENT_READ:
                            self._read_locked(cn)
                        if mask & selectors.EVENT_WRITE and cn.sock is not None:
                            self._flush_locked(cn)
                    self._take_dialed_locked()
                    for cn in list(self._dirty):
                        self._flush_locked(cn)
                    self._dirty.clear()
                    now = time.monotonic()
                    if now >= next_tick:
                        next_tick = now + tick
                        self._tick_locked(now)
        finally:
            with self._mu:
                self._closed = True
                for cn in self._conns:
                    self._down_locked(cn, Closed("the lockd client is closed"))
                for ws in self._watches.values():
                    ws.end_locked("closed")
                for _, sock, _, _ in self._dialed:
                    if sock is not None:
                        sock.close()
                self._dialed = []
                self._changed.notify_all()
            self._sel.close()
            self._wake_r.close()
            self._wake_w.close()

    def _take_dialed_locked(self) -> None:
        dialed, self._dialed = self._dialed, []
        for cn, sock, rest, err in dialed:
            if sock is None:
                cn.state = "down"
                cn.last_err = err
                self._last_err = err
                cn.redial_at = time.monotonic() + self._redial
                self._changed.notify_all()
                continue
            sock.setblocking(False)
            cn.sock = sock
            cn.gen += 1
            cn.state = "up"
            cn.last_err = None
            cn.dead_err = None
            cn.probes = 0
            cn.rbuf = bytearray(rest)
            cn.last_read = time.monotonic()
            self._ever_up = True
            self._sel.register(sock, selectors.EVENT_READ, cn)
            if cn.rbuf:
                self._lines_locked(cn)
            self._changed.notify_all()
            self._resubscribe_locked()

    def _tick_locked(self, now: float) -> None:
        ft = self._ft
        for ws in list(self._watches.values()):
            if ws.resubscribe and ws.conn is None and ws.retry_at and now >= ws.retry_at:
                ws.retry_at = 0.0
                self._subscribe_locked(ws, ws.target)
        for cn in self._conns:
            if cn.state == "down" and now >= cn.redial_at:
                self._dial_locked(cn)
                continue
            if cn.state != "up" or cn.dead_err is not None:
                continue
            silent = now - cn.last_read
            if cn.probes > 0:
                if now - cn.probe_at >= ft / 2 and silent >= ft:
                    cn.dead_err = NoAnswer(
                        f"{cn.addr} answered nothing, not even a keep-alive, for {silent:.3f}s (the failure timeout is {ft:g}s)"
                    )
                    self._down_locked(cn, cn.dead_err)
            elif silent >= ft or (silent >= ft / 4 and cn.outstanding()):
                self._probe_locked(cn, now)

    def _probe_locked(self, cn: _Conn, now: float) -> None:
        self._queue_locked(cn, _Call("S", "-", silent=True), b"S -\n")
        if cn.probes == 0:
            cn.probe_at = now
        cn.probes += 1

    def _read_locked(self, cn: _Conn) -> None:
        sock = cn.sock
        if sock is None:
            return
        got = False
        while True:
            try:
                chunk = sock.recv(262144)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                break
            except ssl.SSLWantWriteError:
                break
            except OSError as e:
                self._down_locked(cn, ConnectionError(f"connection to {cn.addr} lost: {e}"))
                return
            if not chunk:
                self._down_locked(cn, ConnectionError(f"connection to {cn.addr} lost: the node closed it"))
                return
            cn.rbuf += chunk
            got = True
            if not isinstance(sock, ssl.SSLSocket) and len(chunk) < 262144:
                break
        if got:
            cn.last_read = time.monotonic()
            self._lines_locked(cn)

    def _lines_locked(self, cn: _Conn) -> None:
        buf = cn.rbuf
        start = 0
        while cn.sock is not None:
            i = buf.find(b"\n", start)
            if i < 0:
                break
            line = bytes(buf[start:i])
            start = i + 1
            try:
                a = w.parse_answer(line)
            except w.BadLine as e:
                self._down_locked(cn, Error(f"{cn.addr} sent a line the client cannot read: {e}"))
                return
            err = self._dispatch_locked(cn, a)
            if err is not None:
                self._down_locked(cn, err)
                return
        del buf[:start]
        if len(buf) > w.MAX_ANSWER_LEN:
            self._down_locked(cn, Error(f"{cn.addr} sent an answer longer than {w.MAX_ANSWER_LEN} bytes"))

    def _pop_locked(self, cn: _Conn, op: str, key: str) -> Optional[_Call]:
        q = cn.pending.get((op, key))
        if not q:
            return None
        cl = q.popleft()
        if not q:
            del cn.pending[(op, key)]
        return cl

    def _pop_any_locked(self, cn: _Conn, key: str) -> Optional[_Call]:
        best: Optional[_Call] = None
        for op in _MOVABLE:
            q = cn.pending.get((op, key))
            if q and (best is None or q[0].seq < best.seq):
                best = q[0]
        for cl in cn.refs.values():
            if cl.key == key and (best is None or cl.seq < best.seq):
                best = cl
        if best is None:
            return None
        if best.ref is not None:
            return cn.refs.pop(best.ref)
        return self._pop_locked(cn, best.op, key)

    def _dispatch_locked(self, cn: _Conn, a: w.Answer) -> Optional[BaseException]:
        cl: Optional[_Call] = None
        if a.ref is not None:
            cl = cn.refs.pop(a.ref, None)
        if cl is None:
            if a.kind == "M":
                cl = self._pop_any_locked(cn, a.key)
            else:
                op = a.req_op()
                if op:
                    cl = self._pop_locked(cn, op, a.key)
                    if cl is None and op == "A" and a.ref is None:
                        # A node that does not know ref= answers in send
                        # order; before authentication it refuses the word
                        # at once and names no key (E - A: "ref=R": ...),
                        # which then answers the oldest acquire sent with one.
                        anykey = a.key == "-"
                        cands = [c for c in cn.refs.values() if anykey or c.key == a.key]
                        if cands:
                            cl = cn.refs.pop(min(cands, key=lambda c: c.seq).ref)  # type: ignore[arg-type]
        if a.kind == "L" and a.key in cn.watching:
            ws = self._watches.get(a.key)
            if ws is not None:
                try:
                    # The answer to an L of ours is the state for the
                    # watchers that have none yet; later lines are for all.
                    ws.deliver_locked(w.parse_queue(a.key, a.fields), cl is not None and cl.op == "L")
                except w.BadLine:
                    pass
        if cl is None:
            if a.kind == "M" and a.key in cn.watching:
                cn.watching.discard(a.key)
                ws = self._watches.get(a.key)
                if ws is not None and a.fields:
                    ws.conn = None
                    self._move_watch_locked(ws, a.fields[0])
                return None
            if a.kind == "E":
                return Error(f"{cn.addr} sent an error that matches no request: E {a.key} {a.error_text()}")
            return None
        landed = cn.answered > cl.seq
        cn.answered = max(cn.answered, cl.seq)
        if cl.op == "S" and cl.silent:
            cn.probes -= 1
            cn.probe_at = time.monotonic()
            return None
        if cl.op in ("L", "U") and cl.silent:
            self._watch_answer_locked(cn, cl, a)
            return None
        self._deliver_locked(cl, (a, landed))
        return None

    def _deliver_locked(self, cl: _Call, res: Any) -> None:
        if cl.state == 2:
            if not isinstance(res, _Dropped):
                self._orphan_locked(cl, res[0])
            return
        if cl.state != 0:
            return
        cl.state = 1
        cl.result = res
        cl.done.release()
        if cl.kick is not None:
            cl.kick.set()

    def _orphan_locked(self, cl: _Call, a: w.Answer) -> None:
        """A grant that came after its caller gave up is released at once,
        so that an abandoned acquire leaks no lock."""
        if cl.op != "A" or a.kind != "A" or len(a.fields) != 1 or self._closed:
            return
        try:
            token = int(a.fields[0])
        except ValueError:
            return
        threading.Thread(target=self._release_quietly, args=(cl.key, token), daemon=True).start()

    def _release_quietly(self, key: str, token: int) -> None:
        try:
            self.release(key, token)
        except Error:
            pass

    def _queue_locked(self, cn: _Conn, cl: _Call, line: bytes) -> None:
        cn.seq += 1
        cl.seq = cn.seq
        cl.conn = cn
        cl.gen = cn.gen
        if cl.ref is not None:
            cn.refs[cl.ref] = cl
        else:
            q = cn.pending.get((cl.op, cl.key))
            if q is None:
                q = cn.pending[(cl.op, cl.key)] = collections.deque()
            q.append(cl)
        cn.wbuf += line
        if threading.current_thread() is self._thread:
            # Written once this round of the loop is over, with the rest.
            self._dirty.add(cn)
        elif not cn.want_write:
            # The caller writes its own line: handing it to the I/O thread
            # would cost a thread switch per request, which is most of
            # what a request costs in Python. What the socket does not
            # take now, the I/O thread writes when it can.
            self._flush_locked(cn)

    def _flush_locked(self, cn: _Conn) -> None:
        sock = cn.sock
        if sock is None or not cn.wbuf:
            return
        try:
            while cn.wbuf:
                n = sock.send(cn.wbuf)
                del cn.wbuf[:n]
        except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            pass
        except OSError as e:
            self._down_locked(cn, ConnectionError(f"connection to {cn.addr} lost: {e}"))
            return
        want = bool(cn.wbuf)
        if want != cn.want_write:
            cn.want_write = want
            self._sel.modify(sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if want else 0), cn)

    def _down_locked(self, cn: _Conn, err: BaseException) -> None:
        """Marks the connection unusable, then fails everything outstanding
        on it, so that each call moves on to another connection."""
        if cn.sock is not None:
            try:
                self._sel.unregister(cn.sock)
            except (KeyError, ValueError):
                pass
            try:
                cn.sock.close()
            except OSError:
                pass
            cn.sock = None
        was_up = cn.state == "up"
        cn.state = "down"
        cn.last_err = err
        cn.want_write = False
        cn.redial_at = time.monotonic() + self._redial
        if not isinstance(err, Closed):
            self._last_err = err
        if self._active == cn.addr and not any(c.state == "up" and c.addr == cn.addr for c in self._conns):
            self._active = ""
        pending, cn.pending = cn.pending, {}
        refs, cn.refs = cn.refs, {}
        cn.wbuf = bytearray()
        cn.rbuf = bytearray()
        cn.probes = 0
        dropped = _Dropped(err)
        for q in pending.values():
            for cl in q:
                if not cl.silent:
                    self._deliver_locked(cl, dropped)
        for cl in refs.values():
            self._deliver_locked(cl, dropped)
        watching, cn.watching = cn.watching, set()
        for key in watching:
            ws = self._watches.get(key)
            if ws is not None and ws.conn is cn:
                ws.conn = None
                ws.resubscribe = True
        if was_up or watching:
            self._resubscribe_locked()
        self._changed.notify_all()

    # ------------------------------------------------------ choosing a conn

    def _dead_locked(self, addr: str) -> bool:
        found = False
        for cn in self._conns:
            if cn.addr != addr:
                continue
            if cn.state == "up" or cn.last_err is None:
                return False
            found = True
        return found

    def _pick_locked(self, addr: str, at: _Attempt) -> Tuple[Optional[_Conn], bool]:
        def usable(cn: _Conn) -> bool:
            if cn.state != "up" or (addr and cn.addr != addr):
                return False
            g = at.failed.get(cn)
            return g is None or cn.gen > g

        live = [cn for cn in self._conns if usable(cn)]
        if at.busy_key and live:
            free = [cn for cn in live if not (cn.no_refs and cn.acquiring(at.busy_key))]
            if free:
                live = free
        if live:
            cn = live[self._rr % len(live)]
            self._rr += 1
            return cn, False
        wait = False
        for cn in self._conns:
            if addr and cn.addr != addr:
                continue
            if cn.state == "dialing":
                at.fresh.add(cn)
                wait = True
            elif cn.state == "down" and cn not in at.fresh:
                at.fresh.add(cn)
                self._dial_locked(cn)
                wait = True
        return None, wait

    def _choose_locked(self, at: _Attempt) -> Optional[_Conn]:
        """The connection for the next send of a call, None to wait for a
        change, or Unavailable when every connection has been tried."""
        if self._closed:
            raise Closed("the lockd client is closed")
        target = at.target or self._active
        if target and self._dead_locked(target):
            target = ""
        if target:
            if self._dynamic < MAX_DYNAMIC and not any(c.addr == target for c in self._conns):
                self._add_conn_locked(target, True)
            cn, wait = self._pick_locked(target, at)
            if cn is not None:
                return cn
            if wait:
                return None
        cn, wait = self._pick_locked("", at)
        if cn is not None:
            return cn
        if wait:
            return None
        raise self._unavailable_locked(at.last_err)

    def _unavailable_locked(self, last: Optional[BaseException]) -> Error:
        if last is None:
            last = self._last_err
        if isinstance(last, AuthError):
            return AuthError(str(last))
        addrs: List[str] = []
        for cn in self._conns:
            if cn.addr not in addrs:
                addrs.append(cn.addr)
        hint = "check that lockd is running there and that the client's addresses (or LOCKD_ADDR) name it"
        why = f" ({last})" if last is not None else ""
        return Unavailable(f"no lockd node available: tried {', '.join(addrs)}{why}; {hint}")

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
    ) -> Tuple[w.Answer, _Conn]:
        at = _Attempt(key if op == "A" else "")
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"{_OPS.get(op, op)} {key}: cancelled by the caller")
            with self._mu:
                cn = self._choose_locked(at)
                cl: Optional[_Call] = None
                if cn is not None:
                    cl = _Call(op, key)
                    b = line(cn, cl)
                    if b is None:
                        raise _WaitElapsed(at.last_err)
                    self._queue_locked(cn, cl, b)
                    if at.moves > 0:
                        self._probe_locked(cn, time.monotonic())
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
                    if why == "cancel":
                        raise Cancelled(f"{_OPS.get(op, op)} {key}: cancelled by the caller")
                    raise _Deadline()
            res = cl.result
            if isinstance(res, _Dropped):
                if isinstance(res.err, Closed):
                    raise Closed("the lockd client is closed")
                at.fail(cn, cl.gen, res.err)
                if not resend:
                    raise Unavailable(f"{res.err}, after the request was sent: it may or may not have been applied; check with lockctl status before retrying")
                if at.drops >= MAX_DROPS:
                    with self._mu:
                        raise self._unavailable_locked(Error(f"{at.drops} connections dropped during this request, last: {res.err}"))
                continue
            a, landed = res
            if a.kind == "M":
                addr = self._moved_to(cn, a)
                if landed:
                    at.moves = 0
                pause = 0.0
                with self._mu:
                    dead = self._dead_locked(addr)
                    if dead:
                        now = time.monotonic()
                        if not at.stale_since:
                            at.stale_since = now
                        if now - at.stale_since > 10 * self._ft:
                            raise self._unavailable_locked(
                                Error(f"{cn.addr} still names {addr} as the active node, which has not answered this client: no other node took over")
                            )
                        at.stale += 1
                        at.target = ""
                        pause = min(at.stale * 0.025, 0.1)
                    else:
                        at.stale_since = 0.0
                        self._active = addr
                        at.moves += 1
                        if at.moves > MAX_MOVES:
                            raise Unavailable(
                                f"redirected {MAX_MOVES} times in a row, the last time by {cn.addr} to {addr}: the nodes disagree on which one is active; retry in a moment, and check lockctl status"
                            )
                        at.target = addr
                        pause = 0.0 if at.moves <= 2 else min((at.moves - 2) * 0.02, 0.05)
                if pause:
                    time.sleep(pause)
                continue
            if a.kind == "E":
                if op == "A" and cl.ref is not None and a.ref is None:
                    # A node that knows ref= echoes it in every answer to
                    # the acquire: this is an older lockd. Ask again without.
                    with self._mu:
                        cn.no_refs = True
                    continue
                raise _server_error(op, key, a)
            if op != "H":
                with self._mu:
                    self._active = cn.addr
            return a, cn

    @staticmethod
    def _moved_to(cn: _Conn, a: w.Answer) -> str:
        if len(a.fields) != 1 or ":" not in a.fields[0]:
            raise Refused(f"node {cn.addr} redirected {a.key} without naming the active node as HOST:PORT; check the --peers and --advertise of that node")
        return a.fields[0]

    # ------------------------------------------------------------ requests

    def acquire(
        self,
        key: str,
        lease: w.Seconds,
        wait: Optional[w.Seconds] = None,
        limit: Optional[int] = None,
        cancel: Optional[threading.Event] = None,
    ) -> Lock:
        """Waits for key and returns the Lock with its fencing token. The
        node keeps it for lease seconds unless renewed or released. wait
        bounds the wait (None or 0: forever), counted from the first send,
        also when the request moves to another connection. limit=N takes one
        of N places of a semaphore. Raises Timeout, LimitMismatch, Refused,
        Unavailable, Cancelled (cancel, a threading.Event, was set) or Closed."""
        return self._acquire(key, lease, w.seconds(wait, "wait") or 0.0, limit, cancel, None)

    def try_acquire(self, key: str, lease: w.Seconds, limit: Optional[int] = None) -> Optional[Lock]:
        """Takes key if nobody holds it, without queueing: the Lock, or None
        when it is held by others."""
        try:
            return self._acquire(key, lease, None, limit, None, None)
        except Timeout:
            return None

    def _acquire(
        self,
        key: str,
        lease: w.Seconds,
        wait: Optional[float],
        limit: Optional[int],
        cancel: Optional[threading.Event],
        name: Optional[str],
        first_lease: Optional[float] = None,
    ) -> Lock:
        w.check_key("acquire", key)
        lease_s = self._lease(lease, "acquire", key)
        if first_lease is not None:
            lease_s = first_lease
        if wait is not None and (wait < 0 or wait > w.MAX_SECONDS):
            raise ValueError(f"acquire {key}: wait {wait:g}s is out of range; pass 0 or None to wait forever, or up to {w.MAX_SECONDS} seconds")
        if limit is None:
            limit = 1
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1 or limit > w.MAX_LIMIT:
            raise ValueError(f"acquire {key}: limit {limit!r} is out of range; a key allows 1 (a lock) to {w.MAX_LIMIT} holders at once")
        lease_ms = max(1, w.millis(lease_s, False))
        id_ = self._acquire_id(name)
        start: List[float] = []

        def line(cn: _Conn, cl: _Call) -> Optional[bytes]:
            cl.acq_id = id_
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
            return w.acquire_line(key, lease_ms, wait_ms, limit, id_, cl.ref)  # type: ignore[arg-type]

        def withdraw(cl: _Call) -> None:
            cn = cl.conn
            if cn is not None and cn.sock is not None and cn.gen == cl.gen and not cn.no_refs and wait is not None:
                self._queue_locked(cn, _Call("X", key, silent=True), f"X {key} {id_}\n".encode())

        deadline = None
        if wait:
            deadline = time.monotonic() + wait + ACQUIRE_GRACE + self._ft + wait / 10
        try:
            a, cn = self._round_trip("A", key, line, deadline=deadline, cancel=cancel, on_abandon=withdraw)
        except _WaitElapsed as e:
            if isinstance(e.last, NoAnswer):
                with self._mu:
                    raise self._unavailable_locked(e.last) from None
            raise _timeout(key, wait) from None
        except _Deadline:
            raise _timeout(key, wait) from None
        if a.kind == "A" and len(a.fields) == 1:
            try:
                return Lock(self, key, int(a.fields[0]), lease_s, limit, id_)
            except ValueError:
                pass
        if a.kind == "T":
            raise _timeout(key, wait)
        raise _bad_answer("acquire", key, cn, a)

    @staticmethod
    def _lease(lease: w.Seconds, op: str, key: str) -> float:
        s = w.seconds(lease, "lease")
        if s is None or s < 0.001 or s > w.MAX_SECONDS:
            raise ValueError(f"{op} {key}: lease {lease!r} is out of range; give at least 0.001 and at most {w.MAX_SECONDS} seconds")
        return s

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
            done = self._collect_release(key, token, calls, at, send)
            if done is not None:
                with self._mu:
                    for cl in calls:
                        if cl.state == 0:
                            cl.state = 2
                if done is True:
                    return
                raise done

    def _collect_release(self, key: str, token: int, calls: List[_Call], at: _Attempt, send: Callable[[], bool]) -> Any:
        for cl in list(calls):
            if cl.state != 1:
                continue
            calls.remove(cl)
            res = cl.result
            if isinstance(res, _Dropped):
                if isinstance(res.err, Closed):
                    return Closed("the lockd client is closed")
                at.fail(cl.conn, cl.gen, res.err)  # type: ignore[arg-type]
                if not calls:
                    send()
                continue
            a, _ = res
            cn = cl.conn
            if a.kind == "R" and len(a.fields) == 1 and a.fields[0] in ("ok", "notheld"):
                with self._mu:
                    self._active = cn.addr  # type: ignore[union-attr]
                if a.fields[0] == "ok":
                    return True
                return _not_held("release", key, token)
            if a.kind == "E":
                return _server_error("R", key, a)
            if a.kind == "M" and len(a.fields) == 1:
                addr = a.fields[0]
                with self._mu:
                    if self._dead_locked(addr):
                        continue
                    self._active = addr
                at.target = addr
                at.moves += 1
                if at.moves <= 2:
                    send()
                continue
            return _bad_answer("release", key, cn, a)
        return None

    def renew(self, key: str, token: int, lease: w.Seconds) -> None:
        """Restarts the lease of a held lock from now. Raises NotHeld when
        the token no longer holds the key."""
        self._renew(key, token, lease, None)

    def _renew(self, key: str, token: int, lease: w.Seconds, deadline: Optional[float]) -> None:
        w.check_key("renew", key)
        token = _token(token)
        lease_ms = max(1, w.millis(self._lease(lease, "renew", key), False))
        b = f"N {key} {token} {w.format_ms(lease_ms)}\n".encode()
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

    def status(self) -> Dict[str, str]:
        """How the node this client talks to (the active when known) sees
        itself and the cluster: the S answer's fields (self, role, active,
        token, ...; peer= words joined by spaces)."""
        a, _ = self._round_trip("S", "-", lambda cn, cl: b"S -\n")
        return w.parse_status(a.fields)

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

    def hold(
        self,
        key: str,
        lease: w.Seconds,
        wait: Optional[w.Seconds] = None,
        limit: Optional[int] = None,
        cancel: Optional[threading.Event] = None,
        max_hold: Optional[w.Seconds] = None,
    ) -> "Hold":
        """Acquires key and keeps it, renewing it in the background every
        third of lease until released, lost, max_hold reached or the client
        closed. Use it as a context manager; the body checks lock.lost (a
        threading.Event) or calls lock.check(), which raises LockLost."""
        from ._hold import Hold

        return Hold._start(self, key, lease, wait, limit, cancel, max_hold, None)

    def election(self, key: str) -> "Election":
        """An election on key: campaign, leader, observe, resign."""
        from ._hold import Election

        w.check_key("election", key)
        return Election(self, key)

    def watch(self, key: str) -> "Watch":
        """Watches key's holders and waiters: iterate the Watch for a
        lockd.Queue now and after every change; close() ends it."""
        w.check_key("watch", key)
        wt = Watch(self, key)
        with self._mu:
            if self._closed:
                raise Closed("the lockd client is closed")
            ws = self._watches.get(key)
            if ws is None:
                ws = self._watches[key] = _WatchState(self, key)
            ws.watchers.append(wt)
            if ws.conn is not None and ws.conn.sock is not None:
                self._send_l_locked(ws, ws.conn)
            else:
                self._subscribe_locked(ws, "")
        return wt

    # -------------------------------------------------------------- watches

    def _send_l_locked(self, ws: "_WatchState", cn: _Conn) -> None:
        cl = _Call("L", ws.key, silent=True)
        self._queue_locked(cn, cl, f"L {ws.key}\n".encode())
        cn.watching.add(ws.key)
        ws.conn = cn
        ws.resubscribe = False

    def _subscribe_locked(self, ws: "_WatchState", addr: str) -> None:
        if self._closed or not ws.watchers:
            return
        for wt in ws.watchers:
            wt._primed = False
        target = addr or self._active
        cands = [c for c in self._conns if c.state == "up" and (not target or c.addr == target)]
        if not cands and target:
            if not any(c.addr == target for c in self._conns) and self._dynamic < MAX_DYNAMIC:
                self._add_conn_locked(target, True)
            elif not self._dead_locked(target):
                for c in self._conns:
                    if c.addr == target and c.state == "down":
                        self._dial_locked(c)
            if not self._dead_locked(target):
                ws.resubscribe = True
                ws.target = target
                return
            cands = [c for c in self._conns if c.state == "up"]
        if not cands:
            ws.resubscribe = True
            ws.target = target
            return
        cn = cands[self._rr % len(cands)]
        self._rr += 1
        self._send_l_locked(ws, cn)

    def _move_watch_locked(self, ws: "_WatchState", addr: str) -> None:
        """Watches again at addr, the active an M named. A node this client
        found silent is a failover the redirecting node has not seen yet:
        ask again a little later (the tick does) instead of at once."""
        if self._dead_locked(addr):
            ws.resubscribe = True
            ws.target = ""
            ws.retry_at = time.monotonic() + 0.1
            return
        self._subscribe_locked(ws, addr)

    def _resubscribe_locked(self) -> None:
        for ws in list(self._watches.values()):
            if ws.resubscribe and ws.conn is None:
                t = ws.target
                ws.target = ""
                self._subscribe_locked(ws, t)

    def _watch_answer_locked(self, cn: _Conn, cl: _Call, a: w.Answer) -> None:
        ws = self._watches.get(cl.key)
        if cl.op == "U":
            return
        if ws is None:
            return
        if a.kind == "M" and a.fields:
            cn.watching.discard(cl.key)
            ws.conn = None
            self._move_watch_locked(ws, a.fields[0])
        elif a.kind == "E":
            cn.watching.discard(cl.key)
            ws.conn = None
            err = _server_error("L", cl.key, a)
            if isinstance(err, Refused) and w.AUTH_FIRST in a.error_text():
                err = AuthError(str(err))
            ws.fail_locked(err)

    def _unwatch_locked(self, wt: "Watch") -> None:
        ws = self._watches.get(wt.key)
        if ws is None or wt not in ws.watchers:
            return
        ws.watchers.remove(wt)
        if ws.watchers:
            return
        del self._watches[wt.key]
        cn = ws.conn
        if cn is not None and cn.sock is not None and wt.key in cn.watching:
            cn.watching.discard(wt.key)
            self._queue_locked(cn, _Call("U", wt.key, silent=True), f"U {wt.key}\n".encode())


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


def _bad_answer(op: str, key: str, cn: Optional[_Conn], a: w.Answer) -> Error:
    where = cn.addr if cn is not None else "a node"
    line = " ".join([a.kind, a.key] + a.fields)
    return Error(f"{op} {key}: {where} answered {line!r}, which this client does not understand; check that client and server versions match")


class _WatchState:
    """One watched key of a client: its watchers and the connection its
    subscription lives on."""

    def __init__(self, client: Client, key: str) -> None:
        self.client = client
        self.key = key
        self.watchers: List["Watch"] = []
        self.conn: Optional[_Conn] = None
        self.resubscribe = False
        self.target = ""
        self.retry_at = 0.0  # when a paced re-subscription is due

    def deliver_locked(self, q: w.Queue, initial: bool) -> None:
        for wt in self.watchers:
            if initial and wt._primed:
                continue
            wt._primed = True
            wt._put(q)

    def fail_locked(self, err: BaseException) -> None:
        for wt in list(self.watchers):
            wt._end(err)
        self.watchers.clear()
        self.client._watches.pop(self.key, None)

    def end_locked(self, why: str) -> None:
        for wt in list(self.watchers):
            wt._end(Closed("the lockd client is closed"))
        self.watchers.clear()


class Watch:
    """A watch of one key. Iterate it for lockd.Queue states: the current
    one first, then one after every change of holders or waiters, also
    across failovers (the state at the new node comes first). Iteration
    ends when the watch or the client is closed; a refusal ends it with
    its error raised."""

    _END = object()

    def __init__(self, client: Client, key: str) -> None:
        self.client = client
        self.key = key
        self._q: Deque[Any] = collections.deque()
        self._cv = threading.Condition()
        self._ended = False
        self.error: Optional[BaseException] = None
        self._primed = False  # it has had the state of the subscription it is on

    def _put(self, q: w.Queue) -> None:
        with self._cv:
            if not self._ended:
                self._q.append(q)
                self._cv.notify_all()

    def _end(self, err: Optional[BaseException]) -> None:
        with self._cv:
            if self._ended:
                return
            self._ended = True
            if not isinstance(err, Closed):
                self.error = err
            self._q.append(self._END)
            self._cv.notify_all()

    def get(self, timeout: Optional[w.Seconds] = None) -> Optional[w.Queue]:
        """The next state, waiting up to timeout seconds (None: forever);
        None on timeout or when the watch ended."""
        t = w.seconds(timeout, "timeout")
        end = None if t is None else time.monotonic() + t
        with self._cv:
            while not self._q:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cv.wait(left)
            item = self._q[0]
            if item is self._END:
                if self.error is not None:
                    raise self.error
                return None
            self._q.popleft()
            return item

    def __iter__(self) -> "Watch":
        return self

    def __next__(self) -> w.Queue:
        q = self.get()
        if q is None:
            raise StopIteration
        return q

    def close(self) -> None:
        """Ends the watch: U is sent when it was the client's last of key."""
        with self.client._mu:
            self.client._unwatch_locked(self)
        self._end(None)

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
