"""What the public API of lockd gives, for the type checker: every
reveal_type below must show a type without Any or Unknown (check.py
fails otherwise). Never run: it only has to type-check."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Optional

import lockd

if TYPE_CHECKING:
    def blocking(client: lockd.Client) -> None:
        reveal_type(client.acquire("k", 30, wait=5, limit=2))
        reveal_type(client.try_acquire("k", 30))
        with client.try_acquire("k", 30) as maybe:
            reveal_type(maybe)
        reveal_type(client.hold("k", lease=30))
        with client.hold("k", lease=30, max_hold=60) as hold:
            reveal_type(hold.token)
            reveal_type(hold.lost)
            reveal_type(hold.reason)
            reveal_type(hold.error)
            reveal_type(hold.expires)
            hold.check()
        reveal_type(client.election("e"))
        reveal_type(client.election("e").campaign("me", lease=10))
        reveal_type(client.election("e").leader())
        for leader in client.election("e").observe():
            reveal_type(leader.value)
            reveal_type(leader.token)
            reveal_type(leader.stale)
        for q in client.watch("k"):
            reveal_type(q)
            reveal_type(q.holders)
            reveal_type(q.waiters)
            reveal_type(q.token)
        reveal_type(client.queue("k"))
        reveal_type(client.keys("k*"))
        reveal_type(client.status())
        reveal_type(client.status()["peers"])
        reveal_type(client.handoff())
        reveal_type(client.min_hold_lease)
        try:
            client.release("k", 1)
        except lockd.LockLost as e:
            reveal_type(e.reason)
        except lockd.Refused as e:
            reveal_type(e.words)

    async def asynchronous(client: lockd.AsyncClient) -> None:
        reveal_type(client.acquire("k", 30))
        reveal_type(await client.acquire("k", 30, wait=5))
        reveal_type(await client.try_acquire("k", 30))
        async with client.try_acquire("k", 30) as maybe:
            reveal_type(maybe)
        async with client, client.hold("k", lease=30) as hold:
            reveal_type(hold)
            reveal_type(hold.token)
            reveal_type(hold.lost)
            reveal_type(hold.reason)
            reveal_type(await hold.lost.wait())
            hold.check()
        reveal_type(await client.hold("k", lease=30))
        election = client.election("e")
        reveal_type(await election.campaign("me"))
        async with election.campaign("me") as lead:
            reveal_type(lead)
        reveal_type(await election.leader())
        async for leader in election.observe():
            reveal_type(leader)
        async with client.watch("k") as w:
            async for q in w:
                reveal_type(q)
            reveal_type(await w.get(1.0))
        reveal_type(await client.queue("k"))
        reveal_type(await client.keys())
        reveal_type(await client.status())
        reveal_type(await client.handoff())
        task: asyncio.Task[Optional[lockd.AsyncLock]] = asyncio.ensure_future(client.try_acquire("k", 30))
        reveal_type(await task)

    def kinds(client: lockd.Client) -> None:
        reveal_type(client.acquire("k", 30, shared=True).place)
        with client.hold("k", 30, shared=True) as h:
            reveal_type(h.place)
        with client.hold_all(["a", "b"], 30, shared=True) as hs:
            reveal_type(hs)
            reveal_type(hs.tokens)
            reveal_type(hs.lost_key)
            hs.check()
        with client.acquire_all(["a", "b"], 30) as ls:
            reveal_type(ls.tokens)
        with client.try_acquire_all(["a", "b"], 30) as maybe:
            reveal_type(maybe)
        e = client.election("e")
        e.campaign("node 1 (10.0.0.1)")
        e.proclaim("node 2")
        q = client.queue("k")
        reveal_type(q.shared)
        reveal_type(q.holders[0].value)
        reveal_type(q.holders[0].set_id)
        reveal_type(q.waiters[0].set_keys)

    async def async_kinds(client: lockd.AsyncClient) -> None:
        async with client.hold_all(["a", "b"], 30) as hs:
            reveal_type(hs)
            reveal_type(hs.tokens)
        reveal_type(await client.acquire_all(["a", "b"], 30, shared=True))
        reveal_type(await client.try_acquire_all(["a", "b"], 30))
        reveal_type((await client.acquire("k", 30, shared=True)).place)
        await client.election("e").proclaim("v")

    async def threads(client: lockd.Client) -> None:
        reveal_type(await lockd.to_thread(client.acquire, "k", 30))
