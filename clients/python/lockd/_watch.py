"""Watches: a key's holders and waiters pushed by the active node (L),
followed across failovers."""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from typing import TYPE_CHECKING, Any, Deque, List, Optional

from . import _wire as w
from ._conn import MAX_DYNAMIC, _Call, _Conn, _server_error
from ._errors import AuthError, Closed, Refused

if TYPE_CHECKING:
    from ._client import Client


class _Watches:
    """The client's watch subscriptions, a part of Client."""

    def watch(self, key: str) -> "Watch":
        """Watches key's holders and waiters: iterate the Watch for a
        lockd.Queue now and after every change; close() ends it."""
        w.check_key("watch", key)
        wt = Watch(self, key)
        with self._mu:
            if self._closed:
                raise Closed("the lockd client is closed")
            ws = self._watches.get(key)
            if ws is None:
                ws = self._watches[key] = _WatchState(self, key)
            ws.watchers.append(wt)
            if ws.conn is not None and ws.conn.sock is not None:
                self._send_l_locked(ws, ws.conn)
            else:
                self._subscribe_locked(ws, "")
        return wt

    # -------------------------------------------------------------- watches

    def _send_l_locked(self, ws: "_WatchState", cn: _Conn) -> None:
        cl = _Call("L", ws.key, silent=True)
        self._queue_locked(cn, cl, f"L {ws.key}\n".encode())
        cn.watching.add(ws.key)
        ws.conn = cn
        ws.resubscribe = False

    def _subscribe_locked(self, ws: "_WatchState", addr: str) -> None:
        if self._closed or not ws.watchers:
            return
        for wt in ws.watchers:
            wt._primed = False
        target = addr or self._active
        cands = [c for c in self._conns if c.state == "up" and (not target or c.addr == target)]
        if not cands and target:
            if not any(c.addr == target for c in self._conns) and self._dynamic < MAX_DYNAMIC:
                self._add_conn_locked(target, True)
            elif not self._dead_locked(target):
                for c in self._conns:
                    if c.addr == target and c.state == "down":
                        self._dial_locked(c)
            if not self._dead_locked(target):
                ws.resubscribe = True
                ws.target = target
                return
            cands = [c for c in self._conns if c.state == "up"]
        if not cands:
            ws.resubscribe = True
            ws.target = target
            return
        cn = cands[self._rr % len(cands)]
        self._rr += 1
        self._send_l_locked(ws, cn)

    def _move_watch_locked(self, ws: "_WatchState", addr: str) -> None:
        """Watches again at addr, the active an M named. A node this client
        found silent is a failover the redirecting node has not seen yet,
        or the node back (restarted, resumed), which _stale_locked dials
        at once: ask again a little later (the tick does)."""
        if self._stale_locked(addr):
            ws.resubscribe = True
            ws.target = ""
            ws.retry_at = time.monotonic() + 0.1
            return
        ws.moves += 1
        if ws.moves > 2:
            # Nodes that name each other (a cluster restarted together,
            # until it agrees): follow them paced, not in a tight loop.
            ws.resubscribe = True
            ws.target = addr
            ws.retry_at = time.monotonic() + min(0.025 * (ws.moves - 2), 0.1)
            return
        self._subscribe_locked(ws, addr)

    def _resubscribe_locked(self) -> None:
        for ws in list(self._watches.values()):
            if ws.resubscribe and ws.conn is None:
                t = ws.target
                ws.target = ""
                self._subscribe_locked(ws, t)

    def _watch_answer_locked(self, cn: _Conn, cl: _Call, a: w.Answer) -> None:
        ws = self._watches.get(cl.key)
        if cl.op == "U":
            return
        if ws is None:
            return
        if a.kind == "M" and a.fields:
            cn.watching.discard(cl.key)
            ws.lost_locked()
            self._move_watch_locked(ws, a.fields[0])
        elif a.kind == "E":
            cn.watching.discard(cl.key)
            ws.conn = None
            err = _server_error("L", cl.key, a)
            if isinstance(err, Refused) and w.AUTH_FIRST in a.error_text():
                err = AuthError(str(err))
            ws.fail_locked(err)

    def _unwatch_locked(self, wt: "Watch") -> None:
        ws = self._watches.get(wt.key)
        if ws is None or wt not in ws.watchers:
            return
        ws.watchers.remove(wt)
        if ws.watchers:
            return
        del self._watches[wt.key]
        cn = ws.conn
        if cn is not None and cn.sock is not None and wt.key in cn.watching:
            cn.watching.discard(wt.key)
            self._queue_locked(cn, _Call("U", wt.key, silent=True), f"U {wt.key}\n".encode())


class _WatchState:
    """One watched key of a client: its watchers and the connection its
    subscription lives on."""

    def __init__(self, client: Client, key: str) -> None:
        self.client = client
        self.key = key
        self.watchers: List["Watch"] = []
        self.conn: Optional[_Conn] = None
        self.resubscribe = False
        self.target = ""
        self.retry_at = 0.0  # when a paced re-subscription is due
        self.moves = 0  # redirects in a row since a node last served it
        # live: the node at conn answered the subscription, and it has not
        # been lost since (lost_at). stale: lost for a failure timeout, and
        # the watchers were told.
        self.live = False
        self.lost_at = 0.0
        self.stale = False
        self.last: Optional[w.Queue] = None

    def deliver_locked(self, q: w.Queue, initial: bool) -> None:
        self.live, self.stale, self.last = True, False, q
        self.moves = 0
        for wt in self.watchers:
            if initial and wt._primed:
                continue
            wt._primed = True
            wt._put(q)

    def lost_locked(self) -> None:
        """The subscription is gone: its connection dropped, or the node
        gave its role up."""
        self.conn = None
        if self.live:
            self.live, self.lost_at = False, time.monotonic()

    def check_stale_locked(self, now: float, ft: float) -> None:
        """Tells the watchers, once, that the watch has had no node serve it
        for a failure timeout: the last state again, marked stale."""
        if self.live or self.stale or not self.lost_at or self.last is None or now - self.lost_at < ft:
            return
        self.stale = True
        q = dataclasses.replace(self.last, stale=True)
        for wt in self.watchers:
            wt._put(q)

    def fail_locked(self, err: BaseException) -> None:
        for wt in list(self.watchers):
            wt._end(err)
        self.watchers.clear()
        self.client._watches.pop(self.key, None)

    def end_locked(self, why: str) -> None:
        for wt in list(self.watchers):
            wt._end(Closed("the lockd client is closed"))
        self.watchers.clear()


# What ends a watcher's queue of states.
_END = object()


class _WatcherRules:
    """A watcher's states still to be taken, and how it ends: the part of
    Watch and AsyncWatch without the waiting (each client locks and wakes
    its own way)."""

    def __init__(self, key: str) -> None:
        self.key: str = key
        self.error: Optional[BaseException] = None
        self._q: Deque[Any] = collections.deque()
        self._ended = False
        self._primed = False  # it has had the state of the subscription it is on
        self._stale = False

    @property
    def stale(self) -> bool:
        """Whether the state last returned said the watch had lost the
        cluster (Queue.stale)."""
        return self._stale

    def _push(self, q: w.Queue) -> bool:
        """Adds q to the states to take; False when the watch ended."""
        if self._ended:
            return False
        self._q.append(q)
        return True

    def _finish(self, err: Optional[BaseException]) -> bool:
        """Ends the watch with err (raised to the taker unless Closed);
        False when it had ended already."""
        if self._ended:
            return False
        self._ended = True
        if not isinstance(err, Closed):
            self.error = err
        self._q.append(_END)
        return True

    def _take(self) -> Optional[w.Queue]:
        """The next state, from a queue that is not empty; None when the
        watch ended (raising its error, if any)."""
        item = self._q[0]
        if item is _END:
            if self.error is not None:
                raise self.error
            return None
        self._q.popleft()
        self._stale = item.stale
        return item


class Watch(_WatcherRules):
    """A watch of one key. Iterate it for lockd.Queue states: the current
    one first, then one after every change of holders or waiters, also
    across failovers (the state at the new node comes first). Iteration
    ends when the watch or the client is closed; a refusal ends it with
    its error raised.

    When the watch loses the cluster (no node has served it for the
    client's failure_timeout: the nodes are down, frozen or out of
    reach), it yields the last state again with stale=True: it may be
    out of date. It keeps trying, and once a node serves it again it
    yields the state there, stale=False: it is current again. The stale
    property says the same of the state last returned."""

    def __init__(self, client: Client, key: str) -> None:
        super().__init__(key)
        self.client = client
        self._cv = threading.Condition()

    def _put(self, q: w.Queue) -> None:
        with self._cv:
            if self._push(q):
                self._cv.notify_all()

    def _end(self, err: Optional[BaseException]) -> None:
        with self._cv:
            if self._finish(err):
                self._cv.notify_all()

    def get(self, timeout: Optional[w.Seconds] = None) -> Optional[w.Queue]:
        """The next state, waiting up to timeout seconds (None: forever);
        None on timeout or when the watch ended."""
        t = w.seconds(timeout, "timeout")
        end = None if t is None else time.monotonic() + t
        with self._cv:
            while not self._q:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cv.wait(left)
            return self._take()

    def __iter__(self) -> "Watch":
        return self

    def __next__(self) -> w.Queue:
        q = self.get()
        if q is None:
            raise StopIteration
        return q

    def close(self) -> None:
        """Ends the watch: U is sent when it was the client's last of key."""
        with self.client._mu:
            self.client._unwatch_locked(self)
        self._end(None)

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
