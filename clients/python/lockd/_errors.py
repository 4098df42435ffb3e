"""The exceptions of the lockd client: one small tree under Error."""

from __future__ import annotations


class Error(Exception):
    """Base of every error the lockd client raises."""


class Timeout(Error):
    """The acquire's wait elapsed without a grant: another client holds the key."""


class NotHeld(Error):
    """The token does not hold the key: released already, lease ran out, or never held."""


class Unavailable(Error):
    """Every connection was tried and no lockd node could serve the request."""


class Refused(Error):
    """A node refused the request (an E answer) and said why."""

    def __init__(self, message: str, op: str = "", key: str = "", words: str = "") -> None:
        super().__init__(message)
        self.op = op
        self.key = key
        self.words = words


class LimitMismatch(Refused):
    """The key exists with another limit, set by the acquire that created it."""


class AuthError(Error):
    """A node refused this client's secret or certificate, or requires one."""


class Closed(Error):
    """The client was closed."""


class Cancelled(Error):
    """The caller cancelled the call (its cancel event was set)."""


class LockLost(Error):
    """A held lock was lost, or can no longer be proven held: stop using it."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason
