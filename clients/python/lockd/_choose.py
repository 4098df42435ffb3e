"""Choosing the connection for each send, a part of the pool: the
active node when known, round-robin over the live connections, the
connections a call has not failed on yet."""

from __future__ import annotations

import time
from typing import Callable, List, Optional, Tuple

from ._conn import MAX_DYNAMIC, _Attempt, _Conn
from ._errors import AuthError, Closed, Error, Unavailable
from ._rules import waits_out_outage


class _Choose:
    """The rules of choosing a connection; the pool's fields are its own."""

    _conns: List[_Conn]
    _closed: bool
    _active: str
    _dynamic: int
    _rr: int
    _ever_up: bool
    _last_err: Optional[BaseException]

    def _dial_locked(self, cn: _Conn) -> None:
        raise NotImplementedError

    def _add_conn_locked(self, addr: str, dynamic: bool) -> _Conn:
        raise NotImplementedError

    def _stale_locked(self, addr: str) -> bool:
        """Whether addr is dead (_dead_locked); if it is, its connections
        are dialled at once instead of at the next redial: a node named by
        an M answer is one the cluster says is active, so a node restarted
        or resumed there is worth finding now."""
        if not self._dead_locked(addr):
            return False
        for cn in self._conns:
            if cn.addr == addr and cn.state == "down":
                self._dial_locked(cn)
        return True

    def _silence_locked(self, addr: str) -> str:
        """How long addr has not answered this client, in words."""
        heard = max((cn.last_read for cn in self._conns if cn.addr == addr and cn.gen > 0), default=0.0)
        if not heard:
            return "which this client has never reached"
        return f"which has not answered this client for {time.monotonic() - heard:.3f}s"

    def _any_up_locked(self) -> bool:
        return any(cn.state == "up" for cn in self._conns)

    def _waits_out_locked(self, patient: bool, wait_left: Optional[Callable[[], float]]) -> bool:
        """Whether a call that found no node to serve it waits through the
        outage (waits_out_outage) instead of raising: wait_left, what is
        left of the wait, is given to an acquire with a bounded wait only."""
        return waits_out_outage(patient, self._ever_up, wait_left is not None, self._nothing_listens_locked())

    def _nothing_listens_locked(self) -> bool:
        """Whether the last dial of every connection was refused: no node
        listens at any address (_dial_error)."""
        return bool(self._conns) and all(isinstance(cn.last_err, ConnectionRefusedError) for cn in self._conns)

    def _dead_locked(self, addr: str) -> bool:
        found = False
        for cn in self._conns:
            if cn.addr != addr:
                continue
            if cn.state == "up" or cn.last_err is None:
                return False
            found = True
        return found

    def _pick_locked(self, addr: str, at: _Attempt) -> Tuple[Optional[_Conn], bool]:
        failed = at.failed
        live = [
            cn
            for cn in self._conns
            if cn.state == "up" and (not addr or cn.addr == addr) and (cn not in failed or cn.gen > failed[cn])
        ]
        if at.busy_key and live:
            free = [cn for cn in live if not (cn.no_refs and cn.acquiring(at.busy_key))]
            if free:
                live = free
        if live:
            cn = live[self._rr % len(live)]
            self._rr += 1
            return cn, False
        wait = False
        for cn in self._conns:
            if addr and cn.addr != addr:
                continue
            if cn.state == "dialing":
                at.fresh.add(cn)
                wait = True
            elif cn.state == "down" and cn not in at.fresh:
                at.fresh.add(cn)
                self._dial_locked(cn)
                wait = True
        return None, wait

    def _choose_locked(self, at: _Attempt) -> Optional[_Conn]:
        """The connection for the next send of a call, None to wait for a
        change, or Unavailable when every connection has been tried."""
        if self._closed:
            raise Closed("the lockd client is closed")
        target = at.target or self._active
        if target and self._dead_locked(target):
            target = ""
        if target:
            if self._dynamic < MAX_DYNAMIC and not any(c.addr == target for c in self._conns):
                self._add_conn_locked(target, True)
            cn, wait = self._pick_locked(target, at)
            if cn is not None:
                return cn
            if wait:
                return None
        cn, wait = self._pick_locked("", at)
        if cn is not None:
            return cn
        if wait:
            return None
        raise self._unavailable_locked(at.last_err)

    def _unavailable_locked(self, last: Optional[BaseException]) -> Error:
        if last is None:
            last = self._last_err
        if isinstance(last, AuthError):
            return AuthError(str(last))
        addrs: List[str] = []
        for cn in self._conns:
            if cn.addr not in addrs:
                addrs.append(cn.addr)
        hint = "check that lockd is running there and that the client's addresses (or LOCKD_ADDR) name it"
        why = f" ({last})" if last is not None else ""
        return Unavailable(f"no lockd node available: tried {', '.join(addrs)}{why}; {hint}")
