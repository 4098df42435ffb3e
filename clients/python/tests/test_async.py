"""lockd.AsyncClient against scripted nodes: a cancelled task withdraws its
waiter (X on the wire) and gives back a grant that crossed the cancel,
holds as async context managers, try-lock, re-sent releases, watches,
close; and no thread of its own. The rules it shares with the blocking
client are proven for it by the conformance suite (python-asyncio)."""

import asyncio
import re
import threading
import time
import unittest

import lockd

from .fake import FakeNode
from .test_client import TOKEN, bouncing_pair, opts, ref_of, words


def has(n, prefix):
    """Whether n was sent a line starting with prefix; for n.wait_for,
    which holds n's lock (n.sent takes it)."""
    return any(l.startswith(prefix) for _, l in n.lines)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


class AsyncClientTest(unittest.TestCase):
    def setUp(self):
        self.nodes = []

    def tearDown(self):
        for n in self.nodes:
            n.close()

    def node(self, handler):
        n = FakeNode(handler)
        self.nodes.append(n)
        return n

    def client(self, addrs, **kw):
        return lockd.AsyncClient(addrs, **opts(**kw))

    def test_redirects_while_nodes_settle_are_followed(self):
        a, b = bouncing_pair(self.node, time.monotonic() + 0.8)

        async def main():
            async with self.client([a.addr, b.addr], failure_timeout=0.5) as c:
                lock = await c.acquire("k", 5, wait=5)
                self.assertEqual(lock.token, TOKEN)
        run(main())

    def test_wait_ending_among_redirects_says_nodes_disagree(self):
        a, b = bouncing_pair(self.node, time.monotonic() + 3600)

        async def main():
            async with self.client([a.addr, b.addr], failure_timeout=1.0) as c:
                with self.assertRaises(lockd.Unavailable) as cm:
                    await c.acquire("k", 5, wait=0.7)
                self.assertIn("the wait ran out while the request was redirected", str(cm.exception))
        run(main())

    def test_redirects_between_nodes_that_never_agree_end(self):
        a, b = bouncing_pair(self.node, time.monotonic() + 3600)

        async def main():
            async with self.client([a.addr, b.addr], failure_timeout=0.1) as c:
                t0 = time.monotonic()
                with self.assertRaises(lockd.Unavailable) as cm:
                    await c.acquire("k", 5, wait=5)
                self.assertGreaterEqual(time.monotonic() - t0, 0.3)
                self.assertIn("times in a row over", str(cm.exception))
        run(main())

    def test_cancelled_acquire_withdraws_with_x(self):
        def h(c, line):
            w = words(line)
            if w[0] == "A":
                pending.append(ref_of(line))
            if w[0] == "X":
                return ["T k ref=" + pending[0], "X k ok"]
            if w[0] == "Q":
                return [f"Q {w[1]} - - 0"]
            return None

        pending = []
        n = self.node(h)

        async def main():
            async with self.client(n.addr) as c:
                t = asyncio.ensure_future(c.acquire("k", 5))
                await asyncio.sleep(0)
                self.assertTrue(await asyncio.to_thread(n.wait_for, lambda: bool(pending), 2))
                t.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await t
                self.assertTrue(await asyncio.to_thread(n.wait_for, lambda: has(n, "X "), 2))
                # The client goes on serving.
                self.assertEqual((await c.queue("q")).token, None)
        run(main())
        aid = re.search(r" id=(\S+)", n.sent("A k")[0]).group(1)
        self.assertEqual(n.sent("X ")[0], f"X k {aid}")
        a_conn = [cid for cid, l in n.lines if l.startswith("A k")][0]
        x_conn = [cid for cid, l in n.lines if l.startswith("X k")][0]
        self.assertEqual(a_conn, x_conn, "X goes on the acquire's connection")

    def test_cancelled_hold_withdraws_and_a_crossing_grant_goes_back(self):
        refs = []

        def h(c, line):
            w = words(line)
            if w[0] == "A":
                refs.append(ref_of(line))
            if w[0] == "X":
                # The grant crossed the withdraw on the wire.
                return [f"A {w[1]} {TOKEN} ref={refs[0]}", f"X {w[1]} none"]
            if w[0] == "R":
                return [f"R {w[1]} ok"]
            return None

        n = self.node(h)

        async def main():
            async with self.client(n.addr) as c:
                t = asyncio.ensure_future(c.hold("k", lease=5).__aenter__())
                self.assertTrue(await asyncio.to_thread(n.wait_for, lambda: bool(refs), 2))
                t.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await t
                self.assertTrue(await asyncio.to_thread(n.wait_for, lambda: has(n, f"R k {TOKEN}"), 2))

        run(main())
        self.assertEqual(len(n.sent("X k")), 1)

    def test_hold_as_async_context_manager_and_its_loss(self):
        state = {"answer": True}

        def h(c, line):
            w = words(line)
            if w[0] == "A":
                return [f"A {w[1]} {TOKEN} ref={ref_of(line)}"]
            if w[0] == "N":
                return [f"N {w[1]} ok"] if state["answer"] else None
            if w[0] == "R":
                return [f"R {w[1]} notheld"]
            return None

        n = self.node(h)

        async def main():
            async with self.client(n.addr, failure_timeout=0.15) as c, c.hold("k", lease=0.3) as lock:
                self.assertEqual(lock.token, TOKEN)
                self.assertTrue(await asyncio.to_thread(n.wait_for, lambda: len([1 for _, l in n.lines if l.startswith("N k")]) >= 2, 2))
                lock.check()
                state["answer"] = False
                await asyncio.wait_for(lock.lost.wait(), 2)
                self.assertEqual(lock.reason, "expired")
                with self.assertRaises(lockd.LockLost):
                    lock.check()
            # Leaving the block after the loss raised nothing, though the
            # node answered the release notheld.

        run(main())

    def test_check_reads_the_clock(self):
        def h(c, line):
            w = words(line)
            if w[0] == "A":
                return [f"A {w[1]} {TOKEN} ref={ref_of(line)}"]
            return None

        n = self.node(h)

        async def main():
            async with self.client(n.addr, failure_timeout=0.15) as c:
                hold = await c.hold("k", lease=0.3)
                # A loop that never yields to the renewing task, past the lease.
                end = hold.expires + 0.01
                while time.monotonic() < end:
                    pass
                self.assertFalse(hold.lost.is_set())
                with self.assertRaises(lockd.LockLost):
                    hold.check()
                self.assertEqual(hold.reason, "expired")

        run(main())

    def test_try_acquire_busy_or_free(self):
        def h(c, line):
            w = words(line)
            if w[0] == "A" and w[1] == "busy":
                return [f"T busy ref={ref_of(line)}"]
            if w[0] == "A":
                return [f"A {w[1]} {TOKEN} ref={ref_of(line)}"]
            if w[0] == "R":
                return [f"R {w[1]} ok"]
            return None

        n = self.node(h)

        async def main():
            async with self.client(n.addr) as c:
                self.assertIsNone(await c.try_acquire("busy", 5))
                async with c.try_acquire("busy", 5) as lock:
                    self.assertIsNone(lock)
                async with c.try_acquire("free", 5) as lock:
                    self.assertIsNotNone(lock)
                with self.assertRaises(TimeoutError):
                    await c.acquire("busy", 5, wait=0.1)

        run(main())
        self.assertTrue(all(words(l)[3] == "-" for l in n.sent("A busy")[:2]), "try-lock sends wait -")
        self.assertEqual(n.sent("R "), [f"R free {TOKEN}"])

    def test_many_tasks_answers_out_of_order_by_ref(self):
        held = []
        mu = threading.Lock()

        def h(c, line):
            w = words(line)
            if w[0] == "A":
                with mu:
                    held.append((c, w[1], ref_of(line)))
                    if len(held) == 20:
                        for i, (cc, key, ref) in enumerate(reversed(held)):
                            cc.send(f"A {key} {TOKEN + i} ref={ref}")
            return None

        n = self.node(h)

        async def main():
            async with self.client(n.addr) as c:
                locks = await asyncio.gather(*(c.acquire("same" if i % 2 else f"k{i}", 5, wait=5) for i in range(20)))
                return locks

        locks = run(main())
        sent = {(cid, ref_of(l)) for cid, l in n.lines if l.startswith("A ")}
        for lock in locks:
            i = 19 - (lock.token - TOKEN)
            self.assertEqual(held[i][1], lock.key, "each task got the grant of its own acquire")
        self.assertEqual(len(sent), 20, "a ref of its own for every acquire of a connection")

    def test_release_is_re_sent_until_answered(self):
        seen = []

        def h(c, line):
            w = words(line)
            if w[0] == "R":
                seen.append(time.monotonic())
                if len(seen) == 4:
                    return [f"R {w[1]} ok"]
            return None

        n = self.node(h)

        async def main():
            async with self.client(n.addr) as c:
                await c.release("k", TOKEN)

        run(main())
        self.assertEqual(len(seen), 4)
        self.assertTrue(0.1 <= seen[3] - seen[0] <= 0.5, seen[3] - seen[0])

    def test_unavailable_is_a_connection_error(self):
        async def main():
            async with self.client("127.0.0.1:1,127.0.0.1:2") as c:
                with self.assertRaises(ConnectionError) as cm:
                    await c.acquire("k", 5, wait=1)
                self.assertIsInstance(cm.exception, lockd.Unavailable)
                self.assertIn("127.0.0.1:2", str(cm.exception))

        run(main())

    def test_watch_follows_a_redirect(self):
        def hb(c, line):
            return ["L w 5 9 0"] if line.startswith("L ") else None

        b = self.node(hb)

        def ha(c, line):
            if line.startswith("L "):
                threading.Timer(0.05, lambda: c.send(f"M w {b.addr}")).start()
                return ["L w - - 0"]
            return None

        a = self.node(ha)

        async def main():
            async with self.client(a.addr) as c:
                async with c.watch("w") as wt:
                    got = [await wt.get(2), await wt.get(2)]
                    self.assertEqual([q.token for q in got], [None, 5])
                self.assertTrue(await asyncio.to_thread(b.wait_for, lambda: has(b, "U w"), 2))

        run(main())

    def test_election_on_an_older_node(self):
        ids = [""]

        def h(c, line):
            w = words(line)
            if w[0] == "A":
                m = re.search(r" (value=\S+)", line)
                if m:
                    return [f'E {w[1]} A: ref={ref_of(line)} "{m.group(1)}": want limit=N, id=ID or ref=R after the wait']
                ids[0] = re.search(r" id=(\S+)", line).group(1)
                return [f"A {w[1]} {TOKEN} ref={ref_of(line)}"]
            if w[0] == "Q":
                return [f"Q {w[1]} {TOKEN} 9.5 0 id={TOKEN},{ids[0]}"]
            if w[0] == "R":
                return [f"R {w[1]} ok"]
            return [f"N {w[1]} ok"] if w[0] == "N" else None

        n = self.node(h)

        async def main():
            async with self.client(n.addr) as c:
                e = c.election("lead")
                async with e.campaign("node-a", lease=5) as lead:
                    self.assertEqual(await e.leader(), ("node-a", TOKEN))
                self.assertEqual(lead.reason, "released")

        run(main())
        self.assertTrue(ids[0].startswith("node-a#"))

    def test_close_fails_waiting_calls_and_starts_no_thread(self):
        n = self.node(lambda c, l: None)

        async def main():
            c = self.client(n.addr)
            t = asyncio.ensure_future(c.acquire("k", 5))
            self.assertTrue(await asyncio.to_thread(n.wait_for, lambda: has(n, "A "), 2))
            # Dials, reads and writes all run on the loop: no thread.
            self.assertEqual([t.name for t in threading.enumerate() if t.name.startswith("lockd")], [])
            await c.close()
            with self.assertRaises(lockd.Closed):
                await t
            with self.assertRaises(lockd.Closed):
                await c.queue("k")

        run(main())


if __name__ == "__main__":
    unittest.main()
