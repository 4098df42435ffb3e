"""The blocking client in Python's idiom: its errors are also the
built-in ones, a try-lock is a context manager whether or not the key was
free, a hold's check() reads the clock, a release after a loss raises
nothing, and reads use one buffer."""

import threading
import time
import unittest

import lockd

from .fake import FakeNode
from .test_client import TOKEN, opts, ref_of, words


class IdiomTest(unittest.TestCase):
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

    def test_errors_are_the_builtin_ones_too(self):
        self.assertTrue(issubclass(lockd.Timeout, TimeoutError))
        self.assertTrue(issubclass(lockd.Unavailable, ConnectionError))
        c = self.client("127.0.0.1:1")
        with self.assertRaises(ConnectionError):
            c.acquire("k", 5, wait=1)
        n = self.node(lambda cn, l: [f"T {words(l)[1]} ref={ref_of(l)}"] if l.startswith("A ") else None)
        c = self.client(n.addr)
        with self.assertRaises(TimeoutError):
            c.acquire("k", 5, wait=0.1)

    def test_try_acquire_is_a_context_manager_busy_or_not(self):
        released = []

        def h(cn, line):
            w = words(line)
            if w[0] == "A" and w[1] == "busy":
                return [f"T busy ref={ref_of(line)}"]
            if w[0] == "A":
                return [f"A {w[1]} {TOKEN} ref={ref_of(line)}"]
            if w[0] == "R":
                released.append(line)
                return [f"R {w[1]} ok"]
            return None

        n = self.node(h)
        c = self.client(n.addr)
        with c.try_acquire("busy", 5) as lock:
            self.assertIsNone(lock)
        attempt = c.try_acquire("busy", 5)
        self.assertFalse(attempt)
        self.assertFalse(attempt.acquired)
        with self.assertRaises(lockd.Timeout):
            attempt.token
        with c.try_acquire("free", 5) as lock:
            self.assertIsNotNone(lock)
            assert lock is not None
            self.assertEqual(lock.token, TOKEN)
        self.assertEqual(released, [f"R free {TOKEN}"])
        self.assertEqual(c.try_acquire("free", 5).token, TOKEN)

    def _hold_node(self, renew_answer, release_answer):
        def h(cn, line):
            w = words(line)
            if w[0] == "A":
                return [f"A {w[1]} {TOKEN} ref={ref_of(line)}"]
            if w[0] == "N":
                return [f"N {w[1]} {renew_answer}"] if renew_answer else None
            if w[0] == "R":
                return [f"R {w[1]} {release_answer}"]
            return None

        return self.node(h)

    def test_check_reads_the_clock_not_only_the_loss_event(self):
        # The renewing thread stops before the lease ends, as a starved or
        # late thread would: check() still raises once the lease is over.
        n = self._hold_node(None, "ok")
        c = self.client(n.addr, failure_timeout=0.15)
        h = c.hold("k", lease=0.3)
        h._stop.set()
        h._thread.join(2)
        h.check()
        while time.monotonic() < h.expires:
            time.sleep(0.01)
        with self.assertRaises(lockd.LockLost) as cm:
            h.check()
        self.assertEqual(cm.exception.reason, "expired")
        self.assertTrue(h.lost.is_set())
        self.assertEqual(h.reason, "expired")

    def test_release_after_a_loss_raises_nothing(self):
        for renew, release in (("notheld", "notheld"), (None, "notheld")):
            n = self._hold_node(renew, release)
            c = self.client(n.addr, failure_timeout=0.15)
            h = c.hold("k", lease=0.3)
            self.assertTrue(h.lost.wait(3))
            try:
                try:
                    h.check()
                finally:
                    h.release()
            except lockd.LockLost as e:
                self.assertIn(e.reason, ("notheld", "expired"))
            e = c.election("lead")
            e.campaign("a", lease=0.3)
            time.sleep(0.5)
            e.resign()

    def test_release_while_held_still_raises(self):
        n = self._hold_node("ok", "notheld")
        c = self.client(n.addr, failure_timeout=0.15)
        h = c.hold("k", lease=3)
        with self.assertRaises(lockd.NotHeld):
            h.release()

    def test_reads_use_one_small_buffer(self):
        n = self.node(lambda cn, l: [f"Q {words(l)[1]} - - 0"] if l.startswith("Q ") else None)
        c = self.client(n.addr, conns_per_addr=1)
        c.queue("k")
        sizes = []

        class Spy:
            def __init__(self, sock):
                self.sock = sock

            def __getattr__(self, name):
                return getattr(self.sock, name)

            def recv(self, n, *a):
                sizes.append(n)
                return self.sock.recv(n, *a)

            def recv_into(self, buf, *a):
                sizes.append(len(buf))
                return self.sock.recv_into(buf, *a)

        with c._mu:
            for cn in c._conns:
                cn.sock = Spy(cn.sock)
        for _ in range(3):
            c.queue("k")
        self.assertTrue(sizes)
        self.assertLessEqual(max(sizes), 65536)


if __name__ == "__main__":
    unittest.main()
