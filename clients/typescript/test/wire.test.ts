import assert from "node:assert/strict";
import { test } from "node:test";
import { proof } from "../src/auth.js";
import { answerRef, checkKey, errorText, formatSeconds, parseAnswer, parseQueue, parseSeconds, parseToken, reqOp, withoutRef } from "../src/wire.js";

test("durations are written as wire seconds, cut to the millisecond", () => {
  assert.equal(formatSeconds(30000), "30");
  assert.equal(formatSeconds(500), "0.5");
  assert.equal(formatSeconds(2250), "2.25");
  assert.equal(formatSeconds(1), "0.001");
  assert.equal(formatSeconds(1999.9), "1.999");
  assert.equal(parseSeconds("29.5"), 29500);
  assert.equal(parseSeconds("0.001"), 1);
  assert.ok(Number.isNaN(parseSeconds(".5")));
  assert.ok(Number.isNaN(parseSeconds("1.2345")));
});

test("tokens are u64 bigints, refused past 2^64-1", () => {
  assert.equal(parseToken("18446744073709551615"), 18446744073709551615n);
  assert.equal(parseToken("18446744073709551616"), undefined);
  assert.equal(parseToken("12x"), undefined);
  assert.equal(parseToken("7360982537641984001"), 7360982537641984001n);
});

test("keys: 1 to 255 bytes, no space or control character", () => {
  assert.equal(checkKey("deploy"), "");
  assert.notEqual(checkKey(""), "");
  assert.notEqual(checkKey("a b"), "");
  assert.notEqual(checkKey("a\tb"), "");
  assert.notEqual(checkKey("é".repeat(128)), ""); // 256 bytes
  assert.equal(checkKey("é".repeat(127)), "");
});

test("answers: refs are read and taken out; E names its op", () => {
  const a = parseAnswer("A report 7360982537641984006 ref=1")!;
  assert.equal(answerRef(a), "1");
  assert.deepEqual(withoutRef(a).fields, ["7360982537641984006"]);
  const t = parseAnswer("T report ref=2")!;
  assert.equal(reqOp(t), "A");
  assert.equal(answerRef(t), "2");
  const e = parseAnswer("E report A: ref=5 limit mismatch: key \"report\" allows 1 holder")!;
  assert.equal(answerRef(e), "5");
  assert.equal(reqOp(e), "A");
  assert.equal(errorText(e), 'limit mismatch: key "report" allows 1 holder');
  const r = parseAnswer("E deploy R: token \"12x\" is not an unsigned 64-bit integer")!;
  assert.equal(reqOp(r), "R");
  assert.equal(answerRef(r), "");
  assert.equal(reqOp(parseAnswer("M k 127.0.0.1:7071")!), "");
  assert.equal(parseAnswer("garbage"), undefined);
  assert.equal(parseAnswer("a k x"), undefined);
});

test("queue answers: holders, waiters, limit and ids", () => {
  const f = "7360982537641984003 41.2 2 3.2,127.0.0.1:51234 0.4,- limit=2 holder=7360982537641984004,58.7 id=7360982537641984003,nightly#1 id=7360982537641984004,carol#5e wid=2,bob@ci-2:811#0c-1".split(" ");
  const q = parseQueue("builds", f)!;
  assert.equal(q.limit, 2);
  assert.equal(q.nwaiters, 2);
  assert.deepEqual(
    q.holders.map((h) => [h.token, h.leaseLeft, h.id]),
    [
      [7360982537641984003n, 41200, "nightly#1"],
      [7360982537641984004n, 58700, "carol#5e"],
    ],
  );
  assert.deepEqual(q.waiters, [
    { waited: 3200, addr: "127.0.0.1:51234", id: "", shared: false, setKeys: [] },
    { waited: 400, addr: "", id: "bob@ci-2:811#0c-1", shared: false, setKeys: [] },
  ]);
  const none = parseQueue("nothing", ["-", "-", "0"])!;
  assert.deepEqual(none, { key: "nothing", holders: [], nwaiters: 0, waiters: [], limit: 1, shared: false, stale: false });
  assert.equal(parseQueue("k", ["-", "-"]), undefined);
});

test("the handshake's proofs are proto/auth's HMAC strings", () => {
  // Vectors computed by proto/auth's proof().
  const s = Buffer.from("conformance-secret-0123456789abcdef");
  assert.equal(proof(s, "client", "client", "127.0.0.1:7070", "ab", "cd").toString("hex"), "7cd5662972cbfe8d62b107304883c9a296aa12dfc3bd3739ab6f5ccad32e1510");
  assert.equal(proof(s, "server", "admin", "10.0.0.1:7070", "cd", "ab").toString("hex"), "706bb3cf36a4980d1be53a941b06ff3de0196f8115b976222d8a0e8b0692a5b5");
});
