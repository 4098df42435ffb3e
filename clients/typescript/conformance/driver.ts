// The TypeScript client's conformance driver: it reads the commands of
// clients/conformance/DRIVER.md on stdin, one JSON object a line, runs
// each on a Client through its public API only, and writes each result
// (and each event) on stdout as one JSON line.

import { createInterface } from "node:readline";
import {
  AbortError,
  AuthError,
  Client,
  type ClientOptions,
  ClosedError,
  type Election,
  type Hold,
  HoldLostError,
  type HoldSet,
  InvalidArgumentError,
  LimitMismatchError,
  NotHeldError,
  type Observation,
  type QueueState,
  RefusedError,
  TimeoutError,
  UnavailableError,
  type Watch,
} from "../src/index.js";

type Cmd = Record<string, any> & { id: number; cmd: string };

const opened = { at: 0 };
let client: Client | undefined;
let closed = false;
let handles = 0;
const holds = new Map<number, { hold: Hold | HoldSet; election?: Election }>();
const watches = new Map<number, Watch | Observation>();
const inflight = new Set<Promise<void>>();

function write(v: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? x.toString() : x)) + "\n");
}

function sinceOpen(): number {
  return performance.now() - opened.at;
}

class Unsupported extends Error {}

function need(): Client {
  if (!client) throw new InvalidArgumentError("open has not succeeded; send open first");
  return client;
}

function token(s: unknown): bigint {
  if (typeof s !== "string" || !/^[0-9]{1,20}$/.test(s)) throw new InvalidArgumentError(`token ${JSON.stringify(s)} is not a decimal u64`);
  return BigInt(s);
}

/** The signal of one call: aborted cancel_after_ms after it started, when the command says so. */
function callSignal(c: Cmd): { signal?: AbortSignal; done: () => void } {
  if (typeof c.cancel_after_ms !== "number") return { done: () => {} };
  const ac = new AbortController();
  const t = setTimeout(() => ac.abort(new Error(`cancelled after ${c.cancel_after_ms} ms`)), c.cancel_after_ms);
  return { signal: ac.signal, done: () => clearTimeout(t) };
}

function queueJSON(q: QueueState): Record<string, unknown> {
  return {
    holders: q.holders.map((h) => ({
      token: h.token.toString(),
      lease_left_ms: h.leaseLeft,
      id: h.id,
      shared: h.shared,
      set: h.setId?.toString(),
      place: h.place,
      value: h.value,
    })),
    waiters: q.waiters.map((w) => ({ waited_ms: w.waited, addr: w.addr, id: w.id, shared: w.shared, set_keys: w.setKeys })),
    nwaiters: q.nwaiters,
    limit: q.limit,
    shared: q.shared,
  };
}

function classify(e: unknown): [string, string] {
  const msg = e instanceof Error ? e.message : String(e);
  if (e instanceof Unsupported) return ["unsupported", msg];
  if (e instanceof InvalidArgumentError) return ["invalid", msg];
  if (e instanceof AbortError) return ["cancelled", msg];
  if (e instanceof TimeoutError) return ["timeout", msg];
  if (e instanceof NotHeldError) return ["notheld", msg];
  if (e instanceof LimitMismatchError) return ["limit_mismatch", msg];
  if (e instanceof ClosedError) return ["closed", msg];
  if (e instanceof AuthError) return ["auth", msg];
  if (e instanceof RefusedError) return ["refused", msg];
  if (e instanceof UnavailableError) return ["unavailable", msg];
  return ["other", msg];
}

function addHold(hold: Hold | HoldSet, election?: Election): number {
  const h = ++handles;
  holds.set(h, { hold, election });
  hold.signal.addEventListener(
    "abort",
    () => {
      const r = hold.signal.reason;
      const reason = r instanceof HoldLostError ? r.reason : "other";
      const key = "lostKey" in hold ? hold.lostKey : undefined;
      write({ event: "lost", hold: h, reason, key, message: r instanceof Error ? r.message : String(r), ms_since_open: sinceOpen() });
    },
    { once: true },
  );
  return h;
}

/**
 * Pumps a watch's states (or an observation's leaders) out as events until
 * it ends. A stale value is written as a stale event; the first value
 * after it that is not, after a current event (DRIVER.md).
 */
function pump(h: number, it: Watch | Observation, leaders: boolean): void {
  void (async () => {
    let reason = "closed";
    let stale = false;
    try {
      for (;;) {
        const r = await it.next();
        if (r.done) break;
        if (it.stale) {
          stale = true;
          write({ event: "stale", watch: h, message: "the watch lost the cluster", ms_since_open: sinceOpen() });
          continue;
        }
        if (stale) {
          stale = false;
          write({ event: "current", watch: h, ms_since_open: sinceOpen() });
        }
        if (leaders) {
          const l = r.value as { value: string; token: bigint } | null;
          write({ event: "leader", watch: h, value: l ? l.value : null, token: l ? l.token.toString() : null, ms_since_open: sinceOpen() });
        } else {
          write({ event: "watch", watch: h, ...queueJSON(r.value as QueueState), ms_since_open: sinceOpen() });
        }
      }
    } catch (e) {
      reason = classify(e)[0] + ": " + (e instanceof Error ? e.message : String(e));
    }
    write({ event: "watch_end", watch: h, reason });
  })();
}

async function run(c: Cmd): Promise<Record<string, unknown> | undefined> {
  switch (c.cmd) {
    case "open": {
      if (client) throw new InvalidArgumentError("open was sent twice; one driver runs one client");
      const o: ClientOptions = {};
      if (c.failure_timeout_ms !== undefined) o.failureTimeout = c.failure_timeout_ms;
      if (c.conns_per_addr !== undefined) o.connsPerAddr = c.conns_per_addr;
      if (c.redial_ms !== undefined) o.redial = c.redial_ms;
      if (c.release_every_ms !== undefined) o.releaseEvery = c.release_every_ms;
      if (c.release_for_ms !== undefined) o.releaseFor = c.release_for_ms;
      if (c.dial_timeout_ms !== undefined) o.dialTimeout = c.dial_timeout_ms;
      if (c.name !== undefined) o.name = c.name;
      if (c.secret !== undefined) o.secret = c.secret;
      if (c.role !== undefined && c.role !== "") o.role = c.role;
      if (c.tls) o.tls = { caFile: c.tls.ca || undefined, certFile: c.tls.cert || undefined, keyFile: c.tls.key || undefined, serverName: c.tls.server_name || undefined };
      else o.tls = false;
      client = new Client(c.addrs, o);
      opened.at = performance.now();
      return undefined;
    }
    case "close":
      closed = true;
      await client?.close();
      return undefined;
    case "acquire": {
      const s = callSignal(c);
      try {
        const l = await need().acquire(c.key, { lease: c.lease_ms, wait: c.wait_ms ?? 0, limit: c.limit || undefined, shared: c.shared === true, signal: s.signal });
        return { token: l.token.toString(), limit: l.limit, place: l.place ?? null };
      } finally {
        s.done();
      }
    }
    case "acquire_all": {
      const s = callSignal(c);
      try {
        const l = await need().acquireAll(c.keys, { lease: c.lease_ms, wait: c.wait_ms ?? 0, shared: c.shared === true, signal: s.signal });
        return { tokens: [...l.tokens.values()].map(String) };
      } finally {
        s.done();
      }
    }
    case "hold_all": {
      const s = callSignal(c);
      try {
        const hs = await need().holdAll(c.keys, { lease: c.lease_ms, wait: c.wait_ms ?? 0, max: c.max_ms || undefined, shared: c.shared === true, signal: s.signal });
        return { hold: addHold(hs), tokens: [...hs.tokens.values()].map(String) };
      } finally {
        s.done();
      }
    }
    case "try": {
      const s = callSignal(c);
      try {
        const l = await need().tryAcquire(c.key, { lease: c.lease_ms, limit: c.limit || undefined, shared: c.shared === true, signal: s.signal });
        return l ? { acquired: true, token: l.token.toString() } : { acquired: false };
      } finally {
        s.done();
      }
    }
    case "release": {
      const s = callSignal(c);
      try {
        await need().release(c.key, token(c.token), { signal: s.signal });
        return undefined;
      } finally {
        s.done();
      }
    }
    case "renew": {
      const s = callSignal(c);
      try {
        await need().renew(c.key, token(c.token), c.lease_ms, { signal: s.signal });
        return undefined;
      } finally {
        s.done();
      }
    }
    case "hold": {
      const s = callSignal(c);
      try {
        const hold = await need().hold(c.key, {
          lease: c.lease_ms,
          wait: c.wait_ms ?? 0,
          limit: c.limit || undefined,
          max: c.max_ms || undefined,
          shared: c.shared === true,
          signal: s.signal,
        });
        return { hold: addHold(hold), token: hold.token.toString(), place: hold.place ?? null };
      } finally {
        s.done();
      }
    }
    case "hold_release":
    case "resign": {
      const h = holds.get(c.hold);
      if (!h) throw new InvalidArgumentError(`hold ${c.hold} is not a handle this driver gave`);
      if (c.cmd === "resign" && h.election) await h.election.resign();
      else await h.hold.release();
      return undefined;
    }
    case "hold_state": {
      const h = holds.get(c.hold);
      if (!h) throw new InvalidArgumentError(`hold ${c.hold} is not a handle this driver gave`);
      const lost = h.hold.lost;
      return lost ? { lost: true, reason: lost.reason } : { lost: false };
    }
    case "queue":
      return queueJSON(await need().queue(c.key));
    case "keys": {
      const k = await need().keys(c.pattern);
      return { keys: k.keys, total: k.total };
    }
    case "status": {
      const st = await need().status();
      // DRIVER.md's u64s are decimal strings.
      return {
        fields: {
          self: st.self,
          role: st.role,
          active: st.active,
          token: st.token.toString(),
          seq: st.seq.toString(),
          uptime_ms: st.uptime,
          keys: st.keys,
          waiters: st.waiters,
          sticky: st.sticky,
          replication: st.replication,
          degraded: st.degraded,
          durability: st.durability,
          peers: st.peers.map((p) => ({ addr: p.addr, role: p.role, up: p.up, seq: p.seq.toString(), lag: p.lag.toString(), token: p.token.toString() })),
        },
      };
    }
    case "watch": {
      const w = need().watch(c.key);
      const h = ++handles;
      watches.set(h, w);
      pump(h, w, false);
      return { watch: h };
    }
    case "observe": {
      const o = need().election(c.key).observe();
      const h = ++handles;
      watches.set(h, o);
      pump(h, o, true);
      return { watch: h };
    }
    case "unwatch": {
      const w = watches.get(c.watch);
      if (!w) throw new InvalidArgumentError(`watch ${c.watch} is not a handle this driver gave`);
      w.close();
      watches.delete(c.watch);
      return undefined;
    }
    case "campaign": {
      const e = need().election(c.key);
      const hold = await e.campaign(c.value, { lease: c.lease_ms || undefined });
      return { hold: addHold(hold, e), token: hold.token.toString() };
    }
    case "proclaim": {
      const h = holds.get(c.hold);
      if (!h?.election) throw new InvalidArgumentError(`hold ${c.hold} is not a campaign's handle this driver gave`);
      await h.election.proclaim(c.value);
      return undefined;
    }
    case "leader": {
      const l = await need().election(c.key).leader();
      return l ? { value: l.value, token: l.token.toString() } : { value: null, token: null };
    }
  }
  throw new Unsupported(`the TypeScript driver does not know the command ${JSON.stringify(c.cmd)}`);
}

function answer(c: Cmd, start: number): Promise<void> {
  return run(c).then(
    (res) => write({ ...(res ?? {}), id: c.id, ok: true, ms: performance.now() - start }),
    (e) => {
      const [kind, message] = classify(e);
      write({ id: c.id, ok: false, ms: performance.now() - start, error: kind, message });
    },
  );
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
let chain: Promise<void> = Promise.resolve();
rl.on("line", (line) => {
  if (line.trim() === "") return;
  const start = performance.now();
  let c: Cmd;
  try {
    c = JSON.parse(line);
  } catch (e) {
    process.stderr.write(`driver: line ${JSON.stringify(line)} is not a command: ${(e as Error).message}\n`);
    return;
  }
  // open runs before any other command reads the client.
  const p = c.cmd === "open" ? (chain = chain.then(() => answer(c, start))) : chain.then(() => answer(c, start));
  inflight.add(p);
  void p.finally(() => inflight.delete(p));
});
rl.on("close", () => {
  void (async () => {
    // Closing first ends the calls still waiting (they answer closed).
    if (client && !closed) await client.close();
    await Promise.allSettled([...inflight]);
    process.stdout.write("", () => process.exit(0));
  })();
});
