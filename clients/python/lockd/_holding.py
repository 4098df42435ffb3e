"""What a hold and a set of holds are, for the blocking client (Hold,
HoldSet) and the asyncio one (AsyncHold, AsyncHoldSet) alike, without
I/O: their fields, the lease each renewal asks for, when a renewal's
error ends the hold, and the words of each loss. The renewing thread or
task, the waits and the locking stay with each client."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Union

from ._errors import Closed, Error, LockLost, LostReason, NotHeld, Refused

if TYPE_CHECKING:
    from ._aio_hold import AsyncLock
    from ._requests import Lock


def renew_retry(lease: float) -> float:
    """How soon a failed renewal is tried again."""
    return min(max(lease / 30, 0.01), 1.0)


class _HoldRules:
    """The fields of a hold of one key and the decisions on them."""

    def __init__(self, lock: Union["Lock", "AsyncLock"], lease: float, cap_at: Optional[float]) -> None:
        self.key: str = lock.key
        self.token: int = lock.token
        self.limit: int = lock.limit
        self.id: str = lock.id
        self.place: Optional[int] = lock.place
        self.shared: bool = lock.shared
        self.lease: float = lease
        self.reason: Optional[LostReason] = None
        self.error: Optional[LockLost] = None
        self._cap_at = cap_at
        self._expires = 0.0
        self._released = False

    def _lost(self, reason: LostReason, why: str) -> LockLost:
        return LockLost(f"hold {self.key} token {self.token}: {why}", reason)

    def _unconfirmed(self) -> LockLost:
        """A grant that came after a long wait, no renewal confirming it
        acknowledged within its lease."""
        return self._lost("expired", "the grant came after a long wait and no renewal confirming it was acknowledged within its lease")

    def _not_held(self, e: Error) -> LockLost:
        return self._lost("notheld", f"the lock was lost: {e}")

    def _expiry(self, now: float) -> LockLost:
        """Why the hold ends when its lease ran out at now: max_hold
        reached, or a renewal not acknowledged in time."""
        if self._cap_at is not None and now >= self._cap_at - 0.0005:
            return self._lost("max", "the hold reached its max_hold and its last lease ended")
        return self._lost(
            "expired", "the lease ended before a renewal was acknowledged; lockd may have given the lock to someone else: stop using it"
        )

    def _next_lease(self, now: float) -> Optional[float]:
        """The lease the renewal at now asks for: the hold's, cut at
        max_hold; None when max_hold leaves none, so no more renewals are
        sent and the lease runs out at max_hold."""
        lease = self.lease
        if self._cap_at is not None:
            left = self._cap_at - now
            if left < 0.001:
                return None
            lease = min(lease, left)
        return lease

    def _renew_loss(self, e: Error) -> Optional[LockLost]:
        """The loss a renewal's error means, or None when the renewal is
        tried again soon (no node answered in time)."""
        if isinstance(e, NotHeld):
            return self._not_held(e)
        if isinstance(e, Closed):
            return self._closed_loss()
        if isinstance(e, Refused):
            return self._lost("notheld", f"the lock was lost: lockd refused the renewal: {e}")
        return None

    def _closed_loss(self) -> LockLost:
        return self._lost("closed", "the client was closed")

    def _released_loss(self) -> LockLost:
        return self._lost("released", "the lock was released")

    def _quiet_release_due(self) -> bool:
        """After a loss, whether the release is still sent: it hands on
        sooner a lock whose renewals only failed to reach a node."""
        return self.reason not in ("notheld", "closed")


class _SetRules:
    """The fields of several keys held or locked together."""

    def __init__(self, members: Sequence[Union["Lock", "AsyncLock", _HoldRules]]) -> None:
        self.keys: List[str] = [m.key for m in members]
        self.tokens: Dict[str, int] = {m.key: m.token for m in members}
        self.lease: float = members[0].lease
        self.shared: bool = members[0].shared


class _HoldSetRules(_SetRules):
    """The fields of a set of holds, and the words of its end."""

    def __init__(self, holds: Sequence[_HoldRules]) -> None:
        super().__init__(holds)
        self.reason: Optional[LostReason] = None
        self.error: Optional[LockLost] = None
        self.lost_key: Optional[str] = None
        self._released = False

    def _member_lost(self, h: _HoldRules) -> None:
        """Records the end of the set that the end of h is."""
        self.reason = h.reason
        self.lost_key = h.key
        self.error = LockLost(f"hold of {' '.join(self.keys)}: key {h.key} is no longer held, so neither is the set: {h.error}", h.reason)

    def _set_released(self) -> None:
        self.reason = "released"
        self.error = LockLost(f"hold of {' '.join(self.keys)}: the set was released", "released")
