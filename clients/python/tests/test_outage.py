"""The client when the cluster fails under it, and when its caller goes:
a redirect to a node it has down, a wait through an outage or for a
cluster not up yet, a watch that loses the cluster, an interrupt or a cancelled task that gives up an
acquire; and what it refuses (a held lease too short for a failover) or
reads typed (a status)."""

import asyncio
import errno
import os
import re
import signal
import socket
import threading
import time
import unittest

import lockd

from .fake import FakeNode
from .test_client import TOKEN, opts, ref_of, words


def interrupt_soon():
    """Sends this process SIGINT in a moment, as Ctrl-C does: Python raises
    KeyboardInterrupt in the main thread, where the tests run."""
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()


def port_of(addr):
    return int(addr.rsplit(":", 1)[1])


def closed_port():
    """An address nothing listens at: a port just freed, where a node
    starts later."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    addr = "127.0.0.1:%d" % s.getsockname()[1]
    s.close()
    return addr


def granting(c, line):
    w = words(line)
    if w[0] == "A":
        return [f"A {w[1]} {TOKEN} ref={ref_of(line)}"]
    if w[0] in ("R", "N"):
        return [f"{w[0]} {w[1]} ok"]
    if w[0] == "Q":
        return [f"Q {w[1]} - - 0"]
    return None


class OutageTest(unittest.TestCase):
    def setUp(self):
        self.nodes = []
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()
        for n in self.nodes:
            n.close()

    def node(self, handler, port=0):
        n = FakeNode(handler, port)
        self.nodes.append(n)
        return n

    def client(self, addrs, **kw):
        c = lockd.Client(addrs, **opts(**kw))
        self.clients.append(c)
        return c

    def wait(self, pred, timeout=5.0):
        end = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > end:
                self.fail("condition not met in time")
            time.sleep(0.01)

    def up(self, c, *addrs):
        """Waits until the client has a connection up to each of addrs."""
        self.wait(lambda: all(any(cn.addr == a and cn.state == "up" for cn in c._conns) for a in addrs))

    def down(self, c, addr):
        """Waits until the client has every connection to addr down."""
        self.wait(lambda: c._dead_locked(addr))

    def test_moved_to_a_restarted_node_dials_it_at_once(self):
        first = self.node(granting)
        addr = first.addr
        standby = self.node(lambda c, l: [f"M {words(l)[1]} {addr}" + (f" ref={ref_of(l)}" if ref_of(l) else "")])
        c = self.client([addr, standby.addr], redial=3600)
        self.up(c, addr, standby.addr)
        first.close()
        self.down(c, addr)
        back = self.node(granting, port_of(addr))
        t0 = time.monotonic()
        lock = c.acquire("k", 1, wait=2)
        c.renew("k", lock.token, 1)
        c.release("k", lock.token)
        self.assertLess(time.monotonic() - t0, 0.5, "the restarted node is dialled at once, not at the next redial")
        self.assertEqual(len([l for _, l in back.lines if not l.startswith("S ")]), 3)

    def test_stale_redirect_error_counts_from_the_silence(self):
        first = self.node(granting)
        addr = first.addr
        standby = self.node(lambda c, l: [f"M {words(l)[1]} {addr}"])
        c = self.client([addr, standby.addr], redial=3600, failure_timeout=0.05)
        self.up(c, addr, standby.addr)
        first.close()
        self.down(c, addr)
        with c._mu:
            for cn in c._conns:
                if cn.addr == addr:
                    cn.last_read = time.monotonic() - 20
        with self.assertRaises(lockd.Unavailable) as e:
            c.queue("k")
        m = re.search(r"which has not answered this client for ([0-9.]+)s", str(e.exception))
        self.assertIsNotNone(m, str(e.exception))
        self.assertGreaterEqual(float(m.group(1)), 20)

    def test_waiting_calls_outlast_an_outage(self):
        for name, call in (
            ("acquire", lambda c: c.acquire("k", 1)),
            ("acquire with a wait", lambda c: c.acquire("k", 1, 5)),
            ("hold", lambda c: c.hold("k", 1).release()),
            ("campaign", lambda c: c.election("k").campaign("me", lease=1).release()),
        ):
            with self.subTest(name):
                n = self.node(granting)
                addr = n.addr
                c = self.client(addr, redial=3600, failure_timeout=0.2)
                self.up(c, addr)
                n.close()
                self.down(c, addr)
                out = []
                t = threading.Thread(target=lambda: out.append(self._try(call, c)), daemon=True)
                t.start()
                t.join(0.7)
                self.assertEqual(out, [], "returned during the outage")
                self.node(granting, port_of(addr))
                t.join(5)
                self.assertEqual(out, [None], "once the node is back")

    def test_a_wait_that_runs_out_in_an_outage_is_unavailable(self):
        # Not before the wait ran out, and not a Timeout: no node said the
        # key was busy. A try does not wait at all.
        n = self.node(granting)
        c = self.client(n.addr, redial=3600, failure_timeout=0.2)
        self.up(c, n.addr)
        n.close()
        self.down(c, n.addr)
        t0 = time.monotonic()
        err = self._try(lambda c: c.acquire("k", 1, 0.6), c)
        took = time.monotonic() - t0
        t0 = time.monotonic()
        try_err = self._try(lambda c: c.try_acquire("k", 1), c)
        try_took = time.monotonic() - t0
        async_err = asyncio.run(self._async_acquire(0.6))
        for name, e in (("Client", err), ("AsyncClient", async_err)):
            with self.subTest(name):
                self.assertIsInstance(e, lockd.Unavailable, repr(e))
                self.assertNotIsInstance(e, lockd.Timeout)
                self.assertIn("for the whole wait", str(e))
        self.assertGreaterEqual(took, 0.6, "gave up before the wait ran out")
        self.assertIsInstance(try_err, lockd.Unavailable, repr(try_err))
        self.assertLess(try_took, 0.6, "a try waited in the outage")

    async def _async_acquire(self, wait):
        """An AsyncClient that was up, then lost its node: the error of an
        acquire with wait."""
        n = self.node(granting)
        async with lockd.AsyncClient(n.addr, **opts(redial=3600, failure_timeout=0.2)) as c:
            end = time.monotonic() + 5
            while not any(cn.state == "up" for cn in c._conns):
                self.assertLess(time.monotonic(), end, "the client never came up")
                await asyncio.sleep(0.01)
            n.close()
            while not c._dead_locked(n.addr):
                self.assertLess(time.monotonic(), end, "the node never went down for the client")
                await asyncio.sleep(0.01)
            t0 = time.monotonic()
            try:
                await c.acquire("k", 1, wait)
            except lockd.Error as e:
                self.assertGreaterEqual(time.monotonic() - t0, wait, "gave up before the wait ran out")
                return e
            return None

    @staticmethod
    def _try(call, c):
        try:
            call(c)
            return None
        except Exception as e:  # noqa: BLE001 - the test reports it
            return e

    # A client made while nothing listens at its address yet (a cluster
    # starting): an acquire with a wait waits for a node to start, to the
    # end of its wait; one that waits forever, and a try, fail at once, so
    # that a client given a wrong address does not hang on it for good.

    def test_an_acquire_that_waits_forever_on_an_address_never_reached_fails_at_once(self):
        addr = closed_port()
        c = self.client(addr, failure_timeout=0.2)
        stop = threading.Event()  # ends the acquire, should it wait
        self.addCleanup(stop.set)
        for name, call in (("acquire", lambda c: c.acquire("k", 1, cancel=stop)), ("try_acquire", lambda c: c.try_acquire("k", 1))):
            with self.subTest(name):
                out = []
                t = threading.Thread(target=lambda: out.append(self._try(call, c)), daemon=True)
                t.start()
                t.join(0.5)
                self.assertEqual(len(out), 1, "waited on an address never reached")
                self.assertIsInstance(out[0], lockd.Unavailable, repr(out[0]))
        with self.subTest("AsyncClient"):
            e, _ = asyncio.run(self._never_reached(addr, lambda c: asyncio.wait_for(c.acquire("k", 1), 0.5)))
            self.assertIsInstance(e, lockd.Unavailable, "waited on an address never reached: %r" % e)

    def test_a_wait_on_a_node_that_never_answers_fails_at_once(self):
        # It takes the connection: something listens there, maybe not lockd.
        n = self.node(granting)
        n.answer_status = False
        c = self.client(n.addr, failure_timeout=0.2)
        t0 = time.monotonic()
        err = self._try(lambda c: c.acquire("k", 1, 3), c)
        took = time.monotonic() - t0
        async_err, async_took = asyncio.run(self._never_reached(n.addr, lambda c: c.acquire("k", 1, 3)))
        for name, e, t in (("Client", err, took), ("AsyncClient", async_err, async_took)):
            with self.subTest(name):
                self.assertIsInstance(e, lockd.Unavailable, repr(e))
                self.assertNotIn("whole wait", str(e))
                self.assertIn("speaks TLS to a client without TLS", str(e), "a silent node may be one that speaks TLS")
                self.assertLess(t, 1.5, "waited on a node that never answered")

    def test_refusals_of_every_address_of_a_name_count_as_nothing_listening(self):
        # asyncio joins the errors of a name's several addresses into one
        # OSError without an errno; refused on every address is refused.
        from lockd._conn import _dial_error

        both = OSError("Multiple exceptions: [Errno %d] Connect call failed ('::1', 7070, 0, 0), [Errno %d] Connect call failed ('127.0.0.1', 7070)" % (errno.ECONNREFUSED, errno.ECONNREFUSED))
        self.assertIsInstance(_dial_error("localhost:7070", both), ConnectionRefusedError)
        mixed = OSError("Multiple exceptions: [Errno %d] Connect call failed ('::1', 7070, 0, 0), [Errno %d] Connect call failed ('127.0.0.1', 7070)" % (errno.ENETUNREACH, errno.ECONNREFUSED))
        self.assertNotIsInstance(_dial_error("localhost:7070", mixed), ConnectionRefusedError)
        self.assertIsInstance(_dial_error("localhost:7070", ConnectionRefusedError(errno.ECONNREFUSED, "refused")), ConnectionRefusedError)

    def test_a_wait_with_nothing_listening_yet_runs_out_unavailable(self):
        addr = closed_port()
        c = self.client(addr, failure_timeout=0.2)
        t0 = time.monotonic()
        err = self._try(lambda c: c.acquire("k", 1, 0.3), c)
        took = time.monotonic() - t0
        async_err, async_took = asyncio.run(self._never_reached(addr, lambda c: c.acquire("k", 1, 0.3)))
        for name, e, t in (("Client", err, took), ("AsyncClient", async_err, async_took)):
            with self.subTest(name):
                self.assertIsInstance(e, lockd.Unavailable, repr(e))
                self.assertNotIsInstance(e, lockd.Timeout)
                self.assertIn("for the whole wait", str(e))
                self.assertGreaterEqual(t, 0.3, "gave up before the wait ran out")
                self.assertLess(t, 2.0)

    def test_a_wait_covers_a_node_not_up_yet(self):
        with self.subTest("Client"):
            addr = closed_port()
            c = self.client(addr, failure_timeout=0.2)
            out = []
            t = threading.Thread(target=lambda: out.append(self._try(lambda c: c.acquire("k", 1, 10), c)), daemon=True)
            t.start()
            t.join(0.3)
            self.assertEqual(out, [], "returned while nothing listened yet")
            self.node(granting, port_of(addr))
            t.join(5)
            self.assertEqual(out, [None], "once a node listens")
        with self.subTest("AsyncClient"):
            self.assertIsNone(asyncio.run(self._async_acquire_not_up_yet(closed_port())))

    async def _never_reached(self, addr, call):
        """call's error on a new AsyncClient of addr (None when it
        returned), and how long it took."""
        async with lockd.AsyncClient(addr, **opts(failure_timeout=0.2)) as c:
            t0 = time.monotonic()
            try:
                await call(c)
            except (lockd.Error, asyncio.TimeoutError) as e:
                return e, time.monotonic() - t0
            return None, time.monotonic() - t0

    async def _async_acquire_not_up_yet(self, addr):
        """An acquire with a wait on an AsyncClient of addr, started
        before a node listens there: its error, None when granted."""
        async with lockd.AsyncClient(addr, **opts(failure_timeout=0.2)) as c:
            task = asyncio.ensure_future(c.acquire("k", 1, 10))
            await asyncio.sleep(0.3)
            if task.done():
                return task.exception() or AssertionError("granted while nothing listened yet")
            self.node(granting, port_of(addr))
            try:
                await asyncio.wait_for(task, 5)
            except lockd.Error as e:
                return e
            return None

    def test_watch_says_stale_and_current(self):
        state = {"words": "5 9 0 id=5,leader#1"}

        def h(c, line):
            w = words(line)
            if w[0] == "L":
                return [f"L {w[1]} {state['words']}"]
            if w[0] == "U":
                return [f"U {w[1]} ok"]
            return None

        n = self.node(h)
        addr = n.addr
        c = self.client(addr, redial=0.2, failure_timeout=0.2)
        wt = c.watch("k")
        obs = c.election("k").observe()
        q = wt.get(5)
        self.assertEqual((q.token, q.stale, wt.stale), (5, False, False))
        self.assertEqual((next(obs), obs.stale), (("leader", 5), False))
        lost = time.monotonic()
        n.close()
        # (The observation's L line may have reached the watch too, as a
        # second copy of the current state: the stale one follows it.)
        q = wt.get(5)
        while q is not None and not q.stale:
            q = wt.get(5)
        self.assertIsNotNone(q)
        self.assertEqual((q.token, q.stale, wt.stale), (5, True, True), "the last state again, stale")
        self.assertGreaterEqual(time.monotonic() - lost, 0.2)
        lead = next(obs)
        self.assertEqual((lead, lead.stale, obs.stale), (("leader", 5), True, True))
        state["words"] = "6 9 0 id=6,other#1"
        self.node(h, port_of(addr))
        q = wt.get(5)
        self.assertEqual((q.token, q.stale, wt.stale), (6, False, False), "current again: the state there")
        lead = next(obs)
        self.assertEqual((lead, lead.stale), (("other", 6), False))
        wt.close()
        obs.close()

    def test_interrupt_withdraws_a_waiting_acquire(self):
        def h(c, line):
            w = words(line)
            if w[0] == "X":
                return [f"X {w[1]} ok"]
            return None

        n = self.node(h)
        c = self.client(n.addr)
        interrupt_soon()
        with self.assertRaises(KeyboardInterrupt):
            c.acquire("k", 10)
        a = n.sent("A k ")
        self.assertTrue(n.wait_for(lambda: any(l.startswith("X k ") for _, l in n.lines), 2), "the waiter is withdrawn")
        self.assertEqual(n.sent("X k ")[0].split()[2], re.search(r" id=(\S+)", a[0]).group(1))

    def test_interrupt_of_a_hold_releases_a_grant_that_crossed(self):
        def h(c, line):
            w = words(line)
            if w[0] == "A":
                h.acquire = line
                return None
            if w[0] == "X":
                # The grant crossed the withdrawal on the wire.
                return [f"A {w[1]} {TOKEN} ref={ref_of(h.acquire)}", f"X {w[1]} none"]
            if w[0] == "R":
                return [f"R {w[1]} ok"]
            return None

        n = self.node(h)
        c = self.client(n.addr, conns_per_addr=1)
        interrupt_soon()
        with self.assertRaises(KeyboardInterrupt):
            c.hold("k", 10)
        # As a process exits: the client is closed at once, and waits for
        # the node to have the release.
        c.close()
        self.assertIn(f"R k {TOKEN}", n.sent("R k "), "the grant nobody took is released before the client closes")

    def test_cancelled_task_withdraws_its_acquire(self):
        def h(c, line):
            w = words(line)
            if w[0] == "X":
                return [f"X {w[1]} ok"]
            return None

        n = self.node(h)
        c = self.client(n.addr)

        async def main():
            task = asyncio.ensure_future(lockd.to_thread(c.acquire, "k", 10))
            await asyncio.sleep(0.3)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        t0 = time.monotonic()
        asyncio.run(main())
        # asyncio.run waits for the thread: it ended, at once.
        self.assertLess(time.monotonic() - t0, 2)
        self.assertTrue(n.wait_for(lambda: any(l.startswith("X k ") for _, l in n.lines), 2), "the waiter is withdrawn")

    def test_cancelled_task_gives_back_a_grant(self):
        acquires = []

        def h(c, line):
            w = words(line)
            if w[0] == "A":
                acquires.append((c, line))
                return None
            if w[0] in ("R", "N"):
                return [f"{w[0]} {w[1]} ok"]
            return None

        n = self.node(h)
        c = self.client(n.addr, failure_timeout=0.2)

        async def main():
            task = asyncio.ensure_future(lockd.to_thread(c.hold, "k", 10))
            while not acquires:
                await asyncio.sleep(0.001)
            conn, line = acquires[0]
            # The grant comes as the task is cancelled: nobody takes it.
            conn.send(f"A k {TOKEN} ref={ref_of(line)}")
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        self.assertTrue(n.wait_for(lambda: f"R k {TOKEN}" in [l for _, l in n.lines], 2), "the hold nobody took is released")

    def test_hold_refuses_a_lease_too_short_for_a_failover(self):
        n = self.node(granting)
        c = self.client(n.addr, failure_timeout=1)
        self.assertEqual(c.min_hold_lease, 2)
        with self.assertRaisesRegex(ValueError, r"lease 0\.03 s is too short to be renewed across a failover: the shortest is 2 s"):
            c.hold("k", 0.03)
        with self.assertRaisesRegex(ValueError, "the shortest is 2 s"):
            c.election("k").campaign("me", lease=1.5)
        self.assertEqual(n.sent("A "), [])
        c.hold("k", 2).release()

    def test_status_is_typed(self):
        n = self.node(lambda c, l: None)
        n.status_words = ("role=active active=- token=7360982537641984001 seq=6 uptime=2.5 keys=3 waiters=1 sticky=false "
                          "replication=sync degraded=false durability=memory peer=" + n.addr + ",active,up,6,0,7360982537641984001")
        c = self.client(n.addr)
        st = c.status()
        self.assertEqual(
            st,
            {"self": n.addr, "role": "active", "active": "", "token": 7360982537641984001, "seq": 6, "uptime": 2.5, "keys": 3,
             "waiters": 1, "sticky": False, "replication": "sync", "degraded": False, "durability": "memory",
             "peers": [{"addr": n.addr, "role": "active", "up": True, "seq": 6, "lag": 0, "token": 7360982537641984001}]},
        )


if __name__ == "__main__":
    unittest.main()
