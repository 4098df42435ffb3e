import assert from "node:assert/strict";
import { test } from "node:test";
import { AbortError, Client, HoldLostError, InvalidArgumentError, TimeoutError, UnavailableError } from "../src/index.js";
import { FakeNode, arg } from "./fake.js";

let tokens = 1000n;
const grant = (l: { words: string[] }, ref: string) => `A ${l.words[1]} ${++tokens}${ref ? " ref=" + ref : ""}`;

test("one address: two connections, chosen round-robin", async (t) => {
  const n = await FakeNode.start();
  const c = new Client(n.addr);
  t.after(async () => {
    await c.close();
    await n.stop();
  });
  n.handle = (l) => (l.words[0] === "A" ? grant(l, arg(l, "ref")) : "");
  await n.waitFor("two connections", () => n.open().length === 2);
  await new Promise((r) => setTimeout(r, 50));
  for (let i = 0; i < 6; i++) await c.acquire("rr" + i, { lease: 10000, wait: 1000 });
  const per = new Map<unknown, number>();
  for (const l of n.got("A")) per.set(l.conn, (per.get(l.conn) ?? 0) + 1);
  assert.deepEqual([...per.values()], [3, 3]);
});

test("answers to acquires of one key are matched by ref, in any order", async (t) => {
  const n = await FakeNode.start();
  const c = new Client([n.addr], { connsPerAddr: 1 });
  t.after(async () => {
    await c.close();
    await n.stop();
  });
  const p1 = c.acquire("k", { lease: 10000 });
  const p2 = c.acquire("k", { lease: 10000 });
  const p3 = c.tryAcquire("k", { lease: 10000 });
  await n.waitFor("three acquires", () => n.got("A").length === 3);
  const [a1, a2, a3] = n.got("A");
  assert.equal(a3.words[3], "-", "a try-lock's wait is -");
  assert.notEqual(arg(a1, "id"), arg(a2, "id"));
  a1.conn.write(`T k ref=${arg(a3, "ref")}\nA k 22 ref=${arg(a2, "ref")}\nA k 11 ref=${arg(a1, "ref")}\n`);
  assert.equal((await p1).token, 11n);
  assert.equal((await p2).token, 22n);
  assert.equal(await p3, null);
});

test("an aborted acquire is withdrawn with X on its connection, and a grant that crossed it is released", async (t) => {
  const n = await FakeNode.start();
  const c = new Client([n.addr], { connsPerAddr: 1 });
  t.after(async () => {
    await c.close();
    await n.stop();
  });
  const ac = new AbortController();
  const p = c.acquire("w", { lease: 10000, signal: ac.signal });
  await n.waitFor("the acquire", () => n.got("A").length === 1);
  const a = n.got("A")[0];
  n.handle = (l) => (l.words[0] === "X" ? `A w 77 ref=${arg(a, "ref")}\nX w none` : l.words[0] === "R" ? "R w ok" : "");
  ac.abort();
  await assert.rejects(p, AbortError);
  await n.waitFor("the withdraw", () => n.got("X").length === 1);
  const x = n.got("X")[0];
  assert.equal(x.conn, a.conn);
  assert.equal(x.text, `X w ${arg(a, "id")}`);
  await n.waitFor("the release of the grant that crossed", () => n.got("R").some((l) => l.text === "R w 77"));
});

test("a release nobody answers is re-sent every releaseEvery for releaseFor", async (t) => {
  const n = await FakeNode.start();
  const c = new Client([n.addr], { releaseEvery: 50, releaseFor: 500 });
  t.after(async () => {
    await c.close();
    await n.stop();
  });
  await n.waitFor("connections", () => n.open().length === 2);
  await new Promise((r) => setTimeout(r, 50));
  const start = Date.now();
  await assert.rejects(c.release("r", 42n), UnavailableError);
  const took = Date.now() - start;
  const rs = n.got("R");
  assert.ok(took >= 480 && took < 1000, `gave up after ${took} ms`);
  assert.ok(rs.length >= 8 && rs.length <= 12, `sent ${rs.length} times`);
  assert.ok(rs.every((l) => l.text === "R r 42"));
});

test("an acquire whose wait elapses rejects with TimeoutError", async (t) => {
  const n = await FakeNode.start();
  const c = new Client([n.addr]);
  t.after(async () => {
    await c.close();
    await n.stop();
  });
  n.handle = (l) => (l.words[0] === "A" ? `T ${l.words[1]} ref=${arg(l, "ref")}` : "");
  await assert.rejects(c.acquire("t", { lease: 1000, wait: 100 }), TimeoutError);
  await assert.rejects(c.acquire("bad key", { lease: 1000 }), InvalidArgumentError);
  await assert.rejects(c.acquire("t", { lease: 0 }), InvalidArgumentError);
});

test("a hold renews itself and its signal aborts when the node says notheld", async (t) => {
  const n = await FakeNode.start();
  // A failure timeout short enough for a short lease (at least twice it).
  const c = new Client([n.addr], { failureTimeout: 150 });
  t.after(async () => {
    await c.close();
    await n.stop();
  });
  let renewals = 0;
  n.handle = (l) => {
    if (l.words[0] === "A") return grant(l, arg(l, "ref"));
    if (l.words[0] === "N") return ++renewals < 3 ? "N h ok" : "N h notheld";
    return "";
  };
  const h = await c.hold("h", { lease: 300 });
  const reason = await new Promise<HoldLostError>((r) => h.signal.addEventListener("abort", () => r(h.signal.reason)));
  assert.equal(reason.reason, "notheld");
  assert.equal(renewals, 3);
});

test("a hold whose renewals go unanswered is lost when the lease can no longer be proven", async (t) => {
  const n = await FakeNode.start();
  // The node answers keep-alives: the connection stays up, and only the
  // lease says the lock is lost.
  const c = new Client([n.addr], { failureTimeout: 200 });
  t.after(async () => {
    await c.close();
    await n.stop();
  });
  n.handle = (l) => (l.words[0] === "A" ? grant(l, arg(l, "ref")) : "");
  const start = Date.now();
  const h = await c.hold("e", { lease: 400 });
  const reason = await new Promise<HoldLostError>((r) => h.signal.addEventListener("abort", () => r(h.signal.reason)));
  const took = Date.now() - start;
  assert.equal(reason.reason, "expired");
  assert.ok(took >= 390 && took < 600, `lost after ${took} ms, the lease is 400`);
});

test("a watch delivers every state, and moves to the node an M names", async (t) => {
  const a = await FakeNode.start();
  const b = await FakeNode.start();
  const c = new Client([a.addr, b.addr]);
  t.after(async () => {
    await c.close();
    await a.stop();
    await b.stop();
  });
  a.handle = (l) => (l.words[0] === "L" ? "L wk - - 0" : "");
  b.handle = (l) => (l.words[0] === "L" ? "L wk 9 30 0" : l.words[0] === "A" ? `M ${l.words[1]} ${a.addr} ref=${arg(l, "ref")}` : "");
  // Make a the active one: b redirects there.
  a.handle = (l) => (l.words[0] === "L" ? "L wk - - 0" : l.words[0] === "A" ? grant(l, arg(l, "ref")) : "");
  await c.acquire("x", { lease: 1000 });
  const w = c.watch("wk");
  const first = await w.next();
  assert.equal(first.value?.holders.length, 0);
  const l = a.got("L")[0];
  l.conn.write("L wk 5 30 1 0.1,127.0.0.1:1\n");
  const second = await w.next();
  assert.equal(second.value?.holders[0].token, 5n);
  assert.equal(second.value?.nwaiters, 1);
  // The active gives its role up: the watch moves to b and yields b's state first.
  l.conn.write(`M wk ${b.addr}\n`);
  const third = await w.next();
  assert.equal(third.value?.holders[0].token, 9n);
  assert.equal(b.got("L").length, 1);
  w.close();
  await b.waitFor("the unwatch", () => b.got("U").length === 1);
  assert.equal((await w.next()).done, true);
});

test("a node that answers nothing, not even a keep-alive, is left after the failure timeout, and the acquire moves with its id", async (t) => {
  const a = await FakeNode.start();
  const b = await FakeNode.start();
  const c = new Client([a.addr, b.addr], { failureTimeout: 300 });
  t.after(async () => {
    await c.close();
    await a.stop();
    await b.stop();
  });
  await a.waitFor("a connection", () => a.open().length === 1);
  await b.waitFor("a connection", () => b.open().length === 1);
  await new Promise((r) => setTimeout(r, 50));
  b.handle = (l) => (l.words[0] === "A" ? grant(l, arg(l, "ref")) : "");
  a.handle = () => {
    a.silent = true; // frozen with the acquire in hand
    return "";
  };
  b.silent = true;
  const start = Date.now();
  const p = c.acquire("fz", { lease: 10000, wait: 5000 });
  // Whichever node took it first is frozen; thaw b if it was a that froze.
  await new Promise((r) => setTimeout(r, 20));
  const first = a.got("A").length === 1 ? a : b;
  if (first === a) b.silent = false;
  else {
    // b took it: make a the node that serves next.
    a.silent = false;
    a.handle = (l) => (l.words[0] === "A" ? grant(l, arg(l, "ref")) : "");
  }
  const lock = await p;
  const now = Date.now();
  const took = now - start;
  // The client counts the silence from the last bytes the node wrote,
  // which may come before this test's clock started.
  const silentFor = now - first.wroteAt;
  const other = first === a ? b : a;
  const [sent] = first.got("A");
  const [resent] = other.got("A");
  assert.equal(arg(resent, "id"), arg(sent, "id"), "the moved acquire keeps its id");
  assert.ok(lock.token > 0n);
  assert.ok(silentFor >= 300, `moved after the node had been silent ${silentFor} ms, the failure timeout is 300`);
  assert.ok(took < 1500, `moved after ${took} ms, the failure timeout is 300`);
});

test("an M is followed at once to the node it names, which is then the active", async (t) => {
  const active = await FakeNode.start();
  const standby = await FakeNode.start();
  const c = new Client([standby.addr]);
  t.after(async () => {
    await c.close();
    await active.stop();
    await standby.stop();
  });
  standby.handle = (l) => `M ${l.words[1]} ${active.addr}${l.words[0] === "A" ? " ref=" + arg(l, "ref") : ""}`;
  active.handle = (l) => (l.words[0] === "A" ? grant(l, arg(l, "ref")) : l.words[0] === "Q" ? `Q ${l.words[1]} 5 9.5 0 id=5,node-a#x-1` : "");
  await c.acquire("mv", { lease: 1000, wait: 1000 });
  assert.equal(c.activeAddr, active.addr);
  const leader = await c.election("mv").leader();
  assert.deepEqual(leader, { value: "node-a", token: 5n, stale: false });
  assert.equal(standby.got("Q").length, 0, "a known active is asked first");
});

test("a hold granted after a long wait is confirmed by a renewal before it is returned", async (t) => {
  const n = await FakeNode.start();
  const c = new Client([n.addr], { failureTimeout: 300 });
  t.after(async () => {
    await c.close();
    await n.stop();
  });
  n.handle = (l) => {
    if (l.words[0] === "A") {
      setTimeout(() => l.conn.write(grant(l, arg(l, "ref")) + "\n"), 300);
      return "";
    }
    return l.words[0] === "N" ? "N lw ok" : l.words[0] === "R" ? "R lw ok" : "";
  };
  const h = await c.hold("lw", { lease: 600 });
  assert.equal(n.got("N").length, 1, "confirmed before hold returned");
  assert.equal(h.signal.aborted, false);
  await h.release();
  assert.equal((h.lost as HoldLostError).reason, "released");
});

test("close rejects waiting calls with ClosedError and ends holds with reason closed", async (t) => {
  const n = await FakeNode.start();
  const c = new Client([n.addr]);
  t.after(() => n.stop());
  n.handle = (l) => (l.words[0] === "A" && l.words[1] === "h" ? grant(l, arg(l, "ref")) : l.words[0] === "N" ? "N h ok" : "");
  const h = await c.hold("h", { lease: 5000 });
  const waiting = c.acquire("w", { lease: 1000 });
  await n.waitFor("the waiting acquire", () => n.got("A").length === 2);
  await c.close();
  await assert.rejects(waiting, (e: Error) => e.name === "ClosedError");
  assert.equal((h.lost as HoldLostError).reason, "closed");
  await assert.rejects(c.queue("x"), (e: Error) => (e as { code?: string }).code === "ECLOSED");
});

test("await using releases a hold at the end of its block", async (t) => {
  const n = await FakeNode.start();
  const c = new Client([n.addr]);
  t.after(async () => {
    await c.close();
    await n.stop();
  });
  n.handle = (l) => (l.words[0] === "A" ? grant(l, arg(l, "ref")) : l.words[0] === "R" ? `R ${l.words[1]} ok` : "");
  let token = 0n;
  {
    await using h = await c.hold("du", { lease: 5000 });
    token = h.token;
    assert.equal(n.got("R").length, 0);
  }
  assert.deepEqual(
    n.got("R").map((l) => l.text),
    [`R du ${token}`],
  );
});

test("a watch moved by an M that arrives with its first state still moves", async (t) => {
  const a = await FakeNode.start();
  const b = await FakeNode.start();
  const c = new Client([a.addr]);
  t.after(async () => {
    await c.close();
    await a.stop();
    await b.stop();
  });
  a.handle = (l) => (l.words[0] === "L" ? `L wm - - 0\nM wm ${b.addr}` : "");
  b.handle = (l) => (l.words[0] === "L" ? "L wm 6001 9 0" : "");
  const w = c.watch("wm");
  assert.equal((await w.next()).value?.holders.length, 0);
  assert.equal((await w.next()).value?.holders[0].token, 6001n);
  assert.equal(a.got("L").length, 1, "not asked again where it was moved from");
  w.close();
});
