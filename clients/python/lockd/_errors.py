"""The exceptions of the lockd client: one small tree under Error."""

from __future__ import annotations

from typing import Literal, Optional

LostReason = Literal["expired", "notheld", "max", "released", "closed"]
"""Why a held lock (a Hold, a leader's hold) ended: 'expired' (no renewal
was acknowledged within the lease), 'notheld' (lockd said the token no
longer holds the key), 'max' (max_hold was reached), 'released' (the
program released it), 'closed' (the client was closed)."""


class Error(Exception):
    """Base of every error the lockd client raises."""


class Timeout(Error, TimeoutError):
    """The acquire's wait elapsed without a grant: another client holds the
    key. Also a TimeoutError, for code that catches the built-in one."""


class NotHeld(Error):
    """The token does not hold the key: released already, lease ran out, or never held."""


class Unavailable(Error, ConnectionError):
    """Every connection was tried and no lockd node could serve the request.
    Also a ConnectionError, for code that catches the built-in one."""


class Refused(Error):
    """A node refused the request (an E answer) and said why."""

    def __init__(self, message: str, op: str = "", key: str = "", words: str = "") -> None:
        super().__init__(message)
        self.op: str = op
        self.key: str = key
        self.words: str = words


class LimitMismatch(Refused):
    """The key exists with another limit, set by the acquire that created it."""


class AuthError(Error):
    """A node refused this client's secret or certificate, or requires one."""


class Closed(Error):
    """The client was closed."""


class Cancelled(Error):
    """The caller cancelled the call (its cancel event was set)."""


class LockLost(Error):
    """A held lock was lost, or can no longer be proven held: stop using it.
    reason says why (LostReason)."""

    def __init__(self, message: str, reason: Optional[LostReason] = None) -> None:
        super().__init__(message)
        self.reason: Optional[LostReason] = reason
