"""The same critical section with lockd.AsyncClient, for asyncio programs.
Start a node (make run), then: python3 examples/asyncio_hold.py"""

from __future__ import annotations

import asyncio

import lockd


async def step(n: int, token: int) -> None:
    await asyncio.sleep(0.1)  # the work, fenced by token
    print(f"step {n} done under token {token}")


async def main() -> None:
    async with lockd.AsyncClient() as client, client.hold("deploy", lease=2) as lock:
        for n in range(5):
            lock.check()  # raises lockd.LockLost once the lock is lost
            await step(n, lock.token)
        try:
            # Give up waiting after a second: cancelling the task withdraws
            # its place in the key's queue.
            other = await asyncio.wait_for(client.acquire("deploy", lease=2), 1)
            await other.release()
        except asyncio.TimeoutError:
            print("deploy is ours: the second acquire was withdrawn")
    print("hold ended:", lock.reason)


if __name__ == "__main__":
    asyncio.run(main())
