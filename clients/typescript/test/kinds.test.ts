// Shared holds, sets of keys, election values and semaphore places,
// against a scripted node: the lines sent, the answers read, the
// refusals made before sending.

import assert from "node:assert/strict";
import { test } from "node:test";
import { Client, HoldLostError, InvalidArgumentError, NotHeldError, RefusedError } from "../src/index.js";
import { decodeValue, encodeValue, parseGrant, parseQueue } from "../src/wire.js";
import { FakeNode, type Line, arg } from "./fake.js";

const T0 = 7360982537641984000n;

/** A node that grants every acquire (a token per key of a set, place=2 with a limit) and answers N, R and Q. */
async function node(t: { after: (f: () => Promise<void>) => void }, opts: { failureTimeout?: number } = {}) {
  const n = await FakeNode.start();
  const st = { next: T0, notheld: new Set<string>(), q: "- - 0" };
  n.handle = (l: Line) => {
    const [op, key] = l.words;
    if (op === "A") {
      const toks = [];
      for (let i = 0; i < 1 + l.words.filter((w) => w.startsWith("key=")).length; i++) toks.push(String(++st.next));
      const place = arg(l, "limit") !== "" ? " place=2" : "";
      return `A ${key} ${toks.join(" ")}${place} ref=${arg(l, "ref")}`;
    }
    if (op === "N") return `N ${key} ${st.notheld.has(key) ? "notheld" : "ok"}`;
    if (op === "R") return `R ${key} ok`;
    if (op === "Q") return `Q ${key} ${st.q}`;
    if (op === "L") return `L ${key} ${st.q}`;
    return "";
  };
  const c = new Client([n.addr], { connsPerAddr: 1, ...opts });
  t.after(async () => {
    await c.close();
    await n.stop();
  });
  return { n, c, st };
}

test("shared: mode=shared on acquire, tryAcquire and hold", async (t) => {
  const { n, c } = await node(t);
  const l = await c.acquire("cfg", { lease: 30000, wait: 10000, shared: true });
  assert.equal(l.shared, true);
  assert.equal(l.place, undefined);
  assert.ok(await c.tryAcquire("cfg", { lease: 30000, shared: true }));
  const h = await c.hold("cfg", { lease: 30000, shared: true });
  assert.equal(h.shared, true);
  await h.release();
  await c.acquire("plain", { lease: 30000 });
  const a = n.got("A").map((x) => x.text);
  assert.match(a[0], /^A cfg 30 10 mode=shared id=\S+ ref=\w+$/);
  assert.match(a[1], /^A cfg 30 - mode=shared id=/);
  assert.match(a[2], /^A cfg 30 0 mode=shared id=/);
  assert.doesNotMatch(a[3], /mode=/);
});

test("shared with a limit above 1 is refused before sending, naming both", async (t) => {
  const { n, c } = await node(t);
  for (const p of [
    c.acquire("k", { lease: 30000, limit: 2, shared: true }),
    c.tryAcquire("k", { lease: 30000, limit: 3, shared: true }),
    c.hold("k", { lease: 30000, limit: 2, shared: true }),
  ]) {
    await assert.rejects(p, (e: Error) => e instanceof InvalidArgumentError && /shared: true/.test(e.message) && /limit: [23]/.test(e.message));
  }
  assert.equal(n.got("A").length, 0);
});

test("a semaphore grant's place", async (t) => {
  const { c } = await node(t);
  assert.equal((await c.acquire("sem", { lease: 30000, limit: 3 })).place, 2);
  const h = await c.hold("sem", { lease: 30000, limit: 3 });
  assert.equal(h.place, 2);
  assert.equal(h.lock.place, 2);
  await h.release();
});

test("acquireAll: one line, a token per key, a release and a renewal per key", async (t) => {
  const { n, c } = await node(t);
  {
    await using s = await c.acquireAll(["a", "b", "c"], { lease: 30000, wait: 10000 });
    assert.match(n.got("A")[0].text, /^A a 30 10 key=b key=c id=\S+ ref=\w+$/);
    assert.deepEqual([...s.tokens], [
      ["a", T0 + 1n],
      ["b", T0 + 2n],
      ["c", T0 + 3n],
    ]);
    await s.renew();
    assert.deepEqual(n.got("N").map((l) => l.text).sort(), [`N a ${T0 + 1n} 30`, `N b ${T0 + 2n} 30`, `N c ${T0 + 3n} 30`]);
  }
  assert.deepEqual(n.got("R").map((l) => l.text).sort(), [`R a ${T0 + 1n}`, `R b ${T0 + 2n}`, `R c ${T0 + 3n}`]);
  await c.acquireAll(["x", "y"], { lease: 30000, shared: true });
  assert.match(n.got("A")[1].text, /^A x 30 0 key=y mode=shared id=/);
  const s = await c.tryAcquireAll(["p", "q"], { lease: 30000 });
  assert.deepEqual(s?.keys, ["p", "q"]);
  assert.match(n.got("A")[2].text, /^A p 30 - key=q id=/);
});

test("tryAcquireAll of busy keys is null; a grant short of tokens is not understood", async (t) => {
  const { n, c } = await node(t);
  n.handle = (l) => (l.words[0] === "A" ? `T ${l.words[1]} ref=${arg(l, "ref")}` : "");
  assert.equal(await c.tryAcquireAll(["a", "b"], { lease: 30000 }), null);
  n.handle = (l) => (l.words[0] === "A" ? `A ${l.words[1]} 5 ref=${arg(l, "ref")}` : "");
  await assert.rejects(c.acquireAll(["a", "b"], { lease: 30000 }), /does not understand/);
});

test("set keys are checked before sending", async (t) => {
  const { n, c } = await node(t);
  const many = Array.from({ length: 17 }, (_, i) => `k${i}`);
  for (const [keys, says] of [
    [[], /0 keys/],
    [many, /17 keys/],
    [["a", "b", "a"], /"a" is given twice/],
    [["a", "has space"], /space/],
  ] as const) {
    await assert.rejects(c.acquireAll([...keys], { lease: 30000 }), (e: Error) => e instanceof InvalidArgumentError && says.test(e.message));
    await assert.rejects(c.holdAll([...keys], { lease: 30000 }), InvalidArgumentError);
    await assert.rejects(c.tryAcquireAll([...keys], { lease: 30000 }), InvalidArgumentError);
  }
  assert.equal(n.got("A").length, 0);
  assert.equal((await c.acquireAll(many.slice(0, 16), { lease: 30000 })).tokens.size, 16);
});

test("an acquire whose line would pass 4096 bytes is refused before sending", async (t) => {
  const { n, c } = await node(t);
  const long = Array.from({ length: 16 }, (_, i) => String.fromCharCode(97 + i).repeat(255));
  await assert.rejects(
    c.acquireAll(long, { lease: 30000 }),
    (e: Error) => e instanceof InvalidArgumentError && /longer than the 4096/.test(e.message),
  );
  await assert.rejects(c.holdAll(long, { lease: 30000 }), InvalidArgumentError);
  await assert.rejects(c.tryAcquireAll(long, { lease: 30000 }), InvalidArgumentError);
  assert.equal(n.got("A").length, 0);
  const fits = long.map((k) => k.slice(0, 200));
  assert.equal((await c.acquireAll(fits, { lease: 30000, wait: 5000 })).tokens.size, 16);
  // The longest value, every byte encoded, on the longest key fits.
  const key = "k".repeat(255);
  const e = c.election(key);
  const h = await e.campaign("%".repeat(1024), { lease: 5000 });
  await e.proclaim("%".repeat(1024));
  assert.ok(n.lines.every((l) => Buffer.byteLength(l.text) <= 4096));
  assert.equal(n.got("A").length, 2);
  await h.release();
});

test("holdAll: the loss of one key is the loss of the set, and the others are released", async (t) => {
  const { n, c, st } = await node(t, { failureTimeout: 150 });
  const hs = await c.holdAll(["a", "b", "c"], { lease: 300 });
  assert.match(n.got("A")[0].text, /^A a 0.3 0 key=b key=c id=/);
  await n.waitFor("renewals", () => n.got("N").filter((l) => l.words[1] === "c").length >= 2);
  hs.throwIfLost();
  st.notheld.add("b");
  await new Promise<void>((r) => hs.signal.addEventListener("abort", () => r(), { once: true }));
  const err = hs.lost!;
  assert.ok(err instanceof HoldLostError);
  assert.equal(err.reason, "notheld");
  assert.equal(hs.lostKey, "b");
  assert.match(err.message, /key b/);
  assert.throws(() => hs.throwIfLost(), HoldLostError);
  await n.waitFor("the other keys released", () => n.got("R").length >= 2);
  assert.deepEqual(n.got("R").map((l) => l.text).sort(), [`R a ${T0 + 1n}`, `R c ${T0 + 3n}`]);
  await hs.release(); // after a loss: no error
});

test("holdAll with await using releases every key", async (t) => {
  const { n, c } = await node(t);
  let sig: AbortSignal;
  {
    await using hs = await c.holdAll(["a", "b"], { lease: 30000, shared: true });
    assert.equal(hs.holds.every((h) => h.shared), true);
    sig = hs.signal;
  }
  assert.equal((sig.reason as HoldLostError).reason, "released");
  assert.deepEqual(n.got("R").map((l) => l.text).sort(), [`R a ${T0 + 1n}`, `R b ${T0 + 2n}`]);
});

test("campaign and proclaim send percent-encoded values", async (t) => {
  const { n, c, st } = await node(t);
  const e = c.election("lead");
  const h = await e.campaign("node 1 (10.0.0.1)", { lease: 5000 });
  const a = n.got("A")[0].text;
  assert.match(a, / value=node%201%20%2810\.0\.0\.1%29( |$)/);
  assert.doesNotMatch(a, / id=node/);
  await e.proclaim("100% é,=x~");
  assert.ok(n.got("N").some((l) => l.text === `N lead ${h.token} 5 value=100%25%20%C3%A9%2C%3Dx~`));
  await e.proclaim("v".repeat(1024));
  await assert.rejects(e.proclaim("v".repeat(1025)), (x: Error) => x instanceof InvalidArgumentError && /1025 bytes/.test(x.message));
  await assert.rejects(e.proclaim("é".repeat(513)), InvalidArgumentError);
  await assert.rejects(e.proclaim(""), (x: Error) => x instanceof InvalidArgumentError && /empty/.test(x.message));
  await assert.rejects(c.election("other").campaign(""), InvalidArgumentError);
  st.q = `${h.token} 4 0 id=${h.token},host#x-1 value=${h.token},node%202%20%C3%A9`;
  assert.deepEqual(await e.leader(), { value: "node 2 é", token: h.token, stale: false });
  st.q = `${h.token} 4 0 id=${h.token},host#x-1`;
  assert.equal((await e.leader())?.value, "host");
  await e.resign();
  await assert.rejects(e.proclaim("again"), NotHeldError);
});

test("a proclaim answered notheld is a lost leadership", async (t) => {
  const { c, st } = await node(t);
  const e = c.election("lead");
  const h = await e.campaign("a", { lease: 5000 });
  st.notheld.add("lead");
  await assert.rejects(e.proclaim("b"), HoldLostError);
  assert.equal(h.lost?.reason, "notheld");
});

test("on a node older than values, a campaign carries its value in the id", async (t) => {
  const { n, c } = await node(t);
  const grant = n.handle;
  n.handle = (l) => {
    const v = l.words.find((w) => w.startsWith("value="));
    if (l.words[0] === "A" && v) return `E ${l.words[1]} A: ref=${arg(l, "ref")} "${v}": want limit=N, id=ID or ref=R after the wait`;
    return grant(l);
  };
  const e = c.election("lead");
  await e.campaign("node-a", { lease: 5000 });
  assert.match(arg(n.got("A").at(-1)!, "id"), /^node-a#/);
  await e.resign();
  await e.campaign("node-b", { lease: 5000 });
  assert.equal(n.got("A").filter((l) => arg(l, "value") !== "").length, 1, "the client remembers the node refused value=");
  const c2 = new Client([n.addr], { connsPerAddr: 1 });
  t.after(() => c2.close());
  await assert.rejects(c2.election("lead").campaign("has space"), RefusedError);
});

test("an observer sees a proclaimed value of the same leader", async (t) => {
  const n = await FakeNode.start();
  const c = new Client([n.addr], { connsPerAddr: 1 });
  t.after(async () => {
    await c.close();
    await n.stop();
  });
  let l: Line | undefined;
  n.handle = (x) => {
    if (x.words[0] !== "L") return "";
    l = x;
    return `L lead 9 9 0 value=9,one`;
  };
  await using o = c.election("lead").observe();
  assert.equal((await o.next()).value?.value, "one");
  l!.conn.write("L lead 9 9 0 value=9,two%20words\n");
  assert.equal((await o.next()).value?.value, "two words");
});

test("the new words of Q and L answers, as typed fields", () => {
  const q = parseQueue(
    "k",
    "11 29.1 3 0.5,a 0.2,b 0.1,c holder=12,28 mode=shared wmode=2,shared set=11,11 set=12,11 wset=3,k+j place=12,4 value=11,x%20y future=1,2".split(" "),
  )!;
  assert.equal(q.shared, true);
  assert.deepEqual(
    q.holders.map((h) => [h.token, h.shared, h.setId, h.place, h.value]),
    [
      [11n, true, 11n, undefined, "x y"],
      [12n, true, 11n, 4, undefined],
    ],
  );
  assert.deepEqual(
    q.waiters.map((w) => [w.addr, w.shared, w.setKeys]),
    [
      ["a", false, []],
      ["b", true, []],
      ["c", false, ["k", "j"]],
    ],
  );
  // A set's keys are percent-encoded, "+" among them, and decoded once split on "+"; an empty value= is no value.
  const enc = parseQueue("a+1", "7 29 1 0.5,- wset=1,a%2B1+b%3Dc%2C+%C3%A9%25 value=7,".split(" "))!;
  assert.deepEqual(enc.waiters[0].setKeys, ["a+1", "b=c,", "é%"]);
  assert.equal(enc.holders[0].value, undefined);
  assert.deepEqual(parseGrant(["1", "2", "place=3", "new=x"], 2), { tokens: [1n, 2n], place: 3 });
  assert.equal(parseGrant(["1"], 2), undefined);
});

test("values: percent-encoding of spaces, % and non-ASCII, and the limits", () => {
  assert.equal(encodeValue("Az09-._~"), "Az09-._~");
  assert.equal(encodeValue("a b%c\n!*'()"), "a%20b%25c%0A%21%2A%27%28%29");
  assert.equal(decodeValue(encodeValue("é 日本 %41 😀")), "é 日本 %41 😀");
  assert.equal(encodeValue("x".repeat(1024)).length, 1024);
  assert.throws(() => encodeValue("x".repeat(1025)), /1025 bytes/);
  assert.throws(() => encodeValue(""), /empty/);
  assert.throws(() => encodeValue("\ud800"), /surrogate/);
});
