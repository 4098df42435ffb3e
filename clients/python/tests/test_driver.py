"""The conformance driver speaks DRIVER.md: results by id, tokens as
strings, error kinds, and an exit within a second of its input closing."""

import json
import os
import subprocess
import sys
import time
import unittest

from .fake import FakeNode

DRIVER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conformance_driver.py")
TOKEN = 18446744073709551615  # the largest u64: a JSON double would lose it


def handler(c, line):
    w = line.split()
    ref = [x for x in w if x.startswith("ref=")]
    if w[0] == "A" and w[1] == "busy":
        return ["T busy " + ref[0]]
    if w[0] == "A":
        return [f"A {w[1]} {TOKEN} {ref[0]}"]
    if w[0] == "R":
        return [f"R {w[1]} ok"]
    return None


class DriverTest(unittest.TestCase):
    def test_commands_results_and_exit(self):
        n = FakeNode(handler)
        self.addCleanup(n.close)
        p = subprocess.Popen([sys.executable, DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(p.kill)
        cmds = [
            {"id": 1, "cmd": "open", "addrs": [n.addr], "failure_timeout_ms": 500, "name": "drv"},
            {"id": 2, "cmd": "acquire", "key": "k", "lease_ms": 5000, "wait_ms": 1000},
            {"id": 3, "cmd": "acquire", "key": "busy", "lease_ms": 5000, "wait_ms": 100},
            {"id": 4, "cmd": "try", "key": "busy", "lease_ms": 5000},
            {"id": 5, "cmd": "release", "key": "k", "token": str(TOKEN)},
            {"id": 6, "cmd": "acquire", "key": "bad key", "lease_ms": 5000},
            {"id": 7, "cmd": "no-such-command"},
        ]
        for c in cmds:
            p.stdin.write(json.dumps(c) + "\n")
        p.stdin.flush()
        got = {}
        while len(got) < len(cmds):
            line = p.stdout.readline()
            self.assertTrue(line, p.stderr.read() if p.poll() is not None else "driver stopped writing")
            r = json.loads(line)
            if "id" in r:
                got[r["id"]] = r
        self.assertTrue(got[1]["ok"])
        self.assertEqual(got[2]["token"], str(TOKEN))
        self.assertEqual(got[2]["limit"], 1)
        self.assertEqual(got[3]["error"], "timeout")
        self.assertEqual(got[4], {**got[4], "ok": True, "acquired": False})
        self.assertTrue(got[5]["ok"])
        self.assertEqual(got[6]["error"], "invalid")
        self.assertEqual(got[7]["error"], "unsupported")
        for r in got.values():
            self.assertIsInstance(r["ms"], (int, float))
        p.stdin.write(json.dumps({"id": 8, "cmd": "close"}) + "\n")
        p.stdin.flush()
        self.assertTrue(json.loads(p.stdout.readline())["ok"])
        p.stdin.close()
        t0 = time.monotonic()
        self.assertEqual(p.wait(3), 0)
        self.assertLess(time.monotonic() - t0, 1.0)
        p.stdout.close()
        p.stderr.close()


if __name__ == "__main__":
    unittest.main()
