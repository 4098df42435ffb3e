"""AsyncClient's acquires: one key (a lock, a reader, a semaphore place)
or several at once (all or none), and the set of locks or holds that
several keys give."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple

from . import _wire as w
from ._aio_hold import Acquiring, AsyncHold, AsyncLock
from ._aio_pool import _ACall
from ._auth import NoAnswer
from ._conn import _Call, _Conn, _Deadline, _WaitElapsed
from ._errors import Error, LockLost, Timeout
from ._holding import _HoldSetRules, _SetRules
from ._rules import Acquire, hold_exit_raises, lock_exit_raises

if TYPE_CHECKING:
    from ._aio_client import AsyncClient


class _AsyncAcquires:
    """The acquires of AsyncClient."""

    def acquire(
        self, key: str, lease: w.Seconds, wait: Optional[w.Seconds] = None, limit: Optional[int] = None, *, shared: bool = False
    ) -> Acquiring[AsyncLock]:
        """Waits for key and gives the AsyncLock with its fencing token:
        lock = await client.acquire(...), or async with client.acquire(...)
        as lock, which releases it at the end. wait bounds the wait (None
        or 0: forever); limit=N takes one of N places of a semaphore;
        shared=True takes key as a reader (any number at once, never beside
        a writer). Raises Timeout, LimitMismatch, Refused, Unavailable or
        Closed; cancelling the awaiting task withdraws the waiter."""
        wait_s = w.seconds(wait, "wait") or 0.0
        return Acquiring(lambda: self._acquire(key, lease, wait_s, limit, None, shared=shared), AsyncLock._exit)

    def try_acquire(self, key: str, lease: w.Seconds, limit: Optional[int] = None, *, shared: bool = False) -> Acquiring[Optional[AsyncLock]]:
        """Takes key if nobody holds it, without queueing: the AsyncLock, or
        None when others hold it (also under async with, which releases a
        lock it got at the end)."""
        return Acquiring(lambda: self._try(key, lease, limit, shared), AsyncLock._exit_optional)

    async def _try(self, key: str, lease: w.Seconds, limit: Optional[int], shared: bool) -> Optional[AsyncLock]:
        try:
            return await self._acquire(key, lease, None, limit, None, shared=shared)
        except Timeout:
            return None

    async def _acquire(
        self,
        key: str,
        lease: w.Seconds,
        wait: Optional[float],
        limit: Optional[int],
        name: Optional[str],
        first_lease: Optional[float] = None,
        shared: bool = False,
        value: str = "",
    ) -> AsyncLock:
        g, lease_s, lim, id_ = await self._grant([key], lease, wait, limit, name, first_lease, shared, value)
        return AsyncLock(self, key, g.tokens[0], lease_s, lim, id_, g.place, shared)  # type: ignore[arg-type]

    async def _grant(
        self,
        keys: List[str],
        lease: w.Seconds,
        wait: Optional[float],
        limit: Optional[int],
        name: Optional[str],
        first_lease: Optional[float],
        shared: bool,
        value: str,
    ) -> Tuple[w.Grant, float, int, str]:
        """Acquires keys (one, or a set: all or none); as Client._grant."""
        c: AsyncClient = self  # type: ignore[assignment]
        rq = Acquire(keys, lease, wait, limit, first_lease, shared, value, lambda: c._acquire_id(name))

        def line(cn: _Conn, cl: _Call) -> Optional[bytes]:
            cl.acq_id = rq.id
            cl.more = rq.more
            wait_word = rq.wait_word()
            if wait_word is None:
                return None
            if cn.no_refs:
                return rq.line(wait_word, None)
            cn.ref_seq += 1
            ref = cl.ref = str(cn.ref_seq % 10**16)
            return rq.line(wait_word, ref)

        def withdraw(cl: _Call) -> None:
            if rq.may_withdraw(cl):
                c._settle_locked(cl.conn, _ACall("X", rq.key, silent=True), rq.withdraw_line())  # type: ignore[arg-type]

        try:
            a, cn = await c._trip("A", rq.key, line, deadline=rq.deadline(c._ft), on_abandon=withdraw, patient=wait is not None, wait_left=rq.wait_left if wait else None)
        except _WaitElapsed as e:
            if isinstance(e.last, NoAnswer):
                raise c._unavailable_locked(e.last) from None
            raise rq.timeout() from None
        except _Deadline:
            raise rq.timeout() from None
        return rq.grant(a, cn), rq.lease_s, rq.limit, rq.id

    # ------------------------------------------------------------------ sets

    def acquire_all(
        self, keys: Sequence[str], lease: w.Seconds, wait: Optional[w.Seconds] = None, *, shared: bool = False
    ) -> Acquiring["AsyncLockSet"]:
        """Waits until every one of keys (1 to 16 distinct keys) can be
        granted together, and gives the AsyncLockSet, a token per key
        (await it, or async with, which releases every key at the end).
        Two such acquires over the same keys in any order never deadlock.
        A Timeout leaves none of the keys held."""
        ks = w.check_keys("acquire_all", keys)
        wait_s = w.seconds(wait, "wait") or 0.0
        return Acquiring(lambda: self._set(ks, lease, wait_s, shared), AsyncLockSet._exit)

    def try_acquire_all(self, keys: Sequence[str], lease: w.Seconds, *, shared: bool = False) -> Acquiring[Optional["AsyncLockSet"]]:
        """Takes every one of keys if all are free, without queueing: the
        AsyncLockSet, or None (nothing held)."""
        ks = w.check_keys("try_acquire_all", keys)
        return Acquiring(lambda: self._try_set(ks, lease, shared), AsyncLockSet._exit_optional)

    async def _try_set(self, ks: List[str], lease: w.Seconds, shared: bool) -> Optional["AsyncLockSet"]:
        try:
            return await self._set(ks, lease, None, shared)
        except Timeout:
            return None

    async def _set(self, ks: List[str], lease: w.Seconds, wait: Optional[float], shared: bool) -> "AsyncLockSet":
        g, lease_s, _, id_ = await self._grant(ks, lease, wait, None, None, None, shared, "")
        return AsyncLockSet([AsyncLock(self, k, t, lease_s, 1, id_, None, shared) for k, t in zip(ks, g.tokens)])  # type: ignore[arg-type]

    def hold_all(
        self,
        keys: Sequence[str],
        lease: w.Seconds,
        wait: Optional[w.Seconds] = None,
        max_hold: Optional[w.Seconds] = None,
        *,
        shared: bool = False,
    ) -> Acquiring["AsyncHoldSet"]:
        """Acquires every one of keys together (as acquire_all) and keeps
        them, renewing each every third of lease: async with
        client.hold_all(...) as locks. The loss of any key is the loss of
        the set (lost is set, the other keys are released). Cancelling the
        awaiting task withdraws the waiter."""
        ks = w.check_keys("hold_all", keys)
        return Acquiring(lambda: self._hold_set(ks, lease, wait, max_hold, shared), AsyncHoldSet._exit)

    async def _hold_set(self, ks: List[str], lease: w.Seconds, wait: Optional[w.Seconds], max_hold: Optional[w.Seconds], shared: bool) -> "AsyncHoldSet":
        c: AsyncClient = self  # type: ignore[assignment]
        lease_s, cap, first = AsyncHold._terms(c, ks[0], lease, max_hold)
        asked = time.monotonic()
        g, _, _, id_ = await self._grant(ks, lease_s, w.seconds(wait, "wait") or 0.0, None, None, first, shared, "")
        locks = [AsyncLock(c, k, t, first, 1, id_, None, shared) for k, t in zip(ks, g.tokens)]
        return AsyncHoldSet(c, await AsyncHold._begin(c, locks, lease_s, cap, first, asked))


class AsyncLockSet(_SetRules):
    """Locks on several keys of an AsyncClient, granted together, as
    lockd.LockSet: tokens maps each key to its token, locks are the keys'
    AsyncLock objects, in the order the keys were asked."""

    def __init__(self, locks: List[AsyncLock]) -> None:
        super().__init__(locks)
        self.locks: List[AsyncLock] = locks

    async def release(self) -> None:
        """Gives every key back; raises the first error once every key was tried."""
        res = await asyncio.gather(*(lk.release() for lk in self.locks), return_exceptions=True)
        for r in res:
            if isinstance(r, BaseException):
                raise r

    async def renew(self, lease: Optional[w.Seconds] = None) -> None:
        """Restarts every key's lease from now (one renewal per key)."""
        await asyncio.gather(*(lk.renew(lease) for lk in self.locks))

    async def __aenter__(self) -> "AsyncLockSet":
        return self

    async def __aexit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> None:
        await AsyncLockSet._exit(self, exc)

    @staticmethod
    async def _exit(s: "AsyncLockSet", exc: Optional[BaseException]) -> None:
        try:
            await s.release()
        except Error as e:
            if lock_exit_raises(e, exc is not None):
                raise

    @staticmethod
    async def _exit_optional(s: Optional["AsyncLockSet"], exc: Optional[BaseException]) -> None:
        if s is not None:
            await AsyncLockSet._exit(s, exc)

    def __repr__(self) -> str:
        return f"<lockd.AsyncLockSet tokens={self.tokens!r}>"


class AsyncHoldSet(_HoldSetRules):
    """Several keys held together by an AsyncClient, as lockd.HoldSet:
    holds (one AsyncHold per key) renew themselves; the loss of any key is
    the loss of the set: lost (an asyncio.Event) is set, reason says why,
    lost_key which key, and the other keys are released."""

    def __init__(self, client: "AsyncClient", holds: List[AsyncHold]) -> None:
        super().__init__(holds)
        self.client: AsyncClient = client
        self.holds: List[AsyncHold] = holds
        self.lost: asyncio.Event = asyncio.Event()
        for h in holds:
            h._on_end = self._member_ended
        for h in holds:
            if h.lost.is_set():
                self._member_ended(h)

    def _member_ended(self, h: AsyncHold) -> None:
        if self.lost.is_set():
            return
        self._member_lost(h)
        self.lost.set()
        for o in self.holds:
            if o is not h:
                self.client._spawn(self._release_quietly(o))

    @staticmethod
    async def _release_quietly(h: AsyncHold) -> None:
        try:
            await h.release()
        except Error:
            pass

    @property
    def expires(self) -> float:
        """When the first of the keys' leases ends, as far as acknowledged
        renewals prove (time.monotonic()'s clock)."""
        return min(h.expires for h in self.holds)

    def check(self) -> None:
        """Raises LockLost when any key is lost or no longer provably held."""
        for h in self.holds:
            try:
                h.check()
            except LockLost:
                break
        if self.error is not None:
            raise self.error

    async def release(self) -> None:
        """Stops renewing and gives every key back; raises only while the
        set counted as held (as AsyncHold.release)."""
        if self._released:
            return
        self._released = True
        was_lost = self.lost.is_set()
        if not was_lost:
            self._set_released()
            self.lost.set()
        res = await asyncio.gather(*(h.release() for h in self.holds), return_exceptions=True)
        for r in res:
            if isinstance(r, BaseException) and not was_lost:
                raise r

    async def __aenter__(self) -> "AsyncHoldSet":
        return self

    async def __aexit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> None:
        await AsyncHoldSet._exit(self, exc)

    @staticmethod
    async def _exit(s: "AsyncHoldSet", exc: Optional[BaseException]) -> None:
        was_lost = s.lost.is_set()
        try:
            await s.release()
        except Error as e:
            if hold_exit_raises(e, exc is not None, was_lost):
                raise

    def __repr__(self) -> str:
        return f"<lockd.AsyncHoldSet tokens={self.tokens!r} lost={self.lost.is_set()}>"
