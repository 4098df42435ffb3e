"""The client's I/O: one background thread per Client owns every
socket (a selectors loop that reads, matches each answer to its call and
wakes its caller, and writes what a caller's own write could not
finish), dials in short-lived threads, watches each connection's
liveness, and picks the connection for each send."""

from __future__ import annotations

import collections
import selectors
import socket
import ssl
import threading
import time
from typing import Any, Callable, List, Optional, Tuple

from . import _wire as w
from ._auth import NoAnswer, open_conn
from ._choose import _Choose
from ._conn import _MOVABLE, MAX_DYNAMIC, _Attempt, _bad_answer, _Call, _Conn, _dial_error, _Dropped, _not_held, _orphan_grants, _server_error
from ._errors import AuthError, Closed, Error, Unavailable
from ._rules import Release, moved_to, release_word


class _Loop(_Choose):
    """The connection pool and its I/O thread, a part of Client."""

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
            err = _dial_error(cn.addr, e)
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
            ws.check_stale_locked(now, ft)
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
        # One buffer for every read of the client: a fresh bytes object per
        # recv costs an allocation (at 256 KiB, an mmap and munmap) for the
        # few dozen bytes an answer usually is.
        mem = self._rmem
        while True:
            try:
                n = sock.recv_into(mem)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                break
            except ssl.SSLWantWriteError:
                break
            except OSError as e:
                self._down_locked(cn, ConnectionError(f"connection to {cn.addr} lost: {e}"))
                return
            if not n:
                self._down_locked(cn, ConnectionError(f"connection to {cn.addr} lost: the node closed it"))
                return
            cn.rbuf += mem[:n]
            got = True
            if not isinstance(sock, ssl.SSLSocket) and n < len(mem):
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
                    ws.lost_locked()
                    self._move_watch_locked(ws, a.fields[0])
                return None
            if a.kind == "E":
                return Error(f"{cn.addr} sent an error that matches no request: E {a.key} {a.error_text()}")
            return None
        landed = cn.answered > cl.seq
        cn.answered = max(cn.answered, cl.seq)
        cl.answered = True
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
        self._wake_caller_locked(cl)

    def _wake_caller_locked(self, cl: _Call) -> None:
        """Tells the caller waiting for cl that its result is in."""
        cl.done.release()
        if cl.kick is not None:
            cl.kick.set()

    def _orphan_locked(self, cl: _Call, a: w.Answer) -> None:
        """A grant that came after its caller gave up is released at once,
        so that an abandoned acquire leaks no lock: first on the connection
        it came on, from this thread, which is written before anything the
        caller does next (its process may be exiting: a KeyboardInterrupt);
        then by a release of its own, which re-sends it if that is lost."""
        if self._closed:
            return
        cn = cl.conn
        for key, token in _orphan_grants(cl, a):
            if cn is not None and cn.sock is not None:
                self._settle_locked(cn, _Call("R", key, silent=True), f"R {key} {token}\n".encode())
            threading.Thread(target=self._release_quietly, args=(key, token), daemon=True).start()

    def _settle_locked(self, cn: _Conn, cl: _Call, line: bytes) -> None:
        """Sends a request that puts the node right after a caller gave up
        (a withdraw, the release of a grant nobody took): close() waits a
        moment for its answer, so that the node has it before the
        connection closes."""
        cl.state = 2
        self._queue_locked(cn, cl, line)
        self._settling.add(cl)

    def _settled_locked(self) -> bool:
        """Whether every request of _settle_locked was answered, or lost
        with its connection."""
        for cl in list(self._settling):
            cn = cl.conn
            if cl.answered or cn is None or cn.sock is None or cn.gen != cl.gen:
                self._settling.discard(cl)
        return not self._settling

    def _release_quietly(self, key: str, token: int) -> None:
        try:
            self.release(key, token)
        except Error:
            pass

    def _queue_locked(self, cn: _Conn, cl: _Call, line: bytes) -> None:
        self._enqueue_locked(cn, cl, line)
        if threading.current_thread() is self._thread:
            # Written once this round of the loop is over, with the rest.
            self._dirty.add(cn)
        elif not cn.want_write:
            # The caller writes its own line: handing it to the I/O thread
            # would cost a thread switch per request, which is most of
            # what a request costs in Python. What the socket does not
            # take now, the I/O thread writes when it can.
            self._flush_locked(cn)

    def _enqueue_locked(self, cn: _Conn, cl: _Call, line: bytes) -> None:
        """Records cl as waiting for its answer on cn and adds its line to
        what cn has to write."""
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
            self._close_sock_locked(cn)
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
                ws.lost_locked()
                ws.resubscribe = True
        if was_up or watching:
            self._resubscribe_locked()
        self._changed.notify_all()

    def _close_sock_locked(self, cn: _Conn) -> None:
        try:
            self._sel.unregister(cn.sock)
        except (KeyError, ValueError):
            pass
        try:
            cn.sock.close()
        except OSError:
            pass

    @property
    def min_hold_lease(self) -> float:
        """The shortest lease hold() and campaign() take, in seconds: twice
        failure_timeout. A held lock stays held only while a renewal lands
        within each lease; when the active node fails, the client notices
        within about a failure timeout, the cluster promotes another node
        within about one, and the renewal must reach it before the lease
        ends. A shorter lease is lost in any failover."""
        return 2 * self._ft

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
        # Hex while it fits the 13 characters an id leaves it (4.5e15
        # acquires), base 36 after: format() costs less than base36().
        return prefix + "-" + (format(n, "x") if n < 0x10000000000000 else w.base36(n))

    def _collect_release(self, rl: Release, send: Callable[[], bool]) -> Any:
        """Takes the answers in to rl's sends: True when the release is
        done, the error it ends with, or None to wait on."""
        calls, key, token = rl.calls, rl.key, rl.token
        for cl in list(calls):
            if cl.state != 1:
                continue
            calls.remove(cl)
            res = cl.result
            if isinstance(res, _Dropped):
                if isinstance(res.err, Closed):
                    return Closed("the lockd client is closed")
                rl.at.fail(cl.conn, cl.gen, res.err)  # type: ignore[arg-type]
                if not calls:
                    send()
                continue
            a, _ = res
            cn = cl.conn
            word = release_word(a)
            if word:
                with self._mu:
                    self._active = cn.addr  # type: ignore[union-attr]
                if word == "ok":
                    return True
                return _not_held("release", key, token)
            if a.kind == "E":
                return _server_error("R", key, a)
            if a.kind == "M" and len(a.fields) == 1:
                addr = a.fields[0]
                with self._mu:
                    if self._stale_locked(addr):
                        rl.soon()
                        continue
                    self._active = addr
                rl.at.target = addr
                rl.at.moves += 1
                if rl.at.moves <= 2:
                    send()
                continue
            return _bad_answer("release", key, cn, a)
        return None

    def _moved_locked(self, cn: _Conn, a: w.Answer, at: _Attempt, landed: bool, forever: bool) -> float:
        """Follows an M answer to a call: the pause before asking again, or
        an error. forever: an acquire that waits until cancelled, which
        keeps asking while the node named stays silent."""
        addr = moved_to(cn, a)
        if landed:
            at.moves = 0
        if self._stale_locked(addr):
            # The node named stopped answering this client: either the one
            # that named it has not noticed yet that it failed (a failover
            # under way), or it is back (restarted, resumed) and took its
            # role again. _stale_locked dialled it; ask again shortly, which
            # finds it if it is back, or the node that took over.
            now = time.monotonic()
            if not at.stale_since:
                at.stale_since = now
            if not forever and now - at.stale_since > 10 * self._ft:
                raise self._unavailable_locked(Error(f"{cn.addr} still names {addr} as the active node, {self._silence_locked(addr)}: no other node took over"))
            at.stale += 1
            at.target = ""
            return min(at.stale * 0.025, 0.1)
        at.stale_since = 0.0
        self._active = addr
        return at.redirected(cn.addr, addr, 3 * self._ft)

    def _abandon_call_locked(self, cl: _Call, on_abandon: Optional[Callable[[_Call], None]]) -> None:
        """The caller of cl is gone (an interrupt, its task cancelled): a
        waiting acquire is withdrawn, a grant that came (answered, not yet
        returned) is given back."""
        if cl.state == 0:
            cl.state = 2
            if on_abandon is not None:
                on_abandon(cl)
        elif cl.state == 1 and not isinstance(cl.result, _Dropped):
            cl.state = 2
            self._orphan_locked(cl, cl.result[0])
