"""What AsyncClient's calls give: locks, holds that renew themselves and
signal their loss, elections and watches, for asyncio."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Generator, Generic, List, Optional, Tuple, TypeVar

from . import _wire as w
from ._conn import _hold_terms
from ._errors import Closed, Error, LockLost, LostReason, NotHeld, Refused, Unavailable
from ._hold import Election, Leader
from ._holding import _HoldRules, renew_retry
from ._rules import hold_exit_raises, lock_exit_raises
from ._watch import _WatcherRules

if TYPE_CHECKING:
    from ._aio_client import AsyncClient

T = TypeVar("T")


class Acquiring(Generic[T]):
    """An acquire under way: await it for its result, or use it with async
    with, which gives the result and gives the lock back at the end of the
    block. client.acquire, try_acquire, hold and Election.campaign return
    one:

        lock = await client.acquire("report", lease=30)
        async with client.hold("deploy", lease=30) as lock:
            ...

    Nothing is sent until it is awaited or entered."""

    __slots__ = ("_make", "_exit", "_res")

    def __init__(
        self,
        make: Callable[[], Awaitable[T]],
        exit: Callable[[T, Optional[BaseException]], Awaitable[None]],
    ) -> None:
        self._make = make
        self._exit = exit
        self._res: Optional[T] = None

    def __await__(self) -> Generator[Any, None, T]:
        return self._make().__await__()

    async def __aenter__(self) -> T:
        res = await self._make()
        self._res = res
        return res

    async def __aexit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> None:
        res, self._res = self._res, None
        await self._exit(res, exc)  # type: ignore[arg-type]


class AsyncLock:
    """A granted lock, or one place of a semaphore, of an AsyncClient. token
    is its fencing token: hand it to the protected resource, which refuses
    tokens smaller than the largest it has seen. shared says it is held
    as a reader; place is the semaphore place the node granted (None when
    it named none)."""

    def __init__(
        self, client: "AsyncClient", key: str, token: int, lease: float, limit: int, id_: str, place: Optional[int] = None, shared: bool = False
    ) -> None:
        self.client: AsyncClient = client
        self.key: str = key
        self.token: int = token
        self.lease: float = lease
        self.limit: int = limit
        self.id: str = id_
        self.place: Optional[int] = place
        self.shared: bool = shared

    async def release(self) -> None:
        """Gives the lock back; the next waiter is granted at once."""
        await self.client.release(self.key, self.token)

    async def renew(self, lease: Optional[w.Seconds] = None) -> None:
        """Restarts the lease from now (the lease it was acquired with by default)."""
        await self.client.renew(self.key, self.token, self.lease if lease is None else lease)

    async def __aenter__(self) -> "AsyncLock":
        return self

    async def __aexit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> None:
        await AsyncLock._exit(self, exc)

    @staticmethod
    async def _exit(lock: "AsyncLock", exc: Optional[BaseException]) -> None:
        try:
            await lock.release()
        except Error as e:
            if lock_exit_raises(e, exc is not None):
                raise

    @staticmethod
    async def _exit_optional(lock: Optional["AsyncLock"], exc: Optional[BaseException]) -> None:
        if lock is not None:
            await AsyncLock._exit(lock, exc)

    def __repr__(self) -> str:
        return f"<lockd.AsyncLock key={self.key!r} token={self.token}>"


class AsyncHold(_HoldRules):
    """A lock held for a block of code, renewed by a task of the client
    every third of its lease; as lockd.Hold, for asyncio.

    lost is an asyncio.Event, set the moment the lock can no longer be
    proven held; reason says why ('expired', 'notheld', 'max',
    'released', 'closed'). check() raises LockLost once it is, reading the
    clock itself. A body that waits for something waits on lost beside it
    (asyncio.wait), or checks between steps."""

    reason: Optional[LostReason]
    error: Optional[LockLost]

    def __init__(self, client: "AsyncClient", lock: AsyncLock, lease: float, cap_at: Optional[float]) -> None:
        super().__init__(lock, lease, cap_at)
        self.client: AsyncClient = client
        self.lost: asyncio.Event = asyncio.Event()
        # Called once the hold ends (a set's).
        self._on_end: Optional[Callable[["AsyncHold"], None]] = None
        self._task: Optional["asyncio.Task[Any]"] = None

    @classmethod
    async def _start(
        cls,
        client: "AsyncClient",
        key: str,
        lease: w.Seconds,
        wait: Optional[w.Seconds],
        limit: Optional[int],
        max_hold: Optional[w.Seconds],
        name: Optional[str],
        shared: bool = False,
        value: str = "",
    ) -> "AsyncHold":
        lease_s, cap, first = cls._terms(client, key, lease, max_hold)
        asked = time.monotonic()  # the lease cannot have started before
        lock = await client._acquire(key, lease_s, w.seconds(wait, "wait") or 0.0, limit, name, first_lease=first, shared=shared, value=value)
        return (await cls._begin(client, [lock], lease_s, cap, first, asked))[0]

    @staticmethod
    def _terms(client: "AsyncClient", key: str, lease: w.Seconds, max_hold: Optional[w.Seconds]) -> Tuple[float, Optional[float], float]:
        """A hold's lease and max_hold in seconds, checked, and its first lease."""
        return _hold_terms(key, lease, max_hold, client.min_hold_lease, client._ft)

    @classmethod
    async def _begin(
        cls, client: "AsyncClient", locks: List[AsyncLock], lease_s: float, cap: Optional[float], first: float, asked: float
    ) -> List["AsyncHold"]:
        """Holds for locks granted together (one, or a set's), renewing.
        Without them for the caller (an error, its task cancelled), every
        lock goes back rather than stay held for its lease."""
        holds: List[AsyncHold] = []
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
                    start = await h._confirm(first, got)
                starts.append(start)
            if client._closed:
                raise Closed("the lockd client is closed")
            client._holds.update(holds)
            for h, start in zip(holds, starts):
                h._expires = start + first
                h._task = client._spawn(h._renew_loop(start))
            return holds
        except BaseException:
            client._holds.difference_update(holds)
            for lock in locks:
                client._spawn(client._release_quietly_async(lock.key, lock.token))
            raise

    async def _confirm(self, lease: float, got: float) -> float:
        end = got + lease
        while True:
            sent = time.monotonic()
            if sent >= end:
                raise self._unconfirmed()
            try:
                await self.client._renew(self.key, self.token, lease, end)
                return sent
            except NotHeld as e:
                raise self._not_held(e) from None
            except (Unavailable, Refused):
                await asyncio.sleep(renew_retry(lease))

    def _expire(self) -> None:
        if time.monotonic() < self._expires:
            return
        err = self._expiry(time.monotonic())
        self._end(err.reason or "expired", err)

    def _end(self, reason: LostReason, err: LockLost) -> None:
        if self.lost.is_set():
            return
        self.reason = reason
        self.error = err
        self.lost.set()
        t = self._task
        if t is not None and t is not asyncio.current_task():
            t.cancel()
        self.client._holds.discard(self)
        if self._on_end is not None:
            self._on_end(self)

    def _closed(self) -> None:
        self._end("closed", self._closed_loss())

    async def _renew_loop(self, start: float) -> None:
        """Renews every third of the lease, retries a failed renewal soon,
        and ends the hold the moment the lease the last acknowledged
        renewal started is over; a renewal in flight is given up then."""
        every, retry = self.lease / 3, renew_retry(self.lease)
        nxt = start + every
        while True:
            end = self._expires
            await asyncio.sleep(max(0.0, min(nxt, end) - time.monotonic()))
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
                await self.client._renew(self.key, self.token, lease, end)
            except Error as e:
                lost = self._renew_loss(e)
                if lost is None:
                    nxt = time.monotonic() + retry
                    continue
                self._end(lost.reason or "notheld", lost)
                return
            self._expires = now + lease
            nxt = now + every

    @property
    def expires(self) -> float:
        """When the lease the last acknowledged renewal started ends, on
        time.monotonic()'s clock."""
        return self._expires

    def check(self) -> None:
        """Raises LockLost when the lock is lost or no longer provably held,
        reading the clock itself (as Hold.check)."""
        if not self.lost.is_set() and time.monotonic() >= self._expires:
            self._expire()
        if self.error is not None:
            raise self.error

    async def release(self) -> None:
        """Stops renewing and gives the lock back. Raises NotHeld or
        Unavailable only while the hold counted as held: after a loss it
        raises nothing (as Hold.release)."""
        if self._released:
            return
        self._released = True
        if not self.lost.is_set() and time.monotonic() >= self._expires:
            self._expire()
        was_lost = self.lost.is_set()
        self._end("released", self._released_loss())
        if was_lost:
            if self._quiet_release_due():
                await self.client._release_quietly_async(self.key, self.token)
            return
        await self.client.release(self.key, self.token)

    async def __aenter__(self) -> "AsyncHold":
        return self

    async def __aexit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> None:
        await AsyncHold._exit(self, exc)

    @staticmethod
    async def _exit(h: "AsyncHold", exc: Optional[BaseException]) -> None:
        was_lost = h.lost.is_set()
        try:
            await h.release()
        except Error as e:
            if hold_exit_raises(e, exc is not None, was_lost):
                raise

    def __repr__(self) -> str:
        return f"<lockd.AsyncHold key={self.key!r} token={self.token} lost={self.lost.is_set()}>"


class AsyncElection:
    """Leader election on one key, as lockd.Election, for asyncio."""

    def __init__(self, client: "AsyncClient", key: str) -> None:
        self.client: AsyncClient = client
        self.key: str = key
        self._hold: Optional[AsyncHold] = None

    def campaign(self, value: str, lease: w.Seconds = 10.0) -> Acquiring[AsyncHold]:
        """Waits until this client leads with value (1 to 1024 bytes of
        UTF-8), then gives the leader's AsyncHold (its lost event says
        leadership ended): await it, or async with it, which resigns at
        the end. Cancelling the awaiting task withdraws the candidate."""
        enc = w.encode_value(f"campaign {self.key}", value)

        async def run() -> AsyncHold:
            c = self.client
            h: Optional[AsyncHold] = None
            if not c._values_refused:
                try:
                    h = await AsyncHold._start(c, self.key, lease, None, None, None, None, value=enc)
                except Refused as e:
                    if not Election._old_server(e, value):
                        raise
                    c._values_refused = True
            if h is None:
                h = await AsyncHold._start(c, self.key, lease, None, None, None, value)
            self._hold = h
            return h

        return Acquiring(run, AsyncHold._exit)

    async def proclaim(self, value: str) -> None:
        """Changes the leader's value without giving leadership up, as
        Election.proclaim: raises NotHeld when this election does not
        lead, LockLost when leadership was lost, Refused when the node
        does not take values."""
        enc = w.encode_value(f"proclaim {self.key}", value)
        h = self._hold
        if h is None:
            raise NotHeld(f"proclaim {self.key}: this election does not lead; campaign first")
        h.check()
        sent = time.monotonic()
        try:
            await self.client._renew(self.key, h.token, h.lease, h.expires, enc)
        except NotHeld as e:
            h._end("notheld", h._not_held(e))
            h.check()
        h._expires = max(h._expires, sent + h.lease)

    async def leader(self) -> Leader:
        """The current leader: (value, token), (None, None) when none."""
        return Election._leader_of(await self.client.queue(self.key))

    def observe(self) -> "AsyncObserver":
        """The leader now and at every change of leader: async for over the
        AsyncObserver for Leader pairs, as Election.observe."""
        return AsyncObserver(self.client.watch(self.key))

    async def resign(self) -> None:
        """Gives leadership up, if this election object holds it; after a
        loss of leadership it raises nothing."""
        h, self._hold = self._hold, None
        if h is not None:
            await h.release()


class AsyncWatch(_WatcherRules):
    """A watch of one key of an AsyncClient, as lockd.Watch: async for over
    it yields lockd.Queue states, the current one first, then one after
    every change, across failovers; stale ones (Queue.stale) when it lost
    the cluster. Iteration ends when the watch or the client is closed; a
    refusal ends it with its error raised."""

    def __init__(self, client: "AsyncClient", key: str) -> None:
        super().__init__(key)
        self.client: AsyncClient = client
        self._waiter: Optional["asyncio.Future[None]"] = None

    def _put(self, q: w.Queue) -> None:
        if self._push(q):
            self._wake()

    def _end(self, err: Optional[BaseException]) -> None:
        if self._finish(err):
            self._wake()

    def _wake(self) -> None:
        f = self._waiter
        if f is not None and not f.done():
            f.set_result(None)

    async def get(self, timeout: Optional[w.Seconds] = None) -> Optional[w.Queue]:
        """The next state, waiting up to timeout seconds (None: forever);
        None on timeout or when the watch ended."""
        t = w.seconds(timeout, "timeout")
        loop = asyncio.get_running_loop()
        end = None if t is None else loop.time() + t
        while not self._q:
            f: "asyncio.Future[None]" = loop.create_future()
            self._waiter = f
            h = None if end is None else loop.call_later(max(0.0, end - loop.time()), _wake_future, f)
            try:
                await f
            finally:
                self._waiter = None
                if h is not None:
                    h.cancel()
            if not self._q and end is not None and loop.time() >= end:
                return None
        return self._take()

    def __aiter__(self) -> "AsyncWatch":
        return self

    async def __anext__(self) -> w.Queue:
        q = await self.get()
        if q is None:
            raise StopAsyncIteration
        return q

    def close(self) -> None:
        """Ends the watch: U is sent when it was the client's last of key."""
        self.client._unwatch_locked(self)  # type: ignore[arg-type]
        self._end(None)

    async def __aenter__(self) -> "AsyncWatch":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


def _wake_future(f: "asyncio.Future[None]") -> None:
    if not f.done():
        f.set_result(None)


class AsyncObserver:
    """Leaders of an election as they change, for async for; see
    AsyncElection.observe."""

    def __init__(self, watch: AsyncWatch) -> None:
        self._watch = watch
        self._last: Optional[Leader] = None
        self._stale = False

    @property
    def stale(self) -> bool:
        """Whether the leader last yielded said the observer had lost the
        cluster (Leader.stale)."""
        return self._stale

    def __aiter__(self) -> "AsyncObserver":
        return self

    async def __anext__(self) -> Leader:
        async for q in self._watch:
            cur = Election._leader_of(q)
            if cur.stale or self._stale or self._last is None or cur != self._last:
                self._stale = cur.stale
                if not cur.stale:
                    self._last = cur
                return cur
        raise StopAsyncIteration

    def close(self) -> None:
        self._watch.close()

    async def __aenter__(self) -> "AsyncObserver":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()
