import datetime
import unittest

from lockd import _wire as w


class FormatTest(unittest.TestCase):
    def test_durations(self):
        self.assertEqual(w.format_ms(30000), "30")
        self.assertEqual(w.format_ms(500), "0.5")
        self.assertEqual(w.format_ms(2250), "2.25")
        self.assertEqual(w.format_ms(1), "0.001")
        # A wait rounds up, so a positive wait never becomes 0 (forever).
        self.assertEqual(w.millis(0.0001, True), 1)
        self.assertEqual(w.millis(1.0, True), 1000)
        self.assertEqual(w.millis(0.0004, False), 0)
        self.assertEqual(w.seconds(datetime.timedelta(milliseconds=1500), "x"), 1.5)
        with self.assertRaises(TypeError):
            w.seconds("3", "lease")
        with self.assertRaises(ValueError):
            w.seconds(float("nan"), "lease")

    def test_acquire_line(self):
        self.assertEqual(w.acquire_line("k", 30000, 0, 1, "n#x-1", "1"), b"A k 30 0 id=n#x-1 ref=1\n")
        self.assertEqual(w.acquire_line("k", 1500, None, 3, "", None), b"A k 1.5 - limit=3\n")

    def test_keys(self):
        w.check_key("acquire", "deploy")
        w.check_key("acquire", "\u00e9" * 127)
        for bad in ("", "a b", "a\tb", "x" * 256, "\u00e9" * 128, "a\x7fb"):
            with self.assertRaises(ValueError, msg=repr(bad)):
                w.check_key("acquire", bad)

    def test_names_and_ids(self):
        self.assertEqual(w.clean_name("a b\tc"), "a_b_c")
        long = "\u00e9" * 40
        got = w.clean_name(long)
        self.assertLessEqual(len(got.encode()), w.MAX_NAME_LEN)
        self.assertEqual(got, "\u00e9" * (w.MAX_NAME_LEN // 2))
        self.assertEqual(w.base36(0), "0")
        self.assertEqual(w.base36(36 ** 3 - 1), "zzz")
        self.assertEqual(w.id_name("alice@h:1#9f3c-1"), "alice@h:1")
        self.assertEqual(w.id_name("plain"), "plain")

    def test_addrs(self):
        self.assertEqual(w.split_addrs("a:1, b:2,a:1"), ["a:1", "b:2"])
        self.assertEqual(w.split_addrs(["[::1]:7070"]), ["[::1]:7070"])
        for bad in ("", "a:1,,b:2", "nohost", "h:port"):
            with self.assertRaises(ValueError, msg=bad):
                w.split_addrs(bad)


class ParseTest(unittest.TestCase):
    def test_refs(self):
        a = w.parse_answer(b"A k 7360982537641984001 ref=2\n")
        self.assertEqual((a.kind, a.key, a.fields, a.ref, a.req_op()), ("A", "k", ["7360982537641984001"], "2", "A"))
        t = w.parse_answer(b"T k ref=z9")
        self.assertEqual((t.ref, t.req_op(), t.fields), ("z9", "A", []))
        m = w.parse_answer(b"M k 127.0.0.1:7071 ref=3")
        self.assertEqual((m.ref, m.fields, m.req_op()), ("3", ["127.0.0.1:7071"], ""))
        e = w.parse_answer(b"E k A: ref=5 limit mismatch: key allows 1")
        self.assertEqual((e.ref, e.req_op(), e.error_text()), ("5", "A", "limit mismatch: key allows 1"))
        # Without ref, and the refusal an older lockd gives to one.
        o = w.parse_answer(b'E k A: "ref=1": want limit=N or id=ID after the wait\r\n')
        self.assertIsNone(o.ref)
        self.assertEqual(o.req_op(), "A")
        self.assertIn('"ref=', o.error_text())
        r = w.parse_answer(b"E k R: want R KEY TOKEN")
        self.assertEqual((r.req_op(), r.ref), ("R", None))
        self.assertEqual(w.parse_answer(b"E - ?: bad").req_op(), "?")
        for bad in (b"", b"A", b"a k", b"AB k"):
            with self.assertRaises(w.BadLine):
                w.parse_answer(bad)

    def test_queue(self):
        q = w.parse_queue("deploy", "7360982537641984005 29.9 1 2.1,127.0.0.1:51260 id=7360982537641984005,alice#1 wid=1,bob#7".split())
        self.assertEqual(q.token, 7360982537641984005)
        self.assertEqual(q.holders[0].lease_left, 29.9)
        self.assertEqual(q.holders[0].id, "alice#1")
        self.assertEqual((q.nwaiters, q.waiters[0].addr, q.waiters[0].waited, q.waiters[0].id), (1, "127.0.0.1:51260", 2.1, "bob#7"))
        s = w.parse_queue("b", "3 41.2 0 limit=2 holder=4,58.7 id=3,n#1 id=4,c#=x,y future=1".split())
        self.assertEqual(s.limit, 2)
        self.assertEqual([(h.token, h.lease_left, h.id) for h in s.holders], [(3, 41.2, "n#1"), (4, 58.7, "c#=x,y")])
        e = w.parse_queue("n", ["-", "-", "0"])
        self.assertEqual((e.token, e.holders, e.nwaiters, e.limit), (None, [], 0, 1))
        for bad in (["-", "-"], ["x", "1", "0"], ["-", "-", "n"]):
            with self.assertRaises(w.BadLine):
                w.parse_queue("k", bad)

    def test_status(self):
        st = w.parse_status("self=a:1 role=active active=- token=7360982537641984001 seq=6 uptime=2.5 keys=3 waiters=0 sticky=false "
                            "degraded=true future=x peer=a:1,active,up,1,0,5 peer=b:2,standby,down,1,2,5 junk".split())
        self.assertEqual((st["self"], st["role"], st["active"], st["future"]), ("a:1", "active", "", "x"))
        self.assertEqual((st["token"], st["seq"], st["keys"], st["waiters"], st["uptime"]), (7360982537641984001, 6, 3, 0, 2.5))
        self.assertIs(st["sticky"], False)
        self.assertIs(st["degraded"], True)
        self.assertEqual(st["peers"], [
            {"addr": "a:1", "role": "active", "up": True, "seq": 1, "lag": 0, "token": 5},
            {"addr": "b:2", "role": "standby", "up": False, "seq": 1, "lag": 2, "token": 5},
        ])
        self.assertNotIn("junk", st)
        for bad in ("keys=x", "peer=a:1,active", "seq=-"):
            with self.assertRaises(w.BadLine):
                w.parse_status([bad])


if __name__ == "__main__":
    unittest.main()
