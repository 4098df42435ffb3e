"""lockd: the Python client of the lockd lock service.

    import lockd
    with lockd.Client("127.0.0.1:7070") as client:
        with client.hold("deploy", lease=30) as lock:
            lock.check()          # raises lockd.LockLost once the lock is lost
            write(resource, fence=lock.token)

and for asyncio:

    async with lockd.AsyncClient("127.0.0.1:7070") as client, client.hold("deploy", lease=30) as lock:
        lock.check()
        await write(resource, fence=lock.token)
"""

from ._aio import to_thread
from ._aio_acquire import AsyncHoldSet, AsyncLockSet
from ._aio_client import AsyncClient
from ._aio_hold import Acquiring, AsyncElection, AsyncHold, AsyncLock, AsyncObserver, AsyncWatch
from ._client import Client, Lock, TryLock, Watch
from ._errors import (
    AuthError,
    Cancelled,
    Closed,
    Error,
    LimitMismatch,
    LockLost,
    LostReason,
    NotHeld,
    Refused,
    Timeout,
    Unavailable,
)
from ._hold import Election, Hold, Leader, Observer
from ._sets import HoldSet, LockSet, TrySet
from ._wire import Holder, Peer, Queue, Status, Waiter

__all__ = [
    "Client",
    "Lock",
    "TryLock",
    "Hold",
    "LockSet",
    "TrySet",
    "HoldSet",
    "Election",
    "Observer",
    "Leader",
    "Watch",
    "Queue",
    "Holder",
    "Waiter",
    "Status",
    "Peer",
    "to_thread",
    "AsyncClient",
    "Acquiring",
    "AsyncLock",
    "AsyncHold",
    "AsyncLockSet",
    "AsyncHoldSet",
    "AsyncElection",
    "AsyncObserver",
    "AsyncWatch",
    "Error",
    "Timeout",
    "NotHeld",
    "Unavailable",
    "LimitMismatch",
    "AuthError",
    "Refused",
    "Closed",
    "Cancelled",
    "LockLost",
    "LostReason",
]
__version__ = "0.1.0"
