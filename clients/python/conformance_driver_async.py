#!/usr/bin/env python3
"""The conformance driver of lockd.AsyncClient (clients/conformance/DRIVER.md):
the same commands as conformance_driver.py, each run as a task on one
event loop over one AsyncClient. cancel_after_ms cancels the task, as an
asyncio program gives a call up. Run from the repository root:

    python3 clients/python/conformance_driver_async.py
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
import traceback
from typing import Any, Awaitable, Callable, Dict, Optional, Set, Union

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lockd  # noqa: E402
from conformance_driver import emit, kind_of, ms, queue_json  # noqa: E402

_t_open = time.monotonic()


def since_open() -> float:
    return round((time.monotonic() - _t_open) * 1000.0, 1)


class Driver:
    def __init__(self) -> None:
        self.client: Optional[lockd.AsyncClient] = None
        self.handles = 0
        self.holds: Dict[int, lockd.AsyncHold] = {}
        self.watches: Dict[int, Union[lockd.AsyncWatch, lockd.AsyncObserver]] = {}
        self.elections: Dict[int, lockd.AsyncElection] = {}
        self.tasks: Set["asyncio.Task[Any]"] = set()

    def spawn(self, coro: Awaitable[Any]) -> None:
        t = asyncio.ensure_future(coro)
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    def handle(self) -> int:
        self.handles += 1
        return self.handles

    def need(self) -> lockd.AsyncClient:
        if self.client is None:
            raise lockd.Error("the first command must be open")
        return self.client

    async def cancellable(self, cmd: Dict[str, Any], aw: Awaitable[Any]) -> Any:
        """Awaits aw in a task of its own, cancelled cancel_after_ms after
        the command started: the way an asyncio program gives a call up."""
        after = cmd.get("cancel_after_ms")
        task = asyncio.ensure_future(aw)
        if after is None:
            return await task
        h = asyncio.get_running_loop().call_later(float(after) / 1000.0, task.cancel)
        try:
            return await task
        except asyncio.CancelledError:
            raise lockd.Cancelled(f"{cmd.get('cmd')} {cmd.get('key')}: the task was cancelled") from None
        finally:
            h.cancel()

    # ------------------------------------------------------------- commands

    async def c_open(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
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
        for field in ("conns_per_addr", "name", "secret", "role"):
            if cmd.get(field) is not None:
                kw[field] = cmd[field]
        tls = cmd.get("tls")
        if tls:
            kw.update(tls=True, tls_ca=tls.get("ca"), tls_cert=tls.get("cert"), tls_key=tls.get("key"), tls_server_name=tls.get("server_name"))
        else:
            kw["tls"] = False
        self.client = lockd.AsyncClient(cmd.get("addrs"), **kw)
        await self.client.__aenter__()
        return {}

    async def c_acquire(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        acq = self.need().acquire(cmd["key"], ms(cmd["lease_ms"]), wait=ms(cmd.get("wait_ms")), limit=cmd.get("limit"), shared=bool(cmd.get("shared")))
        lock = await self.cancellable(cmd, acq)
        return {"token": str(lock.token), "limit": lock.limit, "place": lock.place}

    async def c_acquire_all(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        acq = self.need().acquire_all(cmd["keys"], ms(cmd["lease_ms"]), wait=ms(cmd.get("wait_ms")), shared=bool(cmd.get("shared")))
        s = await self.cancellable(cmd, acq)
        return {"tokens": [str(t) for t in s.tokens.values()]}

    async def c_hold_all(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        acq = self.need().hold_all(cmd["keys"], ms(cmd["lease_ms"]), wait=ms(cmd.get("wait_ms")), max_hold=ms(cmd.get("max_ms")), shared=bool(cmd.get("shared")))
        hs = await self.cancellable(cmd, acq)
        n = self.handle()
        self.holds[n] = hs  # type: ignore[assignment]

        async def wait_lost() -> None:
            await hs.lost.wait()
            emit({"event": "lost", "hold": n, "reason": hs.reason, "key": hs.lost_key, "message": str(hs.error or ""), "ms_since_open": since_open()})

        return {"hold": n, "tokens": [str(t) for t in hs.tokens.values()], "_after": lambda: self.spawn(wait_lost())}

    async def c_proclaim(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        e = self.elections.get(int(cmd["hold"]))
        if e is None:
            raise ValueError(f"no campaign {cmd.get('hold')!r}")
        await e.proclaim(cmd["value"])
        return {}

    async def c_try(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        lock = await self.need().try_acquire(cmd["key"], ms(cmd["lease_ms"]), limit=cmd.get("limit"), shared=bool(cmd.get("shared")))
        if lock is None:
            return {"acquired": False}
        return {"acquired": True, "token": str(lock.token)}

    async def c_release(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        await self.need().release(cmd["key"], int(cmd["token"]))
        return {}

    async def c_renew(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        await self.need().renew(cmd["key"], int(cmd["token"]), ms(cmd["lease_ms"]))
        return {}

    def watch_hold(self, h: lockd.AsyncHold) -> Dict[str, Any]:
        n = self.handle()
        self.holds[n] = h

        async def wait_lost() -> None:
            await h.lost.wait()
            emit({"event": "lost", "hold": n, "reason": h.reason, "message": str(h.error or ""), "ms_since_open": since_open()})

        # The loss event follows the command's result.
        return {"hold": n, "token": str(h.token), "_after": lambda: self.spawn(wait_lost())}

    async def c_hold(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        h = await self.cancellable(
            cmd,
            self.need().hold(
                cmd["key"], ms(cmd["lease_ms"]), wait=ms(cmd.get("wait_ms")), limit=cmd.get("limit"), max_hold=ms(cmd.get("max_ms")), shared=bool(cmd.get("shared"))
            ),
        )
        res = self.watch_hold(h)
        res["place"] = h.place
        return res

    def get_hold(self, cmd: Dict[str, Any]) -> lockd.AsyncHold:
        h = self.holds.get(int(cmd["hold"]))
        if h is None:
            raise ValueError(f"no hold {cmd.get('hold')!r}")
        return h

    async def c_hold_release(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        await self.get_hold(cmd).release()
        return {}

    async def c_hold_state(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        h = self.get_hold(cmd)
        if h.lost.is_set():
            return {"lost": True, "reason": h.reason}
        return {"lost": False}

    async def c_queue(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        return queue_json(await self.need().queue(cmd["key"]))

    async def c_keys(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        keys, total = await self.need().keys(cmd.get("pattern", "*"))
        return {"keys": keys, "total": total}

    async def c_status(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        st: Dict[str, Any] = dict(await self.need().status())
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
        wt = client.watch(key)
        obs = lockd.AsyncObserver(wt) if leader else None
        self.watches[n] = obs if obs is not None else wt

        async def pump() -> None:
            reason = "closed"
            stale = False

            def health(now_stale: bool) -> bool:
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
                if obs is None:
                    async for q in wt:
                        if health(q.stale):
                            continue
                        ev: Dict[str, Any] = {"event": "watch", "watch": n}
                        ev.update(queue_json(q))
                        ev["ms_since_open"] = since_open()
                        emit(ev)
                else:
                    async for lead in obs:
                        if health(lead.stale):
                            continue
                        value, token = lead
                        emit({"event": "leader", "watch": n, "value": value, "token": None if token is None else str(token), "ms_since_open": since_open()})
            except lockd.Error as e:
                reason = f"{kind_of(e)}: {e}"
            emit({"event": "watch_end", "watch": n, "reason": reason})

        return {"watch": n, "_after": lambda: self.spawn(pump())}

    async def c_watch(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        return self.start_watch(cmd["key"], False)

    async def c_observe(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        return self.start_watch(cmd["key"], True)

    async def c_unwatch(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        wt = self.watches.pop(int(cmd["watch"]), None)
        if wt is None:
            raise ValueError(f"no watch {cmd.get('watch')!r}")
        wt.close()
        return {}

    async def c_campaign(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        lease = ms(cmd.get("lease_ms")) or 10.0
        e = self.need().election(cmd["key"])
        h = await self.cancellable(cmd, e.campaign(cmd["value"], lease=lease))
        res = self.watch_hold(h)
        self.elections[res["hold"]] = e
        return res

    async def c_leader(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        value, token = await self.need().election(cmd["key"]).leader()
        return {"value": value, "token": None if token is None else str(token)}

    async def c_resign(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        await self.get_hold(cmd).release()
        return {}

    async def c_close(self, cmd: Dict[str, Any]) -> Dict[str, Any]:
        if self.client is not None:
            await self.client.close()
        return {}

    async def run(self, cmd: Dict[str, Any]) -> None:
        start = time.monotonic()
        cid = cmd.get("id")
        fn: Optional[Callable[[Dict[str, Any]], Awaitable[Dict[str, Any]]]] = getattr(self, "c_" + str(cmd.get("cmd")), None)
        try:
            if fn is None:
                raise NotImplementedError(f"this driver does not know the command {cmd.get('cmd')!r}")
            res = await fn(cmd)
            after = res.pop("_after", None)
            out: Dict[str, Any] = {"id": cid, "ok": True, "ms": round((time.monotonic() - start) * 1000.0, 3)}
            out.update(res)
            emit(out)
            if after is not None:
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


async def amain() -> None:
    loop = asyncio.get_running_loop()
    d = Driver()
    lines: "asyncio.Queue[Optional[str]]" = asyncio.Queue()

    def read() -> None:
        # Standard input is read by a thread: the loop's own readers of a
        # pipe differ by platform, and the driver is no part of the client.
        for raw in sys.stdin:
            loop.call_soon_threadsafe(lines.put_nowait, raw)
        loop.call_soon_threadsafe(lines.put_nowait, None)

    threading.Thread(target=read, daemon=True).start()
    while True:
        raw = await lines.get()
        if raw is None:
            break
        raw = raw.strip()
        if not raw:
            continue
        try:
            cmd = json.loads(raw)
        except ValueError as e:
            print(f"driver: not JSON: {raw[:80]!r}: {e}", file=sys.stderr)
            continue
        if cmd.get("cmd") == "open":
            await d.run(cmd)  # every later command needs the client
            continue
        d.spawn(d.run(cmd))
    if d.tasks:
        await asyncio.wait(set(d.tasks), timeout=0.8)
    if d.client is not None:
        await d.client.close()


def main() -> int:
    asyncio.run(amain())
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
