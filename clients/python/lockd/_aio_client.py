"""lockd.AsyncClient: the client for asyncio programs. Its requests are
coroutines on one event loop, its connections asyncio transports; the
rules of the connections (round-robin, failover, redirects, liveness,
release re-sends, watches) are the blocking client's, shared with it."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import ssl
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, Union

from . import _wire as w
from ._aio_acquire import _AsyncAcquires
from ._aio_hold import Acquiring, AsyncElection, AsyncHold, AsyncWatch
from ._aio_pool import _DEADLINE, _ACall, _AsyncPool, _Changed, _settle

# What a release's first send is completed with when it is time to re-send.
_RESEND = object()
from ._client import _configure
from ._conn import DIAL_TIMEOUT, FAILURE_TIMEOUT, MAX_DROPS, REDIAL, RELEASE_EVERY, RELEASE_FOR, _Attempt, _Call, _Conn, _Deadline, _Dropped, _not_held, _server_error
from ._errors import Closed, Error, Unavailable
from ._rules import (
    STATUS_LINE,
    Release,
    dropped_after_send,
    drops_error,
    handoff_answer,
    handoff_line,
    keys_answer,
    keys_line,
    outage_outlasted_wait,
    outage_pause,
    queue_answer,
    queue_line,
    release_line,
    release_word,
    renew_answer,
    renew_late,
    renew_line,
    status_answer,
)
from ._watch import _WatchState


class AsyncClient(_AsyncAcquires, _AsyncPool):
    """A client of the lockd nodes at addrs for asyncio: every request is a
    coroutine, and cancelling the task that awaits it gives it up (a
    waiting acquire is withdrawn from the node's queue with X; a grant
    that crosses it is released).

        async with lockd.AsyncClient("10.0.0.1:7070,10.0.0.2:7070") as client:
            async with client.hold("deploy", lease=30) as lock:
                lock.check()
                await write(fence=lock.token)

    It takes the options of lockd.Client, and has its behaviour. It
    belongs to the event loop it first runs on: use it from that loop's
    tasks (as many as you like), not from other threads or loops. Its
    connections are dialled at the first request (or async with), and
    close() (or leaving async with) ends them."""

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
        self._per_addr = _configure(
            self, addrs, secret, secret_file, role, tls, tls_ca, tls_cert, tls_key, tls_server_name,
            failure_timeout, name, conns_per_addr, redial, release_every, release_for, dial_timeout,
        )
        self._mu = contextlib.nullcontext()
        self._changed = _Changed()
        self._closed = False
        self._started = False
        self._conns: List[_Conn] = []
        self._dynamic = 0
        self._active = ""
        self._rr = 0
        self._ever_up = False
        self._last_err: Optional[BaseException] = None
        self._watches: Dict[str, _WatchState] = {}
        self._holds: Set[AsyncHold] = set()
        self._tasks: Set["asyncio.Task[Any]"] = set()
        self._settling: Set[_Call] = set()
        self._wakes = []
        self._wake_seq = itertools.count()
        self._wake_timer = None
        self._wake_when = 0.0

    def _start(self) -> None:
        """Binds the client to the running loop and dials, the first time."""
        if self._started:
            return
        loop = asyncio.get_running_loop()
        if self._closed:
            raise Closed("the lockd client is closed")
        self._started = True
        self._aloop = loop
        for a in self._addrs:
            for _ in range(self._per_addr):
                self._add_conn_locked(a, False)
        self._spawn(self._ticker())

    async def __aenter__(self) -> "AsyncClient":
        self._start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes every connection. Calls still waiting raise Closed; locks
        still held stay held until their lease ends; holds end with reason
        'closed'. It first waits, a failure timeout at most, for the
        answers to withdrawals of acquires given up and to releases of the
        grants that crossed them, so that the node has them."""
        if not self._started:
            self._closed = True
            return
        await self._shut()

    # ----------------------------------------------------------- round trip

    async def _trip(
        self,
        op: str,
        key: str,
        line: Callable[[_Conn, _Call], Optional[bytes]],
        *,
        resend: bool = True,
        deadline: Optional[float] = None,
        on_abandon: Optional[Callable[[_Call], None]] = None,
        patient: bool = False,
        wait_left: Optional[Callable[[], float]] = None,
    ) -> Tuple[w.Answer, _Conn]:
        """Sends a request and returns its answer, as Client._round_trip:
        moved to another connection when one drops (if resend), M answers
        followed, an outage waited through when patient (until the wait
        runs out, with wait_left). Cancelled, it abandons the call (a
        waiting acquire is withdrawn)."""
        self._start()
        loop = self._aloop
        at = _Attempt(key if op == "A" else "")
        outages = 0
        while True:
            try:
                cn = self._choose_locked(at)
            except Unavailable as e:
                if not self._waits_out_locked(patient, wait_left):
                    raise
                await self._wait_outage(outage_pause(outages, self._redial, wait_left, e), True)
                outages += 1
                at = _Attempt(at.busy_key)
                if wait_left is not None and wait_left() <= 0:
                    raise outage_outlasted_wait(e) from None
                continue
            if cn is None:
                t = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
                if t <= 0:
                    raise _Deadline()
                await self._changed.wait(t)
                continue
            cl = _ACall(op, key)
            b = line(cn, cl)
            if b is None:
                raise at.wait_ran_out()
            fut = cl.fut = loop.create_future()
            if deadline is not None:
                if op == "A":
                    # A bound on a wait the node bounds already: the
                    # ticker's check is soon enough, and costs less.
                    cl.deadline = deadline
                else:
                    # A renewal given up at the end of a hold's lease: on time.
                    self._wake_at(fut, deadline, _DEADLINE)
            self._queue_locked(cn, cl, b)
            if at.moves > 0:
                self._probe_locked(cn, time.monotonic())
            try:
                res = await fut
            except asyncio.CancelledError:
                self._abandon_call_locked(cl, on_abandon)
                raise
            if res is _DEADLINE:
                if cl.state == 0:
                    self._abandon_call_locked(cl, on_abandon)
                    raise _Deadline()
                res = cl.result
            if isinstance(res, _Dropped):
                if isinstance(res.err, Closed):
                    raise Closed("the lockd client is closed")
                at.fail(cn, cl.gen, res.err)
                if not resend:
                    raise dropped_after_send(res.err)
                if at.drops >= MAX_DROPS:
                    err = self._unavailable_locked(drops_error(at.drops, res.err))
                    if self._waits_out_locked(patient, wait_left):
                        await self._wait_outage(outage_pause(outages, self._redial, wait_left, err), False)
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
                pause = self._moved_locked(cn, a, at, landed, patient and wait_left is None)
                if pause:
                    await asyncio.sleep(pause)
                continue
            if a.kind == "E":
                if op == "A" and cl.ref is not None and a.ref is None:
                    # An older lockd, which does not know ref=: ask again without.
                    cn.no_refs = True
                    continue
                raise _server_error(op, key, a)
            if op != "H":
                self._active = cn.addr
            return a, cn

    # ------------------------------------------------------------ requests

    async def release(self, key: str, token: int) -> None:
        """Gives the lock back, so the next waiter is granted at once,
        re-sent every release_every on any live connection until a node
        answers or release_for has passed. Raises NotHeld when the token
        does not hold the key. A cancelled release goes on in the
        background: the lock is handed on all the same."""
        token, line = release_line(key, token)
        if not self._started:
            self._start()
        start = time.monotonic()
        at = _Attempt()
        try:
            cn = self._choose_locked(at)
        except Error:
            cn = None
        if cn is None:
            return await self._release(key, token, line, at, start, None)
        # The usual case, one send answered at once: no closures, no
        # bookkeeping of re-sends.
        cl = _ACall("R", key)
        fut = cl.fut = self._aloop.create_future()
        self._queue_locked(cn, cl, line)
        self._wake_at(fut, start + self._release_every, _RESEND)
        try:
            res = await fut
        except asyncio.CancelledError:
            if cl.state == 0:
                cl.state = 2
            self._spawn(self._release_quietly_async(key, token))
            raise
        if res is not _RESEND and not isinstance(res, _Dropped):
            word = release_word(res[0])
            if word:
                self._active = cn.addr
                if word == "ok":
                    return
                raise _not_held("release", key, token)
        cl.fut = None
        return await self._release(key, token, line, at, start, cl)

    async def _release(self, key: str, token: int, line: bytes, at: _Attempt, start: float, first: Optional[_ACall]) -> None:
        """release, from its first send on (first, if it was sent): re-sent
        every release_every until a node answers or release_for passed."""
        loop = self._aloop
        rl = Release(key, token, self._release_every, self._release_for, start, at)
        kick: List[Optional["asyncio.Future[None]"]] = [None]

        def answered(cl: _Call) -> None:
            f = kick[0]
            if f is not None:
                _settle(f)

        def send() -> bool:
            cn = rl.choose(self._choose_locked, self._ever_up)
            if cn is None:
                return False
            cl = _ACall("R", key)
            cl.on_result = answered
            self._queue_locked(cn, cl, line)
            rl.sent(cl)
            return True

        if first is None:
            send()
        else:
            first.on_result = answered
            rl.calls.append(first)
            rl.sends = 1
        try:
            while True:
                done = self._collect_release(rl, send)
                if done is not None:
                    rl.give_up()
                    if done is True:
                        return
                    raise done
                now = time.monotonic()
                if now >= rl.next_send:
                    if rl.over(now):
                        rl.give_up()
                        raise rl.unavailable(self._unavailable_locked(rl.last))
                    rl.pace(now)
                    send()
                    continue
                if self._closed:
                    raise Closed("the lockd client is closed")
                t = rl.next_send - now
                if rl.waiting:
                    t = min(t, 0.02)
                f: "asyncio.Future[None]" = loop.create_future()
                kick[0] = f
                self._wake_at(f, now + t)
                try:
                    await f
                finally:
                    kick[0] = None
                if rl.waiting and not any(cl.state == 1 for cl in rl.calls):
                    send()
        except asyncio.CancelledError:
            rl.give_up()
            self._spawn(self._release_quietly_async(key, token))
            raise

    async def renew(self, key: str, token: int, lease: w.Seconds) -> None:
        """Restarts the lease of a held lock from now. Raises NotHeld when
        the token no longer holds the key."""
        await self._renew(key, token, lease, None)

    async def _renew(self, key: str, token: int, lease: w.Seconds, deadline: Optional[float], value: str = "") -> None:
        token, b = renew_line(key, token, lease, value)
        try:
            a, cn = await self._trip("N", key, lambda cn, cl: b, deadline=deadline)
        except _Deadline:
            raise renew_late(key, token) from None
        renew_answer(a, cn, key, token)

    async def queue(self, key: str) -> w.Queue:
        """The holders of key and its waiters, in queue order."""
        b = queue_line(key)
        a, cn = await self._trip("Q", key, lambda cn, cl: b)
        return queue_answer(a, cn, key)

    async def keys(self, pattern: str = "*") -> Tuple[List[str], int]:
        """The keys held or waited on that pattern selects ('*' all, 'pre*'
        a prefix, else that key), sorted, at most 1000; and how many match."""
        b = keys_line(pattern)
        a, cn = await self._trip("K", pattern, lambda cn, cl: b)
        return keys_answer(a, cn, pattern)

    async def status(self) -> w.Status:
        """How the node this client talks to sees itself and the cluster,
        as Client.status."""
        a, cn = await self._trip("S", "-", lambda cn, cl: STATUS_LINE)
        return status_answer(a, cn)

    async def handoff(self, to: str = "") -> str:
        """Asks the active node to hand its role over (to its successor, or
        to the node at to); returns the new active's address. Needs the
        admin role. Not re-sent after a drop: it may have happened."""
        b = handoff_line(to)
        a, cn = await self._trip("H", "-", lambda cn, cl: b, resend=False)
        self._active = handoff_answer(a, cn)
        return self._active

    # --------------------------------------------- holds, elections, watches

    def hold(
        self,
        key: str,
        lease: w.Seconds,
        wait: Optional[w.Seconds] = None,
        limit: Optional[int] = None,
        max_hold: Optional[w.Seconds] = None,
        *,
        shared: bool = False,
    ) -> Acquiring[AsyncHold]:
        """Acquires key and keeps it, renewing it every third of lease until
        released, lost, max_hold reached or the client closed: async with
        client.hold(...) as lock, or hold = await client.hold(...). The
        body checks lock.check() (raises LockLost) or awaits lock.lost.
        Cancelling the awaiting task withdraws the waiter. shared=True
        holds key as a reader (see acquire)."""
        return Acquiring(lambda: AsyncHold._start(self, key, lease, wait, limit, max_hold, None, shared=shared), AsyncHold._exit)

    def election(self, key: str) -> AsyncElection:
        """An election on key: campaign, leader, observe, resign."""
        w.check_key("election", key)
        return AsyncElection(self, key)

    def watch(self, key: str) -> AsyncWatch:
        """Watches key's holders and waiters: async for over the AsyncWatch
        yields a lockd.Queue now and after every change; close() ends it.
        Call it from a coroutine of the client's loop."""
        w.check_key("watch", key)
        self._start()
        wt = AsyncWatch(self, key)
        ws = self._watches.get(key)
        if ws is None:
            ws = self._watches[key] = _WatchState(self, key)  # type: ignore[arg-type]
        ws.watchers.append(wt)  # type: ignore[arg-type]
        if ws.conn is not None and ws.conn.sock is not None:
            self._send_l_locked(ws, ws.conn)
        else:
            self._subscribe_locked(ws, "")
        return wt
