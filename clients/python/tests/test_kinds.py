"""Shared holds, sets of keys, election values and semaphore places,
against scripted nodes: the lines sent, the answers read, the refusals
made before sending. Each test bounds its waits."""

import asyncio
import re
import unittest

import lockd
from lockd import _wire as w

from .fake import FakeNode
from .test_client import TOKEN, opts, ref_of, words


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


class Node:
    """A node that grants every acquire (a token per key of a set, place=
    when the line asks a limit), answers renewals and releases ok unless
    told otherwise, and answers Q with q_body."""

    def __init__(self, test):
        self.next = TOKEN
        self.notheld = set()  # keys whose renewals answer notheld
        self.q_body = "- - 0"
        self.refuse = ""  # an E answer's words for every acquire, when set
        self.n = FakeNode(self.handle)
        test.addCleanup(self.n.close)

    def handle(self, c, line):
        ws = words(line)
        op, key = ws[0], ws[1]
        if op == "A":
            if self.refuse:
                return [f"E {key} A: ref={ref_of(line)} {self.refuse}"]
            toks = []
            for _ in range(1 + line.count(" key=")):
                self.next += 1
                toks.append(str(self.next))
            place = " place=2" if " limit=" in line else ""
            return [f"A {key} {' '.join(toks)}{place} ref={ref_of(line)}"]
        if op == "N":
            return [f"N {key} {'notheld' if key in self.notheld else 'ok'}"]
        if op == "R":
            return [f"R {key} ok"]
        if op == "Q":
            return [f"Q {key} {self.q_body}"]
        if op == "L":
            return [f"L {key} {self.q_body}"]
        return None

    def acquires(self):
        return self.n.sent("A ")


class SyncKindsTest(unittest.TestCase):
    def client(self, node, **kw):
        c = lockd.Client(node.n.addr, **opts(**kw))
        self.addCleanup(c.close)
        return c

    def test_shared_sends_mode_shared(self):
        nd = Node(self)
        c = self.client(nd)
        lock = c.acquire("cfg", 30, wait=10, shared=True)
        self.assertTrue(lock.shared)
        self.assertIsNone(lock.place)
        with c.try_acquire("cfg", 30, shared=True) as t:
            self.assertIsNotNone(t)
        with c.hold("cfg", 30, shared=True) as h:
            self.assertTrue(h.shared)
        a = nd.acquires()
        self.assertRegex(a[0], r"^A cfg 30 10 mode=shared id=\S+ ref=\w+$")
        self.assertRegex(a[1], r"^A cfg 30 - mode=shared id=")
        self.assertRegex(a[2], r"^A cfg 30 0 mode=shared id=")
        c.acquire("plain", 30)
        self.assertNotIn("mode=", nd.acquires()[-1])

    def test_shared_with_a_limit_is_refused_before_sending(self):
        nd = Node(self)
        c = self.client(nd)
        for call in (
            lambda: c.acquire("k", 30, limit=3, shared=True),
            lambda: c.try_acquire("k", 30, limit=2, shared=True),
            lambda: c.hold("k", 30, limit=2, shared=True),
        ):
            with self.assertRaises(ValueError) as cm:
                call()
            self.assertIn("shared=True", str(cm.exception))
            self.assertIn("limit=", str(cm.exception))
        c.acquire("k", 30, limit=1, shared=True)  # a limit of 1 is a lock
        self.assertEqual(len(nd.acquires()), 1)

    def test_semaphore_place(self):
        nd = Node(self)
        c = self.client(nd)
        self.assertEqual(c.acquire("sem", 30, limit=3).place, 2)
        with c.hold("sem", 30, limit=3) as h:
            self.assertEqual(h.place, 2)
        self.assertIsNone(c.acquire("lock", 30).place)

    def test_acquire_all_lines_tokens_release_renew(self):
        nd = Node(self)
        c = self.client(nd)
        s = c.acquire_all(["a", "b", "c"], 30, wait=10)
        self.assertRegex(nd.acquires()[0], r"^A a 30 10 key=b key=c id=\S+ ref=\w+$")
        self.assertEqual(s.keys, ["a", "b", "c"])
        self.assertEqual(s.tokens, {"a": TOKEN + 1, "b": TOKEN + 2, "c": TOKEN + 3})
        self.assertEqual([lk.token for lk in s.locks], [TOKEN + 1, TOKEN + 2, TOKEN + 3])
        s.renew()
        self.assertEqual(sorted(nd.n.sent("N ")), [f"N a {TOKEN + 1} 30", f"N b {TOKEN + 2} 30", f"N c {TOKEN + 3} 30"])
        with s:
            pass
        self.assertEqual(sorted(nd.n.sent("R ")), [f"R a {TOKEN + 1}", f"R b {TOKEN + 2}", f"R c {TOKEN + 3}"])
        c.acquire_all(["x", "y"], 30, shared=True)
        self.assertRegex(nd.acquires()[-1], r"^A x 30 0 key=y mode=shared id=")
        t = c.try_acquire_all(("p", "q"), 30)
        self.assertTrue(t)
        self.assertEqual(list(t.tokens), ["p", "q"])
        self.assertRegex(nd.acquires()[-1], r"^A p 30 - key=q id=")

    def test_try_acquire_all_busy(self):
        nd = Node(self)
        nd.n.handler = lambda c, line: [f"T {words(line)[1]} ref={ref_of(line)}"] if line.startswith("A ") else None
        c = self.client(nd)
        with c.try_acquire_all(["a", "b"], 30) as s:
            self.assertIsNone(s)
        with self.assertRaises(lockd.Timeout):
            c.acquire_all(["a", "b"], 30, wait=0.05)

    def test_a_grant_short_of_tokens_is_not_understood(self):
        nd = Node(self)
        nd.n.handler = lambda c, line: [f"A a {TOKEN} ref={ref_of(line)}"] if line.startswith("A ") else None
        c = self.client(nd)
        with self.assertRaises(lockd.Error) as cm:
            c.acquire_all(["a", "b"], 30)
        self.assertIn("does not understand", str(cm.exception))

    def test_set_keys_are_checked_before_sending(self):
        nd = Node(self)
        c = self.client(nd)
        cases = [
            ([], "0 keys"),
            ([f"k{i}" for i in range(17)], "17 keys"),
            (["a", "b", "a"], "'a' is given twice"),
            (["a", "has space"], "space"),
        ]
        for keys, says in cases:
            for call in (lambda: c.acquire_all(keys, 30), lambda: c.hold_all(keys, 30), lambda: c.try_acquire_all(keys, 30)):
                with self.assertRaises(ValueError) as cm:
                    call()
                self.assertIn(says, str(cm.exception))
        with self.assertRaises(TypeError):
            c.acquire_all("ab", 30)  # type: ignore[arg-type]
        self.assertEqual(len(c.acquire_all([f"k{i}" for i in range(16)], 30).tokens), 16)
        self.assertEqual(len(nd.acquires()), 1)

    def test_a_line_too_long_is_refused_before_sending(self):
        nd = Node(self)
        c = self.client(nd)
        long = [chr(ord("a") + i) * w.MAX_KEY_LEN for i in range(16)]
        for call in (lambda: c.acquire_all(long, 30), lambda: c.hold_all(long, 30), lambda: c.try_acquire_all(long, 30)):
            with self.assertRaises(ValueError) as cm:
                call()
            self.assertIn("longer than the 4096", str(cm.exception))
        self.assertEqual(nd.acquires(), [])
        fits = [chr(ord("a") + i) * 200 for i in range(16)]
        self.assertEqual(len(c.acquire_all(fits, 30, wait=5).tokens), 16)
        # The longest value, every byte encoded, on the longest key fits.
        key = "k" * w.MAX_KEY_LEN
        c.election(key).campaign("%" * w.MAX_VALUE_LEN, lease=30)
        self.assertTrue(all(len(a) <= w.MAX_LINE_LEN for a in nd.acquires()))
        self.assertEqual(len(nd.acquires()), 2)

    def test_hold_all_loses_the_set_with_any_key_and_releases_the_rest(self):
        nd = Node(self)
        c = self.client(nd, failure_timeout=0.15)
        hs = c.hold_all(["a", "b", "c"], 0.3)
        self.assertRegex(nd.acquires()[0], r"^A a 0.3 0 key=b key=c id=")
        self.assertTrue(nd.n.wait_for(lambda: sum(l.startswith("N c ") for _, l in nd.n.lines) >= 2, 2))
        hs.check()
        nd.notheld.add("b")
        self.assertTrue(hs.lost.wait(2))
        self.assertEqual(hs.reason, "notheld")
        self.assertEqual(hs.lost_key, "b")
        self.assertIn("key b", str(hs.error))
        with self.assertRaises(lockd.LockLost):
            hs.check()
        want = {f"R a {TOKEN + 1}", f"R c {TOKEN + 3}"}
        self.assertTrue(nd.n.wait_for(lambda: want <= {l for _, l in nd.n.lines}, 2), nd.n.sent("R "))
        hs.release()  # after a loss: no error
        self.assertNotIn(f"R b {TOKEN + 2}", nd.n.sent("R "))

    def test_hold_all_release_gives_every_key_back(self):
        nd = Node(self)
        c = self.client(nd)
        with c.hold_all(["a", "b"], 30, shared=True) as hs:
            self.assertEqual(hs.tokens, {"a": TOKEN + 1, "b": TOKEN + 2})
            self.assertTrue(hs.shared)
        self.assertEqual(hs.reason, "released")
        self.assertEqual(sorted(nd.n.sent("R ")), [f"R a {TOKEN + 1}", f"R b {TOKEN + 2}"])

    def test_campaign_and_proclaim_send_encoded_values(self):
        nd = Node(self)
        c = self.client(nd)
        e = c.election("lead")
        h = e.campaign("node 1 (10.0.0.1)", lease=5)
        a = nd.acquires()[0]
        self.assertIn(" value=node%201%20%2810.0.0.1%29 ", a)
        self.assertRegex(a, r" id=t#\S+ ", "the value goes in value=, the id names the client")
        e.proclaim("100% é,=x~")
        self.assertIn(f"N lead {h.token} 5 value=100%25%20%C3%A9%2C%3Dx~", nd.n.sent("N "))
        e.proclaim("v" * 1024)
        with self.assertRaises(ValueError) as cm:
            e.proclaim("v" * 1025)
        self.assertIn("1025 bytes", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            e.proclaim("é" * 513)  # 1026 bytes of UTF-8
        with self.assertRaises(ValueError) as cm:
            e.proclaim("")
        self.assertIn("empty", str(cm.exception))
        with self.assertRaises(ValueError):
            c.election("other").campaign("")
        e.resign()
        with self.assertRaises(lockd.NotHeld):
            e.proclaim("again")

    def test_proclaim_notheld_is_a_lost_leadership(self):
        nd = Node(self)
        c = self.client(nd)
        e = c.election("lead")
        h = e.campaign("a", lease=5)
        nd.notheld.add("lead")
        with self.assertRaises(lockd.LockLost):
            e.proclaim("b")
        self.assertEqual(h.reason, "notheld")

    def test_leader_reads_value_words_and_falls_back_to_the_id(self):
        nd = Node(self)
        c = self.client(nd)
        e = c.election("lead")
        nd.q_body = f"{TOKEN} 9.5 0 id={TOKEN},host#x-1 value={TOKEN},node%202%20%C3%A9"
        self.assertEqual(e.leader(), ("node 2 é", TOKEN))
        nd.q_body = f"{TOKEN} 9.5 0 id={TOKEN},host#x-1"
        self.assertEqual(e.leader(), ("host", TOKEN))

    def test_observer_sees_a_proclaimed_value(self):
        conns = []

        def h(c, line):
            if line.startswith("L "):
                conns.append(c)
                return [f"L lead {TOKEN} 9 0 value={TOKEN},one"]
            return None

        n = FakeNode(h)
        self.addCleanup(n.close)
        c = lockd.Client(n.addr, **opts())
        self.addCleanup(c.close)
        with c.election("lead").observe() as o:
            self.assertEqual(next(o), ("one", TOKEN))
            conns[0].send(f"L lead {TOKEN} 9 0 value={TOKEN},two%20words")
            self.assertEqual(next(o), ("two words", TOKEN))


class QueueWordsTest(unittest.TestCase):
    def test_new_words(self):
        q = w.parse_queue(
            "k",
            (
                "11 29.1 3 0.5,a 0.2,b 0.1,c holder=12,28 mode=shared wmode=2,shared set=11,11 set=12,11 "
                "wset=3,k+j place=12,4 value=11,x%20y future=1,2"
            ).split(),
        )
        self.assertTrue(q.shared)
        self.assertEqual([(h.token, h.shared, h.set_id, h.place, h.value) for h in q.holders], [(11, True, 11, None, "x y"), (12, True, 11, 4, None)])
        self.assertEqual([(x.addr, x.shared, x.set_keys) for x in q.waiters], [("a", False, []), ("b", True, []), ("c", False, ["k", "j"])])
        old = w.parse_queue("k", "11 29.1 0".split())
        self.assertFalse(old.shared)
        self.assertIsNone(old.holders[0].value)

    def test_wset_keys_are_decoded_after_the_split(self):
        q = w.parse_queue("a+1", "7 29 1 0.5,- wset=1,a%2B1+b%3Dc%2C+%C3%A9%25 value=7,".split())
        self.assertEqual(q.waiters[0].set_keys, ["a+1", "b=c,", "é%"])
        self.assertIsNone(q.holders[0].value)  # an empty value= is no value

    def test_grant(self):
        self.assertEqual(w.parse_grant(["1", "2", "place=3", "new=x"], 2), w.Grant([1, 2], 3))
        self.assertIsNone(w.parse_grant(["1"], 2))
        self.assertIsNone(w.parse_grant(["1", "place=2", "3"], 2))

    def test_value_encoding(self):
        self.assertEqual(w.encode_value("t", "Az09-._~"), "Az09-._~")
        self.assertEqual(w.encode_value("t", "a b%c\n"), "a%20b%25c%0A")
        self.assertEqual(w.decode_value(w.encode_value("t", "é 日本 %41")), "é 日本 %41")
        with self.assertRaises(ValueError):
            w.encode_value("t", "\ud800")


class AsyncKindsTest(unittest.TestCase):
    def client(self, node, **kw):
        return lockd.AsyncClient(node.n.addr, **opts(**kw))

    def test_shared_place_and_refusal(self):
        nd = Node(self)

        async def main():
            async with self.client(nd) as c:
                async with c.acquire("cfg", 30, wait=10, shared=True) as lock:
                    self.assertTrue(lock.shared)
                t = await c.try_acquire("cfg", 30, shared=True)
                self.assertIsNotNone(t)
                async with c.hold("cfg", 30, shared=True) as h:
                    self.assertTrue(h.shared)
                self.assertEqual((await c.acquire("sem", 30, limit=2)).place, 2)
                with self.assertRaises(ValueError) as cm:
                    await c.acquire("k", 30, limit=2, shared=True)
                self.assertIn("shared=True and limit=2", str(cm.exception))

        run(main())
        a = nd.acquires()
        self.assertRegex(a[0], r"^A cfg 30 10 mode=shared id=\S+ ref=\w+$")
        self.assertRegex(a[1], r"^A cfg 30 - mode=shared id=")
        self.assertRegex(a[2], r"^A cfg 30 0 mode=shared id=")
        self.assertEqual(len(a), 4)

    def test_sets(self):
        nd = Node(self)

        async def main():
            async with self.client(nd) as c:
                async with c.acquire_all(["a", "b"], 30, wait=5) as s:
                    self.assertEqual(s.tokens, {"a": TOKEN + 1, "b": TOKEN + 2})
                    await s.renew()
                self.assertIsNotNone(await c.try_acquire_all(["x", "y"], 30, shared=True))
                with self.assertRaises(ValueError):
                    c.hold_all(["a", "a"], 30)

        run(main())
        self.assertRegex(nd.acquires()[0], r"^A a 30 5 key=b id=\S+ ref=\w+$")
        self.assertRegex(nd.acquires()[1], r"^A x 30 - key=y mode=shared id=")
        self.assertEqual(sorted(nd.n.sent("R ")), [f"R a {TOKEN + 1}", f"R b {TOKEN + 2}"])
        self.assertEqual(len(nd.n.sent("N ")), 2)

    def test_a_line_too_long_is_refused_before_sending(self):
        nd = Node(self)
        long = [chr(ord("a") + i) * w.MAX_KEY_LEN for i in range(16)]

        async def main():
            async with self.client(nd) as c:
                with self.assertRaises(ValueError) as cm:
                    await c.acquire_all(long, 30)
                self.assertIn("longer than the 4096", str(cm.exception))
                with self.assertRaises(ValueError):
                    await c.try_acquire_all(long, 30)
                self.assertEqual(len((await c.acquire_all([k[:200] for k in long], 30)).tokens), 16)

        run(main())
        self.assertEqual(len(nd.acquires()), 1)

    def test_hold_all_loss(self):
        nd = Node(self)

        async def main():
            async with self.client(nd, failure_timeout=0.15) as c:
                async with c.hold_all(["a", "b", "c"], 0.3) as hs:
                    hs.check()
                    nd.notheld.add("c")
                    await asyncio.wait_for(hs.lost.wait(), 2)
                    self.assertEqual((hs.reason, hs.lost_key), ("notheld", "c"))
                    with self.assertRaises(lockd.LockLost):
                        hs.check()
                    for _ in range(100):
                        if {f"R a {TOKEN + 1}", f"R b {TOKEN + 2}"} <= set(nd.n.sent("R ")):
                            break
                        await asyncio.sleep(0.02)

        run(main())
        self.assertEqual(sorted(nd.n.sent("R ")), [f"R a {TOKEN + 1}", f"R b {TOKEN + 2}"])

    def test_campaign_proclaim_and_leader_value(self):
        nd = Node(self)

        async def main():
            async with self.client(nd) as c:
                e = c.election("lead")
                async with e.campaign("node 1", lease=5) as h:
                    await e.proclaim("node 2 ü")
                    nd.q_body = f"{h.token} 4 0 value={h.token},node%202%20%C3%BC"
                    self.assertEqual(await e.leader(), ("node 2 ü", h.token))
                    with self.assertRaises(ValueError):
                        await e.proclaim("x" * 1025)
                with self.assertRaises(ValueError):
                    e.campaign("")
                return h.token

        tok = run(main())
        self.assertIn(" value=node%201 ", nd.acquires()[0])
        self.assertIn(f"N lead {tok} 5 value=node%202%20%C3%BC", nd.n.sent("N "))


if __name__ == "__main__":
    unittest.main()
