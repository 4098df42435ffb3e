// The client when the cluster fails under it: a redirect to a node it
// has down, a wait through an outage, a watch that loses the cluster; and
// what it refuses (a held lease too short for a failover) or reads typed
// (a status).

import assert from "node:assert/strict";
import net from "node:net";
import { test } from "node:test";
import { Client, DisagreeError, InvalidArgumentError, UnavailableError } from "../src/index.js";
import { FakeNode, type Line, arg } from "./fake.js";

const TOKEN = 7360982537641984001n;

function granting(l: Line): string {
  switch (l.words[0]) {
    case "A":
      return `A ${l.words[1]} ${TOKEN} ref=${arg(l, "ref")}`;
    case "R":
    case "N":
      return `${l.words[0]} ${l.words[1]} ok`;
    case "Q":
      return `Q ${l.words[1]} - - 0`;
  }
  return "";
}

function portOf(addr: string): number {
  return Number(addr.slice(addr.lastIndexOf(":") + 1));
}

/** Waits until cond holds, for 5 s at most. */
async function until(what: string, cond: () => boolean): Promise<void> {
  const end = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Whether the client has a connection to addr up (answered its first S). */
function up(c: Client, addr: string): boolean {
  return (c as unknown as { conns: { addr: string; state: string }[] }).conns.some((cn) => cn.addr === addr && cn.state === "up");
}

/** Whether the client has every connection to addr down. */
function down(c: Client, addr: string): boolean {
  return (c as unknown as { dead(a: string): boolean }).dead(addr);
}

test("an M naming a restarted node dials it at once: calls go there, not to the next redial", async (t) => {
  const first = await FakeNode.start();
  const addr = first.addr;
  first.handle = granting;
  const standby = await FakeNode.start();
  standby.handle = (l) => `M ${l.words[1]} ${addr}${l.words[0] === "A" ? " ref=" + arg(l, "ref") : ""}`;
  const c = new Client([addr, standby.addr], { redial: 3_600_000, releaseEvery: 1000 });
  let back: FakeNode | undefined;
  t.after(async () => {
    await c.close();
    await standby.stop();
    await back?.stop();
  });
  await until("both nodes up for the client", () => up(c, addr) && up(c, standby.addr));
  await first.stop();
  await until("the node down for the client", () => down(c, addr));
  back = await FakeNode.start(portOf(addr));
  back.handle = granting;
  const start = Date.now();
  const lock = await c.acquire("k", { lease: 1000, wait: 2000 });
  await c.renew(lock);
  const took = Date.now() - start;
  assert.ok(took < 500, `the calls took ${took} ms to reach the restarted node`);
  assert.deepEqual(
    back.lines.map((l) => l.words[0]),
    ["A", "N"],
  );
});

test("a release redirected to a node the client has down is sent again shortly, not at the next releaseEvery", async (t) => {
  const first = await FakeNode.start();
  const addr = first.addr;
  const standby = await FakeNode.start();
  standby.handle = (l) => `M ${l.words[1]} ${addr}`;
  const c = new Client([addr, standby.addr], { redial: 3_600_000, releaseEvery: 2000 });
  let back: FakeNode | undefined;
  t.after(async () => {
    await c.close();
    await standby.stop();
    await back?.stop();
  });
  await until("both nodes up for the client", () => up(c, addr) && up(c, standby.addr));
  await first.stop();
  await until("the node down for the client", () => down(c, addr));
  back = await FakeNode.start(portOf(addr));
  back.handle = granting;
  const start = Date.now();
  await c.release("k", 5n);
  const took = Date.now() - start;
  assert.ok(took < 500, `the release took ${took} ms to reach the restarted node`);
  assert.equal(back.got("R").length, 1);
});

test("the error of a redirect to a silent node counts from the node's silence", async (t) => {
  const first = await FakeNode.start();
  const addr = first.addr;
  const standby = await FakeNode.start();
  standby.handle = (l) => `M ${l.words[1]} ${addr}`;
  const c = new Client([addr, standby.addr], { redial: 3_600_000, failureTimeout: 50 });
  t.after(async () => {
    await c.close();
    await standby.stop();
  });
  await until("both nodes up for the client", () => up(c, addr) && up(c, standby.addr));
  await first.stop();
  await until("the node down for the client", () => down(c, addr));
  for (const cn of (c as unknown as { conns: { addr: string; lastRead: number }[] }).conns) {
    if (cn.addr === addr) cn.lastRead = Date.now() - 20_000;
  }
  const err = await c.queue("k").then(
    () => assert.fail("want an error"),
    (e: Error) => e,
  );
  assert.ok(err instanceof UnavailableError, String(err));
  const m = /which has not answered this client for ([0-9]+) ms/.exec(err.message);
  assert.ok(m, err.message);
  assert.ok(Number(m[1]) >= 20_000, err.message);
});

for (const [name, call] of [
  ["acquire", (c: Client) => c.acquire("k", { lease: 1000 })],
  ["acquire with a wait", (c: Client) => c.acquire("k", { lease: 1000, wait: 5000 })],
  ["hold", async (c: Client) => (await c.hold("k", { lease: 1000 })).release()],
  ["campaign", async (c: Client) => (await c.election("k").campaign("me", { lease: 1000 })).release()],
] as const) {
  test(`${name} outlasts an outage of every node`, async (t) => {
    const n = await FakeNode.start();
    const addr = n.addr;
    n.handle = granting;
    const c = new Client([addr], { redial: 3_600_000, failureTimeout: 200 });
    let back: FakeNode | undefined;
    t.after(async () => {
      await c.close();
      await back?.stop();
    });
    await n.waitFor("two connections", () => n.open().length === 2);
    await until("the client up", () => !down(c, addr) && (c as unknown as { everUp: boolean }).everUp);
    await n.stop();
    await until("the node down for the client", () => down(c, addr));
    let done: unknown = "pending";
    const p = (call(c) as Promise<unknown>).then(
      () => (done = null),
      (e) => (done = e),
    );
    await new Promise((r) => setTimeout(r, 700));
    assert.equal(done, "pending", "returned during the outage");
    back = await FakeNode.start(portOf(addr));
    back.handle = granting;
    await p;
    assert.equal(done, null);
  });
}

test("an acquire whose wait runs out in an outage rejects as unavailable, not before, and a try does not wait", async (t) => {
  const n = await FakeNode.start();
  const addr = n.addr;
  n.handle = granting;
  const c = new Client([addr], { redial: 3_600_000, failureTimeout: 200 });
  t.after(() => c.close());
  await n.waitFor("two connections", () => n.open().length === 2);
  await until("the client up", () => !down(c, addr) && (c as unknown as { everUp: boolean }).everUp);
  await n.stop();
  await until("the node down for the client", () => down(c, addr));
  let start = performance.now();
  const err = await c.acquire("k", { lease: 1000, wait: 600 }).then(
    () => null,
    (e: Error) => e,
  );
  assert.ok(err instanceof UnavailableError && /for the whole wait/.test(err.message), String(err));
  assert.ok(performance.now() - start >= 600, `gave up after ${performance.now() - start} ms, before the wait of 600 ms ran out`);
  start = performance.now();
  await assert.rejects(c.tryAcquire("k", { lease: 1000 }), (e: Error) => e instanceof UnavailableError);
  assert.ok(performance.now() - start < 600, "a try waited in the outage");
});

/** An address where nothing listens: a node that is not up yet. */
async function closedAddr(): Promise<string> {
  const n = await FakeNode.start();
  await n.stop();
  return n.addr;
}

test("an acquire that waits forever on a client that never reached a node rejects as unavailable at once", async (t) => {
  const c = new Client([await closedAddr()], { redial: 3_600_000, failureTimeout: 200 });
  t.after(() => c.close());
  const start = performance.now();
  await assert.rejects(c.acquire("k", { lease: 1000 }), (e: Error) => e instanceof UnavailableError);
  const took = performance.now() - start;
  assert.ok(took < 500, `gave up after ${took} ms on an address never reached, want at once`);
});

test("an acquire that waits forever rejects at once when its only node takes the connection and never answers, or answers as no lockd node does", { timeout: 10_000 }, async (t) => {
  // A wrong address that reaches some other service: the client must not
  // count it as a node it reached, and hang on it for good.
  for (const answer of ["", "HTTP/1.1 400 Bad Request\r\n\r\n"]) {
    const srv = net.createServer((s) => {
      s.on("error", () => {});
      if (answer) s.on("data", () => s.end(answer));
    });
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    const c = new Client([`127.0.0.1:${(srv.address() as net.AddressInfo).port}`], { redial: 3_600_000, failureTimeout: 200 });
    t.after(async () => {
      await c.close();
      srv.close();
    });
    const start = performance.now();
    // A silent node may be one that speaks TLS: the error says so.
    const says = answer ? /another service/ : /speaks TLS to a client without TLS/;
    await assert.rejects(c.acquire("k", { lease: 1000 }), (e: Error) => e instanceof UnavailableError && says.test(e.message));
    const took = performance.now() - start;
    assert.ok(took < 2000, `a node ${answer ? "answering garbage" : "that never answers"}: gave up after ${took} ms, want at once`);
  }
});

test("an acquire with a wait on a client that never reached a node, nothing listening, rejects as unavailable when its wait runs out", async (t) => {
  const c = new Client([await closedAddr()], { redial: 3_600_000, failureTimeout: 200 });
  t.after(() => c.close());
  const start = performance.now();
  const err = await c.acquire("k", { lease: 1000, wait: 300 }).then(
    () => null,
    (e: Error) => e,
  );
  const took = performance.now() - start;
  assert.ok(err instanceof UnavailableError && /for the whole wait/.test(err.message), String(err));
  assert.ok(took >= 300, `gave up after ${took} ms, before the wait of 300 ms ran out`);
  assert.ok(took < 2000, `gave up after ${took} ms, long after the wait of 300 ms ran out`);
  const tried = performance.now();
  await assert.rejects(c.tryAcquire("k", { lease: 1000 }), (e: Error) => e instanceof UnavailableError);
  assert.ok(performance.now() - tried < 300, "a try waited for a node");
});

test("an acquire with a wait on a client that never reached a node rejects at once when a dial fails otherwise than refused", async (t) => {
  // .invalid never resolves (RFC 6761); a slow resolver ends in a dial timeout instead.
  const c = new Client([await closedAddr(), "lockd-test.invalid:7070"], { redial: 3_600_000, failureTimeout: 200, dialTimeout: 500 });
  t.after(() => c.close());
  const start = performance.now();
  await assert.rejects(c.acquire("k", { lease: 1000, wait: 5000 }), (e: Error) => e instanceof UnavailableError && !/whole wait/.test(e.message));
  const took = performance.now() - start;
  assert.ok(took < 2000, `gave up after ${took} ms, want at once: the address may well be wrong`);
});

test("an acquire with a wait on a client made before its node listens is granted once the node starts", async (t) => {
  const addr = await closedAddr();
  const c = new Client([addr], { redial: 3_600_000, failureTimeout: 200 });
  let n: FakeNode | undefined;
  t.after(async () => {
    await c.close();
    await n?.stop();
  });
  let done = false;
  const p = c.acquire("k", { lease: 1000, wait: 10_000 }).finally(() => (done = true));
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(done, false, "returned before a node listened");
  n = await FakeNode.start(portOf(addr));
  n.handle = granting;
  const start = performance.now();
  const lock = await p;
  assert.equal(lock.token, TOKEN);
  const took = performance.now() - start;
  assert.ok(took < 3000, `granted ${took} ms after the node started`);
});

test("a watch and an observation say when they lose the cluster and when they are current again", async (t) => {
  let words = "5 9 0 id=5,leader#1";
  const handle = (l: Line) => (l.words[0] === "L" ? `L ${l.words[1]} ${words}` : l.words[0] === "U" ? `U ${l.words[1]} ok` : "");
  const n = await FakeNode.start();
  const addr = n.addr;
  n.handle = handle;
  const c = new Client([addr], { redial: 200, failureTimeout: 200 });
  let back: FakeNode | undefined;
  t.after(async () => {
    await c.close();
    await back?.stop();
  });
  const w = c.watch("k");
  const o = c.election("k").observe();
  let s = (await w.next()).value!;
  assert.deepEqual([s.holders[0].token, s.stale, w.stale], [5n, false, false]);
  let l = (await o.next()).value!;
  assert.deepEqual([l.value, l.stale, o.stale], ["leader", false, false]);
  const lost = Date.now();
  await n.stop();
  s = (await w.next()).value!;
  assert.deepEqual([s.holders[0].token, s.stale, w.stale], [5n, true, true], "the last state again, stale");
  assert.ok(Date.now() - lost >= 200, "not before the failure timeout");
  l = (await o.next()).value!;
  assert.deepEqual([l.value, l.stale, o.stale], ["leader", true, true]);
  words = "6 9 0 id=6,other#1";
  back = await FakeNode.start(portOf(addr));
  back.handle = handle;
  s = (await w.next()).value!;
  assert.deepEqual([s.holders[0].token, s.stale, w.stale], [6n, false, false], "current again: the state there");
  l = (await o.next()).value!;
  assert.deepEqual([l.value, l.stale, o.stale], ["other", false, false]);
  w.close();
  o.close();
});

test("hold and campaign refuse a lease too short for a failover, naming the shortest in ms", async (t) => {
  const n = await FakeNode.start();
  n.handle = granting;
  const c = new Client([n.addr], { failureTimeout: 1000 });
  t.after(async () => {
    await c.close();
    await n.stop();
  });
  assert.equal(c.minHoldLease, 2000);
  await assert.rejects(c.hold("k", { lease: 30 }), (e: Error) => e instanceof InvalidArgumentError && /lease 30 ms is too short .* the shortest is 2000 ms/.test(e.message));
  await assert.rejects(c.election("k").campaign("me", { lease: 1500 }), InvalidArgumentError);
  assert.equal(n.got("A").length, 0);
  await (await c.hold("k", { lease: 2000 })).release();
});

test("status is typed", async (t) => {
  const n = await FakeNode.start();
  const c = new Client([n.addr]);
  t.after(async () => {
    await c.close();
    await n.stop();
  });
  n.statusWords = `role=active active=- token=${TOKEN} seq=6 uptime=2.5 keys=3 waiters=1 sticky=false replication=sync degraded=true durability=memory peer=${n.addr},active,up,6,0,${TOKEN}`;
  const st = await c.status();
  const { fields, ...typed } = st;
  assert.deepEqual(typed, {
    self: n.addr,
    role: "active",
    active: "",
    token: TOKEN,
    seq: 6n,
    uptime: 2500,
    keys: 3,
    waiters: 1,
    sticky: false,
    replication: "sync",
    degraded: true,
    durability: "memory",
    peers: [{ addr: n.addr, role: "active", up: true, seq: 6n, lag: 0n, token: TOKEN }],
  });
  assert.equal(fields.keys, "3");
});

/** Two nodes that redirect acquires to each other, as nodes started together do until they agree, and from settledAt on send them to a, which grants them. */
async function bouncingPair(settledAt: number): Promise<[FakeNode, FakeNode]> {
  const a = await FakeNode.start();
  const b = await FakeNode.start();
  const bounce = (me: FakeNode, other: FakeNode) => (l: Line) => {
    if (l.words[0] !== "A") return "";
    const ref = ` ref=${arg(l, "ref")}`;
    if (Date.now() < settledAt) return `M ${l.words[1]} ${other.addr}${ref}`;
    return me === a ? granting(l) : `M ${l.words[1]} ${a.addr}${ref}`;
  };
  a.handle = bounce(a, b);
  b.handle = bounce(b, a);
  return [a, b];
}

test("redirects between nodes still agreeing on an active one are followed until they settle", async (t) => {
  // Longer than ten redirects take, shorter than three failure timeouts.
  const [a, b] = await bouncingPair(Date.now() + 800);
  const c = new Client([a.addr, b.addr], { failureTimeout: 500 });
  t.after(async () => {
    await c.close();
    await a.stop();
    await b.stop();
  });
  const lock = await c.acquire("k", { lease: 5000, wait: 5000 });
  assert.equal(lock.token, TOKEN);
});

test("redirects between nodes that never agree end with a DisagreeError after three failure timeouts", async (t) => {
  const [a, b] = await bouncingPair(Infinity);
  const c = new Client([a.addr, b.addr], { failureTimeout: 100 });
  t.after(async () => {
    await c.close();
    await a.stop();
    await b.stop();
  });
  const start = Date.now();
  await assert.rejects(c.acquire("k", { lease: 5000, wait: 5000 }), (err: Error) => err instanceof DisagreeError && /times in a row over/.test(err.message));
  assert.ok(Date.now() - start >= 300, "followed for three failure timeouts");
  const sent = a.lines.length + b.lines.length;
  assert.ok(sent > 10 && sent < 100, `${sent} acquires sent: more than ten, and paced`);
});

test("a wait that runs out among redirects says the nodes disagree, not that the key is held", async (t) => {
  const [a, b] = await bouncingPair(Infinity);
  const c = new Client([a.addr, b.addr], { failureTimeout: 1000 });
  t.after(async () => {
    await c.close();
    await a.stop();
    await b.stop();
  });
  await assert.rejects(
    c.acquire("k", { lease: 5000, wait: 700 }),
    (err: Error) => err instanceof DisagreeError && /the wait ran out while the request was redirected/.test(err.message),
  );
});
