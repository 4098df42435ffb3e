#!/usr/bin/env python3
"""The Python client's conformance driver (clients/conformance/DRIVER.md):
JSON commands on stdin, JSON results and events on stdout, one a line.
A thin shell over lockd's public API: every behaviour under test is the
client's own. Run from the repository root:

    python3 clients/python/conformance_driver.py
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lockd  # noqa: E402

_out_mu = threading.Lock()
_t_open = time.monotonic()


def emit(obj: Dict[str, Any]) -> None:
    line = json.dumps(obj, separators=(",", ":")) + "\n"
    with _out_mu:
        sys.stdout.write(line)
        sys.stdout.flush()


def since_open() -> float:
    return round((time.monotonic() - _t_open) * 1000.0, 1)


def kind_of(e: BaseException) -> str:
    if isinstance(e, lockd.Timeout):
        return "timeout"
    if isinstance(e, lockd.NotHeld):
        return "notheld"
    if isinstance(e, lockd.Unavailable):
        return "unavailable"
    if isinstance(e, lockd.LimitMismatch):
        return "limit_mismatch"
    if isinstance(e, lockd.AuthError):
        return "auth"
    if isinstance(e, lockd.Refused):
        return "refused"
    if isinstance(e, lockd.Cancelled):
        return "cancelled"
    if isinstance(e, lockd.Closed):
        return "closed"
    if isinstance(e, (ValueError, TypeError)):
        return "invalid"
    return "other"


def ms(v: Any) -> Optional[float]:
    return None if v is None else float(v) / 1000.0


def holder_json(h: lockd.Holder) -> Dict[str, Any]:
    out: Dict[str, Any] = {"token": str(h.token), "lease_left_ms": round(h.lease_left * 1000.0, 3), "id": h.id, "shared": h.shared}
    if h.set_id is not None:
        out["set"] = str(h.set_id)
    if h.place is not None:
        out["place"] = h.place
    if h.value is not None:
        out["value"] = h.value
    return out


def queue_json(q: lockd.Queue) -> Dict[str, Any]:
    return {
        "holders": [holder_json(h) for h in q.holders],
        "waiters": [{"waited_ms": round(wt.waited * 1000.0, 3), "addr": wt.addr, "id": wt.id, "shared": wt.shared, "set_keys": wt.set_keys} for wt in q.waiters],
        "nwaiters": q.nwaiters,
        "limit": q.limit,
        "shared": q.shared,
    }


class Driver:
    def __init__(self) -> None:
        self.client: Optional[lockd.Client] = None
        self.mu = threading.Lock()
        self.handles = 0
        self.holds: Dict[int, lockd.Hold] = {}
        self.watches: Dict[int, lockd.Watch] = {}
        self.elections: Dict[int, lockd.Election] = {}

    def handle(self) -> int:
        with self.mu:
            self.handles += 1
            return self.handles

    def cancel_event(self, cmd: Dict[str, Any]) -> Optional[threading.Event]:
        after = cmd.get("cancel_after_ms")
        if after is None:
            return None
        ev = threading.Event()
        t = threading.Timer(float(after) / 1000.0, ev.set)
        t.daemon = True
        t.start()
        return ev

    def need(self) -> lockd.Client:
        if self.client is None:
            raise lockd.Error("the first command must be open")
        return self.client

    # ------------------------------------------------------------- commands

    def c_open(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        global _t_open
        _t_open = time.monotonic()
        kw: Dict[str, Any] = {}
        for field, arg in (
            ("failure_timeout_ms", "failure_timeout"),
            ("redial_ms", "redial"),
            ("release_every_ms", "release_every"),
            ("release_for_ms", "release_for"),
            ("dial_timeout_ms", "dial_timeout"),
        ):
            if cmd.get(field) is not None:
                kw[arg] = ms(cmd[field])
        if cmd.get("conns_per_addr") is not None:
            kw["conns_per_addr"] = int(cmd["conns_per_addr"])
        if cmd.get("name") is not None:
            kw["name"] = cmd["name"]
        if cmd.get("secret") is not None:
            kw["secret"] = cmd["secret"]
        if cmd.get("role") is not None:
            kw["role"] = cmd["role"]
        tls = cmd.get("tls")
        if tls:
            kw["tls"] = True
            kw["tls_ca"] = tls.get("ca")
            kw["tls_cert"] = tls.get("cert")
            kw["tls_key"] = tls.get("key")
            kw["tls_server_name"] = tls.get("server_name")
        else:
            kw["tls"] = False
        self.client = lockd.Client(cmd.get("addrs"), **kw)
        return {}

    def c_acquire(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        lock = self.need().acquire(
            cmd["key"],
            ms(cmd["lease_ms"]),
            wait=ms(cmd.get("wait_ms")),
            limit=cmd.get("limit"),
            cancel=self.cancel_event(cmd),
            shared=bool(cmd.get("shared")),
        )
        return {"token": str(lock.token), "limit": lock.limit, "place": lock.place}

    def c_acquire_all(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        s = self.need().acquire_all(cmd["keys"], ms(cmd["lease_ms"]), wait=ms(cmd.get("wait_ms")), cancel=self.cancel_event(cmd), shared=bool(cmd.get("shared")))
        return {"tokens": [str(t) for t in s.tokens.values()]}

    def c_hold_all(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        hs = self.need().hold_all(
            cmd["keys"], ms(cmd["lease_ms"]), wait=ms(cmd.get("wait_ms")), cancel=self.cancel_event(cmd), max_hold=ms(cmd.get("max_ms")), shared=bool(cmd.get("shared"))
        )
        n = self.handle()
        with self.mu:
            self.holds[n] = hs  # type: ignore[assignment]

        def wait_lost() -> None:
            hs.lost.wait()
            emit({"event": "lost", "hold": n, "reason": hs.reason, "key": hs.lost_key, "message": str(hs.error or ""), "ms_since_open": since_open()})

        return {"hold": n, "tokens": [str(t) for t in hs.tokens.values()], "_after": lambda: threading.Thread(target=wait_lost, daemon=True).start()}

    def c_proclaim(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        with self.mu:
            e = self.elections.get(int(cmd["hold"]))
        if e is None:
            raise ValueError(f"no campaign {cmd.get('hold')!r}")
        e.proclaim(cmd["value"])
        return {}

    def c_try(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        lock = self.need().try_acquire(cmd["key"], ms(cmd["lease_ms"]), limit=cmd.get("limit"), shared=bool(cmd.get("shared")))
        if not lock:
            return {"acquired": False}
        return {"acquired": True, "token": str(lock.token)}

    def c_release(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        self.need().release(cmd["key"], int(cmd["token"]))
        return {}

    def c_renew(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        self.need().renew(cmd["key"], int(cmd["token"]), ms(cmd["lease_ms"]))
        return {}

    def watch_hold(self, h: lockd.Hold) -> Dict[str, Any]:
        n = self.handle()
        with self.mu:
            self.holds[n] = h

        def wait_lost() -> None:
            h.lost.wait()
            emit({"event": "lost", "hold": n, "reason": h.reason, "message": str(h.error or ""), "ms_since_open": since_open()})

        # The loss event follows the command's result.
        return {"hold": n, "token": str(h.token), "_after": lambda: threading.Thread(target=wait_lost, daemon=True).start()}

    def c_hold(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        h = self.need().hold(
            cmd["key"],
            ms(cmd["lease_ms"]),
            wait=ms(cmd.get("wait_ms")),
            limit=cmd.get("limit"),
            cancel=self.cancel_event(cmd),
            max_hold=ms(cmd.get("max_ms")),
            shared=bool(cmd.get("shared")),
        )
        res = self.watch_hold(h)
        res["place"] = h.place
        return res

    def get_hold(self, cmd: Dict[str, Any]) -> lockd.Hold:
        with self.mu:
            h = self.holds.get(int(cmd["hold"]))
        if h is None:
            raise ValueError(f"no hold {cmd.get('hold')!r}")
        return h

    def c_hold_release(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        self.get_hold(cmd).release()
        return {}

    def c_hold_state(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        h = self.get_hold(cmd)
        if h.lost.is_set():
            return {"lost": True, "reason": h.reason}
        return {"lost": False}

    def c_queue(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        return queue_json(self.need().queue(cmd["key"]))

    def c_keys(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        keys, total = self.need().keys(cmd.get("pattern", "*"))
        return {"keys": keys, "total": total}

    def c_status(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        st = dict(self.need().status())
        # DRIVER.md's units and u64s: milliseconds, decimal strings.
        if "uptime" in st:
            st["uptime_ms"] = st.pop("uptime") * 1000.0
        for k in ("token", "seq"):
            if k in st:
                st[k] = str(st[k])
        st["peers"] = [dict(p, seq=str(p["seq"]), lag=str(p["lag"]), token=str(p["token"])) for p in st.get("peers", [])]
        return {"fields": st}

    def start_watch(self, key: str, leader: bool) -> Dict[str, Any]:
        client = self.need()
        n = self.handle()
        if leader:
            obs = client.election(key).observe()
            with self.mu:
                self.watches[n] = obs  # type: ignore[assignment]
        else:
            wt = client.watch(key)
            with self.mu:
                self.watches[n] = wt

        def pump() -> None:
            reason = "closed"
            stale = False

            def health(now_stale: bool) -> bool:
                # A stale value is written as a stale event; the first value
                # after it that is not, after a current event (DRIVER.md).
                nonlocal stale
                if now_stale:
                    stale = True
                    emit({"event": "stale", "watch": n, "message": "the watch lost the cluster", "ms_since_open": since_open()})
                    return True
                if stale:
                    stale = False
                    emit({"event": "current", "watch": n, "ms_since_open": since_open()})
                return False

            try:
                if not leader:
                    for q in wt:
                        if health(q.stale):
                            continue
                        ev = {"event": "watch", "watch": n}
                        ev.update(queue_json(q))
                        ev["ms_since_open"] = since_open()
                        emit(ev)
                else:
                    for lead in obs:
                        if health(lead.stale):
                            continue
                        value, token = lead
                        emit({"event": "leader", "watch": n, "value": value, "token": None if token is None else str(token), "ms_since_open": since_open()})
            except lockd.Error as e:
                reason = f"{kind_of(e)}: {e}"
            emit({"event": "watch_end", "watch": n, "reason": reason})

        # Events follow the command's result: the pump starts once it is written.
        return {"watch": n, "_after": lambda: threading.Thread(target=pump, daemon=True).start()}

    def c_watch(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        return self.start_watch(cmd["key"], False)

    def c_observe(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        return self.start_watch(cmd["key"], True)

    def c_unwatch(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        with self.mu:
            wt = self.watches.pop(int(cmd["watch"]), None)
        if wt is None:
            raise ValueError(f"no watch {cmd.get('watch')!r}")
        wt.close()
        return {}

    def c_campaign(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        lease = ms(cmd.get("lease_ms")) or 10.0
        e = self.need().election(cmd["key"])
        h = e.campaign(cmd["value"], lease=lease)
        res = self.watch_hold(h)
        with self.mu:
            self.elections[res["hold"]] = e
        return res

    def c_leader(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        value, token = self.need().election(cmd["key"]).leader()
        return {"value": value, "token": None if token is None else str(token)}

    def c_resign(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        self.get_hold(cmd).release()
        return {}

    def c_close(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        if self.client is not None:
            self.client.close()
        return {}

    def run(self, cmd: Dict[str, Any]) -> None:
        start = time.monotonic()
        cid = cmd.get("id")
        fn: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = getattr(self, "c_" + str(cmd.get("cmd")), None)
        try:
            if fn is None:
                raise NotImplementedError(f"this driver does not know the command {cmd.get('cmd')!r}")
            res = fn(cmd)
            after = res.pop("_after", None)
            out: Dict[str, Any] = {"id": cid, "ok": True, "ms": round((time.monotonic() - start) * 1000.0, 3)}
            out.update(res)
            if after is not None:
                emit(out)
                after()
                return
        except NotImplementedError as e:
            out = {"id": cid, "ok": False, "ms": round((time.monotonic() - start) * 1000.0, 3), "error": "unsupported", "message": str(e)}
        except Exception as e:  # every error goes back as a result
            kind = kind_of(e)
            if kind == "other" and not isinstance(e, lockd.Error):
                traceback.print_exc(file=sys.stderr)
            out = {"id": cid, "ok": False, "ms": round((time.monotonic() - start) * 1000.0, 3), "error": kind, "message": str(e)}
        emit(out)


def main() -> int:
    d = Driver()
    threads = []
    for raw in sys.stdin:
        raw = raw.strip()
        if not raw:
            continue
        try:
            cmd = json.loads(raw)
        except ValueError as e:
            print(f"driver: not JSON: {raw[:80]!r}: {e}", file=sys.stderr)
            continue
        if cmd.get("cmd") == "open":
            # Every later command needs the client: open runs first, alone.
            d.run(cmd)
            continue
        t = threading.Thread(target=d.run, args=(cmd,), daemon=True)
        t.start()
        threads.append(t)
        threads = [x for x in threads if x.is_alive()]
    deadline = time.monotonic() + 0.8
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    if d.client is not None:
        d.client.close()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
