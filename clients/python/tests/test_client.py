"""The client against scripted nodes: matching, refs, re-sends, liveness,
redirects, withdraw, holds. Each test bounds its waits."""

import datetime
import re
import threading
import time
import unittest

import lockd

from .fake import FakeNode

TOKEN = 7360982537641984001


def words(line):
    return line.split()


def ref_of(line):
    m = re.search(r" ref=(\w+)", line)
    return m.group(1) if m else None


def opts(**kw):
    base = dict(failure_timeout=0.4, name="t", release_every=0.05, release_for=1.0, redial=0.2, tls=False)
    base.update(kw)
    return base


def bouncing_pair(node, settled_at):
    """Two nodes made by node that redirect acquires to each other, as
    nodes started together do until they agree, and from settled_at
    (monotonic) on send them to the first, which grants them."""
    addrs = {}

    def bounce(me, other):
        def h(c, line):
            if not line.startswith("A "):
                return None
            key = words(line)[1]
            if time.monotonic() < settled_at:
                return [f"M {key} {addrs[other]} ref={ref_of(line)}"]
            if me == "a":
                return [f"A {key} {TOKEN} ref={ref_of(line)}"]
            return [f"M {key} {addrs['a']} ref={ref_of(line)}"]
        return h

    a = node(bounce("a", "b"))
    b = node(bounce("b", "a"))
    addrs.update(a=a.addr, b=b.addr)
    return a, b


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.nodes = []
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()
        for n in self.nodes:
            n.close()

    def node(self, handler):
        n = FakeNode(handler)
        self.nodes.append(n)
        return n

    def client(self, addrs, **kw):
        c = lockd.Client(addrs, **opts(**kw))
        self.clients.append(c)
        return c

    def test_two_connections_to_one_address_each_probed_first(self):
        n = self.node(lambda c, l: None)
        self.client(n.addr)
        self.assertTrue(n.wait_for(lambda: len(n.conns) == 2 and len([1 for _, l in n.lines if l == "S -"]) >= 2))
        # Every connection's first line is the liveness probe.
        firsts = {}
        for cid, l in n.lines:
            firsts.setdefault(cid, l)
        self.assertEqual(set(firsts.values()), {"S -"})

    def test_answers_out_of_order_and_by_ref(self):
        held = []
        mu = threading.Lock()

        def h(c, line):
            w = words(line)
            if w[0] == "A":
                with mu:
                    held.append((c, w[1], ref_of(line)))
                    if len(held) == 3:
                        # Answer in reverse order: refs and keys say whose.
                        for i, (cc, key, ref) in enumerate(reversed(held)):
                            cc.send(f"A {key} {TOKEN + i} ref={ref}")
            return None

        n = self.node(h)
        c = self.client(n.addr, conns_per_addr=1)
        got = {}

        def acq(i, key):
            got[i] = c.acquire(key, 5, wait=2)

        ts = [threading.Thread(target=acq, args=(i, k)) for i, k in enumerate(["x", "x", "y"])]
        for t in ts:
            t.start()
        for t in ts:
            t.join(5)
        self.assertEqual(len(got), 3)
        sent = {ref_of(l): l for l in n.sent("A ")}
        self.assertEqual(len(sent), 3, "every acquire carries a ref of its own")
        self.assertEqual(len({l.token for l in got.values()}), 3)
        for lock in got.values():
            i = TOKEN - lock.token
            self.assertIsNotNone(lock)
        # Ids: NAME#SUFFIX, unique, within the protocol's 64 bytes.
        ids = [re.search(r" id=(\S+)", l).group(1) for l in sent.values()]
        self.assertEqual(len(set(ids)), 3)
        for i in ids:
            self.assertTrue(i.startswith("t#"), i)
            self.assertLessEqual(len(i), 64)

    def test_same_op_key_without_ref_in_send_order(self):
        # An older lockd refuses ref=; the client asks again without it
        # and matches the answers of one (op, key) in the order sent.
        order = []

        def h(c, line):
            w = words(line)
            if w[0] == "A" and ref_of(line):
                return [f'E {w[1]} A: "ref={ref_of(line)}": want limit=N or id=ID after the wait']
            if w[0] == "A":
                order.append(c)
                if len(order) == 2:
                    order[0].send(f"A {w[1]} {TOKEN}")
                    order[1].send(f"A {w[1]} {TOKEN + 1}")
            return None

        n = self.node(h)
        c = self.client(n.addr, conns_per_addr=1)
        got = []
        ts = [threading.Thread(target=lambda: got.append(c.acquire("k", 5, wait=2))) for _ in range(2)]
        ts[0].start()
        self.assertTrue(n.wait_for(lambda: len([l for _, l in n.lines if l.startswith("A ") and " ref=" not in l]) == 1))
        ts[1].start()
        for t in ts:
            t.join(5)
        self.assertEqual(sorted(l.token for l in got), [TOKEN, TOKEN + 1])

    def test_older_node_requiring_a_secret(self):
        # Such a node refuses ref= before authentication naming no key;
        # asked again without it, it says a secret is needed.
        def h(c, line):
            w = words(line)
            if w[0] == "A" and ref_of(line):
                return [f'E - A: "ref={ref_of(line)}": want limit=N or id=ID after the wait']
            if w[0] == "A":
                return [f"E {w[1]} A: authenticate first: this node requires a secret"]
            return None

        n = self.node(h)
        c = self.client(n.addr)
        # Both connections are up before the refusal, so a third one
        # would be a redial after a drop.
        self.assertTrue(n.wait_for(lambda: len(n.conns) == 2))
        with self.assertRaises(lockd.AuthError):
            c.acquire("k", 5, wait=1)
        self.assertEqual(len(n.conns), 2, "no connection was dropped")

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
        c = self.client(n.addr)
        t0 = time.monotonic()
        c.release("k", TOKEN)
        self.assertEqual(len(seen), 4)
        # Three re-sends, 50 ms apart (measured where they arrive, so with
        # the scheduler's jitter): neither a flood nor a stall.
        span = seen[3] - seen[0]
        self.assertTrue(0.1 <= span <= 0.5, span)
        self.assertLess(time.monotonic() - t0, 1.0)

    def test_release_gives_up_after_release_for(self):
        n = self.node(lambda c, l: None)
        c = self.client(n.addr, release_for=0.3, failure_timeout=5)
        t0 = time.monotonic()
        with self.assertRaises(lockd.Unavailable):
            c.release("k", TOKEN)
        self.assertLess(time.monotonic() - t0, 1.0)
        self.assertGreaterEqual(len(n.sent("R ")), 4)

    def test_notheld_timeout_limit_refused(self):
        def h(c, line):
            w = words(line)
            r = ref_of(line)
            if w[0] == "R":
                return [f"R {w[1]} notheld"]
            if w[0] == "N":
                return [f"N {w[1]} notheld"]
            if w[0] == "A" and w[1] == "busy":
                return [f"T busy ref={r}"]
            if w[0] == "A" and w[1] == "sem":
                return [f"E sem A: ref={r} limit mismatch: key allows 2"]
            if w[0] == "A":
                return [f"E {w[1]} A: ref={r} too many waiters"]
            return None

        n = self.node(h)
        c = self.client(n.addr)
        with self.assertRaises(lockd.NotHeld):
            c.release("k", TOKEN)
        with self.assertRaises(lockd.NotHeld):
            c.renew("k", TOKEN, 5)
        with self.assertRaises(lockd.Timeout):
            c.acquire("busy", 5, wait=1)
        self.assertFalse(c.try_acquire("busy", 5))
        self.assertTrue(any(words(l)[3] == "-" for l in n.sent("A busy")), "try-lock sends wait -")
        with self.assertRaises(lockd.LimitMismatch):
            c.acquire("sem", 5, limit=3)
        with self.assertRaises(lockd.Refused):
            c.acquire("other", 5)
        with self.assertRaises(ValueError):
            c.acquire("k", 0)
        with self.assertRaises(ValueError):
            c.acquire("k", 5, limit=0)

    def test_follows_redirect(self):
        b = self.node(lambda c, l: [f"A {words(l)[1]} {TOKEN} ref={ref_of(l)}"] if l.startswith("A ") else None)
        a = self.node(lambda c, l: [f"M {words(l)[1]} {b.addr} ref={ref_of(l)}"] if l.startswith("A ") else None)
        c = self.client(a.addr)
        lock = c.acquire("k", 5, wait=2)
        self.assertEqual(lock.token, TOKEN)
        self.assertEqual(c.active, b.addr)

    def test_redirects_while_nodes_settle_are_followed(self):
        # Longer than ten redirects take, shorter than three failure timeouts.
        a, b = bouncing_pair(self.node, time.monotonic() + 0.8)
        c = self.client([a.addr, b.addr], failure_timeout=0.5)
        lock = c.acquire("k", 5, wait=5)
        self.assertEqual(lock.token, TOKEN)
        self.assertEqual(c.active, a.addr)

    def test_wait_ending_among_redirects_says_nodes_disagree(self):
        a, b = bouncing_pair(self.node, time.monotonic() + 3600)
        c = self.client([a.addr, b.addr], failure_timeout=1.0)
        with self.assertRaises(lockd.Unavailable) as cm:
            c.acquire("k", 5, wait=0.7)
        self.assertNotIsInstance(cm.exception, lockd.Timeout)
        self.assertIn("the wait ran out while the request was redirected", str(cm.exception))

    def test_redirects_between_nodes_that_never_agree_end(self):
        a, b = bouncing_pair(self.node, time.monotonic() + 3600)
        c = self.client([a.addr, b.addr], failure_timeout=0.1)
        t0 = time.monotonic()
        with self.assertRaises(lockd.Unavailable) as cm:
            c.acquire("k", 5, wait=5)
        took = time.monotonic() - t0
        self.assertIn("times in a row over", str(cm.exception))
        self.assertIn("the nodes disagree", str(cm.exception))
        self.assertGreaterEqual(took, 0.3, "redirects are followed for three failure timeouts")
        self.assertLess(len(a.sent("A ")) + len(b.sent("A ")), 100, "and paced, not a busy loop")

    def test_frozen_node_is_left_and_acquire_moves_with_its_id(self):
        frozen = self.node(lambda c, l: None)
        live = self.node(lambda c, l: [f"A {words(l)[1]} {TOKEN} ref={ref_of(l)}"] if l.startswith("A ") else None)
        c = self.client([frozen.addr, live.addr])
        self.assertTrue(frozen.wait_for(lambda: len(frozen.conns) == 1))
        self.assertTrue(live.wait_for(lambda: len(live.conns) == 1))
        time.sleep(0.05)
        frozen.answer_status = False
        # Pin the first send on the frozen node: it answers nothing, not even S.
        with c._mu:
            c._active = frozen.addr
        t0 = time.monotonic()
        lock = c.acquire("k", 5, wait=10)
        took = time.monotonic() - t0
        self.assertEqual(lock.token, TOKEN)
        self.assertLess(took, 1.5, "a silent node is given up after about the failure timeout")
        fid = re.search(r" id=(\S+)", frozen.sent("A k")[0]).group(1)
        lid = re.search(r" id=(\S+)", live.sent("A k")[0]).group(1)
        self.assertEqual(fid, lid, "the re-sent acquire keeps its id")
        wait_left = float(words(live.sent("A k")[0])[3])
        self.assertLess(wait_left, 10)

    def test_unavailable_only_when_every_connection_was_tried(self):
        c = self.client("127.0.0.1:1,127.0.0.1:2")
        with self.assertRaises(lockd.Unavailable) as cm:
            c.acquire("k", 5, wait=1)
        self.assertIn("127.0.0.1:1", str(cm.exception))
        self.assertIn("127.0.0.1:2", str(cm.exception))

    def test_cancel_withdraws_with_x(self):
        def h(c, line):
            w = words(line)
            if w[0] == "X":
                return ["T k ref=" + pending[0], "X k ok"]
            if w[0] == "A":
                pending.append(ref_of(line))
            return None

        pending = []
        n = self.node(h)
        c = self.client(n.addr)
        ev = threading.Event()
        threading.Timer(0.1, ev.set).start()
        with self.assertRaises(lockd.Cancelled):
            c.acquire("k", 5, cancel=ev)
        self.assertTrue(n.wait_for(lambda: any(l.startswith("X ") for _, l in n.lines), 2))
        aid = re.search(r" id=(\S+)", n.sent("A k")[0]).group(1)
        self.assertEqual(n.sent("X ")[0], f"X k {aid}")
        self.assertEqual(c.queue.__name__, "queue")  # the client is still usable

    def test_grant_after_abandon_is_released(self):
        refs = []

        def h(c, line):
            w = words(line)
            if w[0] == "A":
                refs.append((c, ref_of(line)))
            if w[0] == "X":
                cc, r = refs[0]
                return [f"A k {TOKEN} ref={r}", "X k none"]
            if w[0] == "R":
                return [f"R k ok"]
            return None

        n = self.node(h)
        c = self.client(n.addr)
        ev = threading.Event()
        threading.Timer(0.05, ev.set).start()
        with self.assertRaises(lockd.Cancelled):
            c.acquire("k", 5, cancel=ev)
        self.assertTrue(n.wait_for(lambda: any(l == f"R k {TOKEN}" for _, l in n.lines), 2))

    def test_hold_renews_and_signals_expiry(self):
        state = {"answer": True, "renews": 0}

        def h(c, line):
            w = words(line)
            if w[0] == "A":
                return [f"A {w[1]} {TOKEN} ref={ref_of(line)}"]
            if w[0] == "N":
                state["renews"] += 1
                return [f"N {w[1]} ok"] if state["answer"] else None
            if w[0] == "R":
                return [f"R {w[1]} ok"]
            return None

        n = self.node(h)
        # The node answers keep-alives: a short failure timeout (at most
        # half the lease, min_hold_lease) keeps the connection.
        c = self.client(n.addr, failure_timeout=0.15)
        lease = 0.3
        with c.hold("k", lease=lease) as lock:
            self.assertTrue(n.wait_for(lambda: state["renews"] >= 2, 2))
            self.assertFalse(lock.lost.is_set())
            lock.check()
            state["answer"] = False
            stopped = time.monotonic()
            self.assertTrue(lock.lost.wait(2))
            # Lost no later than a lease after the last acknowledged renewal was sent.
            self.assertLess(time.monotonic() - stopped, lease + 0.15)
            self.assertEqual(lock.reason, "expired")
            with self.assertRaises(lockd.LockLost):
                lock.check()

    def test_hold_notheld(self):
        def h(c, line):
            w = words(line)
            if w[0] == "A":
                return [f"A {w[1]} {TOKEN} ref={ref_of(line)}"]
            if w[0] == "N":
                return [f"N {w[1]} notheld"]
            return None

        n = self.node(h)
        c = self.client(n.addr, failure_timeout=0.15)
        lock = c.hold("k", lease=0.3)
        self.assertTrue(lock.lost.wait(2))
        self.assertEqual(lock.reason, "notheld")

    def test_watch_and_moves(self):
        b_conns = []

        def hb(c, line):
            if line.startswith("L "):
                b_conns.append(c)
                return ["L w 5 9 0"]
            return None

        b = self.node(hb)

        def ha(c, line):
            if line.startswith("L "):
                threading.Timer(0.05, lambda: (c.send("L w 5 10 1 0.1,1.2.3.4:5"), c.send(f"M w {b.addr}"))).start()
                return ["L w - - 0"]
            return None

        a = self.node(ha)
        c = self.client(a.addr)
        wt = c.watch("w")
        got = [wt.get(2) for _ in range(3)]
        self.assertEqual([q.token for q in got], [None, 5, 5])
        self.assertEqual(got[1].nwaiters, 1)
        self.assertEqual(len(b_conns), 1, "the watch moved to the node the M named")
        wt.close()
        self.assertTrue(b.wait_for(lambda: any(l == "U w" for _, l in b.lines), 2))
        self.assertIsNone(wt.get(0.1))

    def test_watch_follows_disagreeing_nodes_paced(self):
        settled = time.monotonic() + 0.5
        addrs = {}

        def bounce(me, other):
            def h(c, line):
                if not line.startswith("L "):
                    return None
                if time.monotonic() < settled or me == "b":
                    return [f"M w {addrs[other]}"]
                return ["L w - - 0"]
            return h

        a = self.node(bounce("a", "b"))
        b = self.node(bounce("b", "a"))
        addrs.update(a=a.addr, b=b.addr)
        c = self.client([a.addr, b.addr])
        wt = c.watch("w")
        q = wt.get(5)
        self.assertIsNotNone(q, "the watch is served once the nodes agree")
        sent = len(a.sent("L ")) + len(b.sent("L "))
        self.assertLess(sent, 60, f"{sent} subscriptions in 0.5 s: redirects between nodes are followed paced")
        wt.close()

    def test_hold_max_and_timedelta(self):
        leases = []

        def h(c, line):
            w = words(line)
            if w[0] == "A":
                leases.append(float(w[2]))
                return [f"A {w[1]} {TOKEN} ref={ref_of(line)}"]
            if w[0] == "N":
                leases.append(float(w[3]))
                return [f"N {w[1]} ok"]
            if w[0] == "R":
                return [f"R {w[1]} ok"]
            return None

        n = self.node(h)
        c = self.client(n.addr, failure_timeout=0.15)
        t0 = time.monotonic()
        lock = c.hold("k", lease=datetime.timedelta(seconds=0.3), max_hold=0.4)
        self.assertTrue(lock.lost.wait(2))
        self.assertEqual(lock.reason, "max")
        self.assertGreaterEqual(time.monotonic() - t0, 0.39)
        self.assertLess(time.monotonic() - t0, 2.0, "renewals stop at max_hold")
        # The last renewal asks only for what is left of max_hold.
        self.assertEqual(leases[0], 0.3)
        self.assertLess(leases[-1], 0.3)

    def test_watch_subscribes_again_after_a_drop(self):
        seen = []

        def h(c, line):
            if line.startswith("L "):
                seen.append(c)
                if len(seen) == 1:
                    threading.Timer(0.05, c.close).start()
                    return ["L w - - 0"]
                return ["L w 7 5 0"]
            return None

        n = self.node(h)
        c = self.client(n.addr)
        with c.watch("w") as wt:
            self.assertIsNone(wt.get(2).token)
            self.assertEqual(wt.get(2).token, 7, "the state at the new connection comes first")
        self.assertEqual(len(seen), 2)
        self.assertIsNot(seen[0], seen[1])

    def test_second_watcher_gets_the_state_the_first_does_not_again(self):
        count = [0]

        def h(c, line):
            if line.startswith("L "):
                count[0] += 1
                return [f"L w {count[0]} 5 0"]
            return None

        n = self.node(h)
        c = self.client(n.addr)
        first = c.watch("w")
        self.assertEqual(first.get(2).token, 1)
        second = c.watch("w")
        self.assertEqual(second.get(2).token, 2)
        self.assertIsNone(first.get(0.2), "the refresh for the second watcher is not news to the first")
        second.close()
        self.assertFalse(any(l == "U w" for _, l in n.lines), "one watcher is left: no U")
        first.close()
        self.assertTrue(n.wait_for(lambda: any(l == "U w" for _, l in n.lines), 2))

    def test_election_on_an_older_node_carries_the_value_in_the_id(self):
        # A node older than values refuses value= as it refuses any word it
        # does not know; the value then goes in the acquire's id.
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

        ids = [""]
        n = self.node(h)
        c = self.client(n.addr)
        e = c.election("lead")
        lead = e.campaign("node-a", lease=5)
        self.assertTrue(ids[0].startswith("node-a#"))
        self.assertEqual(e.leader(), ("node-a", TOKEN))
        e.resign()
        self.assertEqual(lead.reason, "released")
        # The client remembers: the next campaign does not try value= again.
        e.campaign("node-b", lease=5)
        self.assertEqual(len([l for l in n.sent("A ") if "value=" in l]), 1)
        e.resign()
        # A value that does not fit an id is refused as the node refused it.
        c2 = self.client(n.addr)
        with self.assertRaises(lockd.Refused):
            c2.election("lead").campaign("has space")

    def test_close_fails_waiting_calls(self):
        n = self.node(lambda c, l: None)
        c = self.client(n.addr)
        errs = []
        t = threading.Thread(target=lambda: self._catch(errs, lambda: c.acquire("k", 5)))
        t.start()
        self.assertTrue(n.wait_for(lambda: any(l.startswith("A ") for _, l in n.lines), 2))
        c.close()
        t.join(3)
        self.assertEqual([type(e) for e in errs], [lockd.Closed])
        with self.assertRaises(lockd.Closed):
            c.queue("k")

    @staticmethod
    def _catch(errs, fn):
        try:
            fn()
        except Exception as e:
            errs.append(e)


if __name__ == "__main__":
    unittest.main()
