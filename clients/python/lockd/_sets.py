"""Several keys at once, all or none: a set of locks granted together and
its hold, which renews every key and is lost with any of them."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from . import _wire as w
from ._errors import Error, LockLost, Timeout
from ._hold import Hold
from ._holding import _HoldSetRules, _SetRules
from ._requests import Lock
from ._rules import hold_exit_raises, lock_exit_raises

if TYPE_CHECKING:
    from ._client import Client


class LockSet(_SetRules):
    """Locks on several keys, granted together (all or none), each key with
    its own fencing token: tokens maps each key to its token, in the order
    the keys were asked; locks are the keys' Lock objects in that order.
    As a context manager it releases every key at the end of the block."""

    def __init__(self, client: "Client", locks: List[Lock]) -> None:
        super().__init__(locks)
        self.client: Client = client
        self.locks: List[Lock] = locks

    def release(self) -> None:
        """Gives every key back, each with its own release; raises the first
        error (NotHeld, Unavailable) once every key was tried."""
        first: Optional[Error] = None
        for lk in self.locks:
            try:
                lk.release()
            except Error as e:
                first = first or e
        if first is not None:
            raise first

    def renew(self, lease: Optional[w.Seconds] = None) -> None:
        """Restarts every key's lease from now (one renewal per key; the
        lease they were acquired with by default)."""
        for lk in self.locks:
            lk.renew(lease)

    def __enter__(self) -> "LockSet":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self.release()
        except Error as e:
            if lock_exit_raises(e, exc_type is not None):
                raise

    def __repr__(self) -> str:
        return f"<lockd.LockSet tokens={self.tokens!r}>"


class TrySet:
    """What try_acquire_all returns: the LockSet when every key was free, or
    word that one was busy (then none is held). True when acquired; as a
    context manager it gives the LockSet, or None, and releases the keys
    at the end of the block."""

    def __init__(self, keys: List[str], locks: Optional[LockSet]) -> None:
        self.keys: List[str] = keys
        self.locks: Optional[LockSet] = locks

    @property
    def acquired(self) -> bool:
        """Whether every key was free and is now held."""
        return self.locks is not None

    def __bool__(self) -> bool:
        return self.locks is not None

    @property
    def tokens(self) -> Dict[str, int]:
        """Each key's token; raises Timeout when the keys were busy."""
        if self.locks is None:
            raise Timeout(f"try_acquire_all {' '.join(self.keys)}: a key was busy and nothing is held; test the result first")
        return self.locks.tokens

    def __enter__(self) -> Optional[LockSet]:
        return self.locks

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.locks is not None:
            self.locks.__exit__(exc_type, exc, tb)

    def __repr__(self) -> str:
        return f"<lockd.TrySet keys={self.keys!r} {'busy' if self.locks is None else 'held'}>"


class HoldSet(_HoldSetRules):
    """Several keys held together, each renewed in the background as a
    Hold is (holds, one per key in order; tokens maps each key to its
    token). The set is lost when any of its keys is: lost (a
    threading.Event) is set, reason says why as for a Hold, lost_key says
    which key, and the other keys are released. check() raises LockLost
    once it is; release() gives every key back."""

    def __init__(self, client: "Client", holds: List[Hold]) -> None:
        super().__init__(holds)
        self.client: Client = client
        self.holds: List[Hold] = holds
        self.lost: threading.Event = threading.Event()
        self._mu = threading.Lock()
        for h in holds:
            h._on_end = self._member_ended
        for h in holds:
            if h.lost.is_set():
                self._member_ended(h)

    def _member_ended(self, h: Hold) -> None:
        with self._mu:
            if self.lost.is_set():
                return
            self._member_lost(h)
            self.lost.set()
        rest = [o for o in self.holds if o is not h]
        threading.Thread(target=self._release_rest, args=(rest,), name="lockd-hold-set", daemon=True).start()

    @staticmethod
    def _release_rest(rest: List[Hold]) -> None:
        for o in rest:
            try:
                o.release()
            except Error:
                pass

    @property
    def expires(self) -> float:
        """When the first of the keys' leases ends, as far as acknowledged
        renewals prove (time.monotonic()'s clock)."""
        return min(h.expires for h in self.holds)

    def check(self) -> None:
        """Raises LockLost when any key is lost or no longer provably held
        (reading the clock itself, as Hold.check)."""
        for h in self.holds:
            try:
                h.check()
            except LockLost:
                break
        if self.lost.is_set():
            assert self.error is not None
            raise self.error

    def release(self) -> None:
        """Stops renewing and gives every key back. Raises (NotHeld,
        Unavailable) only while the set counted as held: after a loss it
        raises nothing, as Hold.release."""
        with self._mu:
            if self._released:
                return
            self._released = True
            was_lost = self.lost.is_set()
            if not was_lost:
                self._set_released()
                self.lost.set()
        first: Optional[Error] = None
        for h in self.holds:
            try:
                h.release()
            except Error as e:
                first = first or e
        if first is not None and not was_lost:
            raise first

    def __enter__(self) -> "HoldSet":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        was_lost = self.lost.is_set()
        try:
            self.release()
        except Error as e:
            if hold_exit_raises(e, exc_type is not None, was_lost):
                raise

    def __repr__(self) -> str:
        return f"<lockd.HoldSet tokens={self.tokens!r} lost={self.lost.is_set()}>"


class _Sets:
    """The set requests of Client: several keys at once, all or none."""

    def acquire_all(
        self,
        keys: Sequence[str],
        lease: w.Seconds,
        wait: Optional[w.Seconds] = None,
        cancel: Optional[threading.Event] = None,
        *,
        shared: bool = False,
    ) -> LockSet:
        """Waits until every one of keys (1 to 16 distinct keys) can be
        granted together, and returns the LockSet, a token per key. It
        waits in every key's queue meanwhile; two such acquires over the
        same keys in any order never deadlock. Raises as acquire: a
        Timeout leaves none of the keys held. The request is one line of
        at most 4096 bytes, keys included: a set that would not fit
        (16 keys near 255 bytes) raises ValueError before sending."""
        ks = w.check_keys("acquire_all", keys)
        return self._set(ks, lease, w.seconds(wait, "wait") or 0.0, cancel, shared)

    def try_acquire_all(self, keys: Sequence[str], lease: w.Seconds, *, shared: bool = False) -> TrySet:
        """Takes every one of keys if all are free, without queueing: a
        TrySet, true and holding the LockSet, or false (nothing held)."""
        ks = w.check_keys("try_acquire_all", keys)
        try:
            return TrySet(ks, self._set(ks, lease, None, None, shared))
        except Timeout:
            return TrySet(ks, None)

    def _set(self, ks: List[str], lease: w.Seconds, wait: Optional[float], cancel: Optional[threading.Event], shared: bool) -> LockSet:
        g, lease_s, _, id_ = self._grant(ks, lease, wait, None, cancel, None, None, shared, "")  # type: ignore[attr-defined]
        return LockSet(self, [Lock(self, k, t, lease_s, 1, id_, None, shared) for k, t in zip(ks, g.tokens)])  # type: ignore[arg-type]

    def hold_all(
        self,
        keys: Sequence[str],
        lease: w.Seconds,
        wait: Optional[w.Seconds] = None,
        cancel: Optional[threading.Event] = None,
        max_hold: Optional[w.Seconds] = None,
        *,
        shared: bool = False,
    ) -> HoldSet:
        """Acquires every one of keys together (as acquire_all) and keeps
        them, renewing each key every third of lease, until released, lost,
        max_hold reached or the client closed. The loss of any key is the
        loss of the set: lost is set and the other keys are released. Use
        it as a context manager; the body checks lost or calls check()."""
        ks = w.check_keys("hold_all", keys)
        lease_s, cap, first = Hold._terms(self, ks[0], lease, max_hold)  # type: ignore[arg-type]
        asked = time.monotonic()
        g, _, _, id_ = self._grant(ks, lease_s, w.seconds(wait, "wait") or 0.0, None, cancel, None, first, shared, "")  # type: ignore[attr-defined]
        locks = [Lock(self, k, t, first, 1, id_, None, shared) for k, t in zip(ks, g.tokens)]  # type: ignore[arg-type]
        return HoldSet(self, Hold._begin(self, locks, lease_s, cap, first, asked))  # type: ignore[arg-type]
