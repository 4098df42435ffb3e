"""The asyncio client's connections. Each is an asyncio transport on the
loop the client first ran on; every rule of the pool (choosing a
connection, matching answers, liveness, redials, watches that follow the
active node) is the blocking client's own code (_Loop, _Watches), run on
the event loop instead of an I/O thread: one thread, so no lock."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import ssl
import time
from typing import TYPE_CHECKING, Any, Callable, Coroutine, List, Optional, Set, Tuple

from . import _wire as w
from ._auth import NoAnswer, handshake, silent_hello
from ._conn import _Call, _Conn, _dial_error, _orphan_grants
from ._errors import AuthError, Closed, Error
from ._loop import _Loop
from ._watch import _Watches

if TYPE_CHECKING:
    from ._aio_hold import AsyncHold


class _ACall(_Call):
    """A call of the asyncio client: its answer completes fut, or, for a
    release's sends, calls on_result."""

    __slots__ = ("fut", "on_result", "deadline")

    def __init__(self, op: str, key: str, silent: bool = False) -> None:
        # No threading.Lock per call, unlike _Call: nobody blocks on one.
        self.op = op
        self.key = key
        self.ref: Optional[str] = None
        self.seq = 0
        self.conn: Optional[_Conn] = None
        self.gen = 0
        self.result: Any = None
        self.state = 0  # 0 waiting, 1 answered, 2 abandoned
        self.silent = silent
        self.kick = None
        self.acq_id = ""
        self.answered = False
        self.more: Tuple[str, ...] = ()
        self.fut: Optional["asyncio.Future[Any]"] = None
        self.on_result: Optional[Callable[[_Call], None]] = None
        # When the caller stops waiting for the answer (time.monotonic()):
        # the ticker completes fut with _DEADLINE then.
        self.deadline: Optional[float] = None


# What a call's future is completed with when its deadline passed.
_DEADLINE = object()


class _Changed:
    """What the blocking client's condition variable is to its callers:
    notify_all() wakes every coroutine in wait()."""

    def __init__(self) -> None:
        self._waiters: List["asyncio.Future[None]"] = []

    def notify_all(self) -> None:
        ws, self._waiters = self._waiters, []
        for f in ws:
            if not f.done():
                f.set_result(None)

    async def wait(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        f: "asyncio.Future[None]" = loop.create_future()
        self._waiters.append(f)
        h = loop.call_later(max(0.0, timeout), _settle, f)
        try:
            await f
        finally:
            h.cancel()
            if f in self._waiters:
                self._waiters.remove(f)


def _settle(f: "asyncio.Future[Any]", value: Any = None) -> None:
    if not f.done():
        f.set_result(value)


class _Proto(asyncio.Protocol):
    """One connection's transport callbacks. Until the connection is set
    up (TLS, the secret, the first S -) lines are kept for the dialler;
    then every byte goes to the pool's matcher."""

    def __init__(self, client: "_AsyncPool", cn: _Conn) -> None:
        self.client = client
        self.cn = cn
        self.tr: Optional[asyncio.Transport] = None
        self.live = False
        self.buf = bytearray()
        self.err: Optional[BaseException] = None
        self.waiter: Optional["asyncio.Future[None]"] = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.live:
            cn = self.cn
            cn.rbuf += data
            cn.last_read = time.monotonic()
            self.client._lines_locked(cn)
            return
        self.buf += data
        self._wake()

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        if self.live:
            cn = self.cn
            if cn.sock is self.tr and self.tr is not None:
                why = f"{exc}" if exc is not None else "the node closed it"
                self.client._down_locked(cn, ConnectionError(f"connection to {cn.addr} lost: {why}"))
            return
        self.err = ConnectionError("the node closed the connection")
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None:
            _settle(self.waiter)

    async def line(self, timeout: float, what: str) -> bytes:
        """The next line read during set-up, within timeout seconds."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                out = bytes(self.buf[: i + 1])
                del self.buf[: i + 1]
                return out
            if self.err is not None:
                raise self.err
            if len(self.buf) > w.MAX_ANSWER_LEN:
                raise Error("the node sent a line longer than 1 MiB; check that a lockd node, not another service, listens there")
            left = end - loop.time()
            if left <= 0:
                raise NoAnswer(what)
            self.waiter = loop.create_future()
            h = loop.call_later(left, _settle, self.waiter)
            try:
                await self.waiter
            finally:
                h.cancel()
                self.waiter = None


class _AsyncPool(_Watches, _Loop):
    """The blocking client's pool, with asyncio I/O. Its fields are set by
    AsyncClient."""

    _aloop: asyncio.AbstractEventLoop
    _tasks: Set["asyncio.Task[Any]"]
    _holds: Set["AsyncHold"]
    # Futures to complete at a time, soonest first, and the one loop timer
    # that serves them all: a timer of the loop per request would cost
    # more than the rest of a release.
    _wakes: List[Tuple[float, int, "asyncio.Future[Any]", Any]]
    _wake_seq: "itertools.count[int]"
    _wake_timer: Optional[asyncio.TimerHandle]
    _wake_when: float

    def _wake_at(self, fut: "asyncio.Future[Any]", when: float, value: Any = None) -> None:
        """Completes fut with value at when (on time.monotonic()'s clock),
        unless it is done by then."""
        heapq.heappush(self._wakes, (when, next(self._wake_seq), fut, value))
        if self._wake_timer is None or when < self._wake_when:
            self._arm_wakes(when)

    def _arm_wakes(self, when: float) -> None:
        if self._wake_timer is not None:
            self._wake_timer.cancel()
        self._wake_when = when
        self._wake_timer = self._aloop.call_later(max(0.0, when - time.monotonic()), self._fire_wakes)

    def _fire_wakes(self) -> None:
        self._wake_timer = None
        h = self._wakes
        now = time.monotonic()
        while h and (h[0][0] <= now or h[0][2].done()):
            _, _, f, v = heapq.heappop(h)
            if not f.done():
                f.set_result(v)
        if h:
            self._arm_wakes(h[0][0])

    def _expire_calls(self, now: float) -> None:
        """Completes with _DEADLINE the calls whose deadline passed. Run by
        the ticker: a deadline bounds a wait the node bounds already, so a
        tick late is soon enough."""
        for cn in self._conns:
            for cl in list(cn.refs.values()):
                if isinstance(cl, _ACall) and cl.deadline is not None and now >= cl.deadline and cl.fut is not None:
                    _settle(cl.fut, _DEADLINE)
            for q in list(cn.pending.values()):
                for cl in q:
                    if isinstance(cl, _ACall) and cl.deadline is not None and now >= cl.deadline and cl.fut is not None:
                        _settle(cl.fut, _DEADLINE)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> "asyncio.Task[Any]":
        """Runs coro in a task the client keeps a reference to (the loop
        keeps only a weak one)."""
        t = self._aloop.create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return t

    # Hooks of _Loop: what its rules do to sockets and threads, on the loop.

    def _wake(self) -> None:
        pass

    def _dial_locked(self, cn: _Conn) -> None:
        cn.state = "dialing"
        self._spawn(self._dial(cn))

    async def _dial(self, cn: _Conn) -> None:
        proto = _Proto(self, cn)
        err: Optional[BaseException] = None
        host, port = w.host_port(cn.addr)
        try:
            try:
                await asyncio.wait_for(
                    self._aloop.create_connection(
                        lambda: proto,
                        host,
                        port,
                        ssl=self._tls,
                        server_hostname=(self._server_name or host) if self._tls is not None else None,
                    ),
                    self._dial_timeout,
                )
            except asyncio.TimeoutError:
                raise NoAnswer(f"{cn.addr} did not take the connection (or finish TLS) within {self._dial_timeout:g}s") from None
            except ssl.SSLError as e:
                raise AuthError(f"{cn.addr}: TLS failed: {e}; check --tls-ca, the certificates and the server name") from None
            tr = proto.tr
            assert tr is not None
            try:
                if self._secret is not None:
                    steps = handshake(self._role, self._secret, cn.addr)
                    out = next(steps)
                    while True:
                        tr.write(out)
                        line = await proto.line(self._dial_timeout, f"{cn.addr} took the connection but did not answer the authentication within {self._dial_timeout:g}s")
                        try:
                            out = steps.send(line)
                        except StopIteration:
                            break
                tr.write(b"S -\n")
                line = await proto.line(self._ft, silent_hello(cn.addr, self._ft, self._tls is None))
                if not (line.startswith(b"S ") or line.startswith(b"E ")):
                    raise Error(f"{cn.addr} answered {line[:64]!r} to a status request; check that a lockd node, not another service, listens there")
            except BaseException:
                tr.close()
                raise
        except (AuthError, NoAnswer) as e:
            err = e
        except asyncio.CancelledError:
            raise
        except (OSError, Error) as e:
            err = _dial_error(cn.addr, e)
        if self._closed:
            if proto.tr is not None:
                proto.tr.close()
            return
        if err is not None:
            cn.state = "down"
            cn.last_err = err
            self._last_err = err
            cn.redial_at = time.monotonic() + self._redial
            self._changed.notify_all()
            return
        cn.sock = proto.tr
        cn.gen += 1
        cn.state = "up"
        cn.last_err = None
        cn.dead_err = None
        cn.probes = 0
        cn.want_write = False
        cn.rbuf = bytearray(proto.buf)
        cn.last_read = time.monotonic()
        proto.live = True
        self._ever_up = True
        if cn.rbuf:
            self._lines_locked(cn)
        self._changed.notify_all()
        self._resubscribe_locked()

    def _close_sock_locked(self, cn: _Conn) -> None:
        cn.sock.close()

    def _queue_locked(self, cn: _Conn, cl: _Call, line: bytes) -> None:
        self._enqueue_locked(cn, cl, line)
        if not cn.want_write:
            # One write per connection per turn of the loop, whatever
            # number of tasks sent in it.
            cn.want_write = True
            self._aloop.call_soon(self._flush_locked, cn)

    def _flush_locked(self, cn: _Conn) -> None:
        cn.want_write = False
        tr = cn.sock
        if tr is None or not cn.wbuf:
            return
        # The transport may keep the object it was given (TLS does): hand
        # it this buffer and start another.
        data, cn.wbuf = cn.wbuf, bytearray()
        tr.write(data)

    def _wake_caller_locked(self, cl: _Call) -> None:
        assert isinstance(cl, _ACall)
        if cl.fut is not None:
            _settle(cl.fut, cl.result)
        elif cl.on_result is not None:
            cl.on_result(cl)

    def _orphan_locked(self, cl: _Call, a: w.Answer) -> None:
        """A grant whose caller is gone (its task cancelled) goes back at
        once: a release on the connection it came on, then one of its own
        that is re-sent if that is lost."""
        if self._closed:
            return
        cn = cl.conn
        for key, token in _orphan_grants(cl, a):
            if cn is not None and cn.sock is not None:
                self._settle_locked(cn, _ACall("R", key, silent=True), f"R {key} {token}\n".encode())
            self._spawn(self._release_quietly_async(key, token))

    async def _release_quietly_async(self, key: str, token: int) -> None:
        with contextlib.suppress(Error):
            await self.release(key, token)

    async def release(self, key: str, token: int) -> None:
        raise NotImplementedError

    async def _ticker(self) -> None:
        tick = min(max(self._ft / 10, 0.001), 0.1)
        while not self._closed:
            await asyncio.sleep(tick)
            if not self._closed:
                now = time.monotonic()
                self._tick_locked(now)
                self._expire_calls(now)

    async def _wait_outage(self, pause: float, early: bool) -> None:
        end = time.monotonic() + pause
        while not self._closed and not (early and self._any_up_locked()):
            left = end - time.monotonic()
            if left <= 0:
                return
            await self._changed.wait(left)

    async def _shut(self) -> None:
        """Ends the pool: waits a failure timeout at most for the answers
        to withdrawals and to releases of grants nobody took, then closes
        every connection; calls still waiting raise Closed."""
        end = time.monotonic() + self._ft
        while not self._closed and not self._settled_locked() and time.monotonic() < end:
            await asyncio.sleep(0.01)
        if self._closed:
            return
        self._closed = True
        for h in list(self._holds):
            h._closed()
        for cn in self._conns:
            self._down_locked(cn, Closed("the lockd client is closed"))
        for ws in list(self._watches.values()):
            ws.end_locked("closed")
        self._watches.clear()
        self._changed.notify_all()
        me = asyncio.current_task()
        for t in list(self._tasks):
            if t is not me:
                t.cancel()
