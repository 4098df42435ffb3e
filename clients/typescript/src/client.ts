// The client: a pool of persistent connections with the official
// clients' rules (clients/README.md, "Client behaviour"; the Go client, package
// proto/client, is the reference), and every call on top of it.

import { onAbort } from "./abort.js";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import type * as tls from "node:tls";
import type { Role } from "./auth.js";
import { Call, Conn, type LineSocket, type Result, asError, dial, splitHostPort } from "./conn.js";
import {
  AbortError,
  AuthError,
  ClosedError,
  DisagreeError,
  HoldLostError,
  InvalidArgumentError,
  LimitMismatchError,
  LockdError,
  NotHeldError,
  ProtocolError,
  RefusedError,
  TimeoutError,
  UnavailableError,
  opName,
} from "./errors.js";
import { Election, Hold, type HoldAllOptions, type HoldOptions, HoldSet } from "./hold.js";
import {
  type Answer,
  MAX_ID_LEN,
  MAX_LIMIT,
  MAX_MS,
  MAX_REF_LEN,
  MAX_SET_KEYS,
  MAX_TOKEN,
  type Grant,
  type QueueState,
  type Status,
  checkKey,
  errorText,
  formatSeconds,
  lineTooLong,
  parseGrant,
  parseQueue,
  parseStatus,
  withoutRef,
} from "./wire.js";

/** Options of a Client. Durations are milliseconds. Every field may be left out. */
export interface ClientOptions {
  /** Connections per address: 1, or 2 when only one address is given. */
  connsPerAddr?: number;
  /** Wait before re-dialling a dropped connection: 3000. */
  redial?: number;
  /** Release re-send interval: 200. */
  releaseEvery?: number;
  /** Stop re-sending a release after this: 5000. */
  releaseFor?: number;
  /** Longest a dial, TLS handshake or authentication may take: 2000. */
  dialTimeout?: number;
  /**
   * How long a node may stay silent before its connection is treated as
   * dropped: 1000, lockd's own --failure-timeout. Give it the cluster's.
   */
  failureTimeout?: number;
  /**
   * Speak TLS: true verifies nodes against the system roots, an object
   * names PEM files (caFile, certFile, keyFile) or their contents (ca,
   * cert, key) and the name to verify (serverName; default: the host of
   * each address). Env: LOCKD_TLS=1, LOCKD_TLS_CA, LOCKD_TLS_CERT,
   * LOCKD_TLS_KEY, LOCKD_TLS_SERVER_NAME.
   */
  tls?: boolean | TLSOptions;
  /** The shared secret, proven on every connection without being sent. */
  secret?: string | Buffer;
  /** A file holding the secret (env LOCKD_SECRET_FILE). */
  secretFile?: string;
  /** The role the secret proves: "client" (default), "admin" or "peer". */
  role?: Role;
  /**
   * Who this client is, for people reading a key's holders and waiters
   * (lockctl queues): it leads the id of every acquire, NAME#SUFFIX.
   * Default: env LOCKD_NAME, else none. Cut to 33 bytes.
   */
  name?: string;
  /** Receives a line for each connection event; default: none. */
  logger?: (msg: string) => void;
  /**
   * Let an idle client not keep the process alive: its sockets and
   * background timers (redials, keep-alives) are unref'd, so a program
   * whose work is done exits without close(). A call in flight, an open
   * watch or a hold still keeps the process alive until it ends.
   * Default false: the client keeps the process alive until close().
   */
  unref?: boolean;
}

export interface TLSOptions {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  serverName?: string;
}

/** What release() and renew() need of a lock: its key and token. */
export interface LockRef {
  key: string;
  token: bigint;
  /** The lease to renew with, when renew() is given none. */
  lease?: number;
}

/**
 * A granted lock, or one place of a semaphore, as acquire() returns it.
 * It releases itself: `await lock.release()`, or `await using lock =
 * await client.acquire(...)`, which releases it at the end of the block.
 */
export class Lock implements AsyncDisposable {
  /**
   * The fencing token: an unsigned 64-bit integer, so a bigint (it does
   * not fit a number). Hand it to the protected resource, which refuses
   * tokens smaller than the last it saw.
   */
  readonly token: bigint;

  /** @internal */
  constructor(
    private readonly client: Client,
    readonly key: string,
    token: bigint,
    /** The lease it was granted with, in milliseconds. */
    readonly lease: number,
    /** How many may hold key at once: 1 for a lock. */
    readonly limit: number,
    /** The id its acquire carried, as queue() shows it. */
    readonly id: string,
    /** The semaphore place (1 to limit) the node granted, undefined when it named none. */
    readonly place: number | undefined = undefined,
    /** It is held as a reader ({ shared: true }). */
    readonly shared: boolean = false,
  ) {
    this.token = token;
  }

  /** Gives the lock back (Client.release); the next waiter is granted at once. */
  release(options?: CallOptions): Promise<void> {
    return this.client.release(this.key, this.token, options);
  }

  /** Restarts its lease from now, by lease ms (default: the lease it was granted with). */
  renew(lease?: number, options?: CallOptions): Promise<void> {
    return this.client.renew(this.key, this.token, lease ?? this.lease, options);
  }

  /**
   * Releases it, for `await using`: a lock the node no longer counts as
   * held (released already, lease ran out) is no error here.
   */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.release();
    } catch (e) {
      if (!(e instanceof NotHeldError)) throw e;
    }
  }
}

export interface AcquireOptions {
  /** How long the lock is held unless renewed or released, in ms (required, > 0). */
  lease: number;
  /** Longest wait for the key, in ms; 0 (default) waits forever. */
  wait?: number;
  /** Take one of limit places of a semaphore; 1 (default) is a lock. */
  limit?: number;
  /**
   * Take the key as a reader: any number of readers hold it at once,
   * never beside a writer (an acquire without it). Not with a limit
   * above 1: a semaphore's places are all alike.
   */
  shared?: boolean;
  /** Aborts the wait; the waiter leaves the node's queue at once. */
  signal?: AbortSignal;
}

export interface TryAcquireOptions {
  lease: number;
  limit?: number;
  /** Take the key as a reader (AcquireOptions.shared). */
  shared?: boolean;
  signal?: AbortSignal;
}

/** Options of acquireAll and holdAll: those of an acquire, but a set has no limit. */
export type AcquireAllOptions = Omit<AcquireOptions, "limit">;
export type TryAcquireAllOptions = Omit<TryAcquireOptions, "limit">;

/**
 * Locks on several keys, granted together (all or none), each key with
 * its own fencing token: `tokens` maps each key to its token in the order
 * the keys were asked, `locks` are the keys' Lock objects in that order.
 * `await using` releases every key at the end of the block.
 */
export class LockSet implements AsyncDisposable {
  readonly keys: string[];
  readonly tokens: Map<string, bigint>;
  /** @internal */
  constructor(readonly locks: Lock[]) {
    this.keys = locks.map((l) => l.key);
    this.tokens = new Map(locks.map((l) => [l.key, l.token]));
  }

  /** Gives every key back; rejects with the first error once every key was tried. */
  async release(options?: CallOptions): Promise<void> {
    const rs = await Promise.allSettled(this.locks.map((l) => l.release(options)));
    for (const r of rs) if (r.status === "rejected") throw r.reason;
  }

  /** Restarts every key's lease from now: one renewal per key. */
  async renew(lease?: number, options?: CallOptions): Promise<void> {
    await Promise.all(this.locks.map((l) => l.renew(lease, options)));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.release();
    } catch (e) {
      if (!(e instanceof NotHeldError)) throw e;
    }
  }
}

export interface CallOptions {
  signal?: AbortSignal;
}

const defaults = {
  redial: 3000,
  releaseEvery: 200,
  releaseFor: 5000,
  dialTimeout: 2000,
  failureTimeout: 1000,
};

/**
 * How many M redirects in a row, each answered at once, one send follows
 * at least; it follows them for three failure timeouts at least too, the
 * time nodes started or restarted together take to agree on an active
 * node. A count alone would give up within a fraction of a second.
 */
const maxMoves = 10;
/** How many dropped connections one call survives. */
const maxDrops = 8;
/** Bound on connections added for addresses learnt from M answers. */
const maxDynamic = 16;
/** How long past its wait an acquire waits for the node's own T. */
const acquireGrace = 500;
/** '#', 16 hex digits, '-' and up to 13 base-36 digits. */
const idSuffixLen = 1 + 16 + 1 + 13;
/** The longest name (or election value) an id has room for. */
export const MAX_NAME_LEN = MAX_ID_LEN - idSuffixLen;

/** What one call remembers of the connections it tried. */
class Attempt {
  target = "";
  // Made on first use: most calls never meet a failed connection.
  failed: Map<Conn, number> | undefined;
  fresh: Set<Conn> | undefined;
  drops = 0;
  moves = 0;
  /** When the first of those redirects came, Date.now(). */
  movedSince = 0;
  lastErr: Error | undefined;
  stale = 0;
  staleSince = 0;
  fail(cn: Conn, gen: number, err: Error): void {
    (this.failed ??= new Map()).set(cn, gen);
    this.drops++;
    this.lastErr = err;
  }
}

interface Req {
  op: string;
  key: string;
  /** An acquire's keys after key, for a set. */
  more?: string[];
  /** The line of the next send; throws when an acquire's wait has run out. */
  line(now: number): string;
  /** A fresh ref for each send of an acquire, "" for other ops. */
  ref?: () => string;
}

interface TripOptions {
  resend: boolean;
  /**
   * An acquire that waits (not a try): it waits through an outage too,
   * until aborted or, with waitLeft, until its wait runs out.
   */
  patient?: boolean;
  /**
   * An acquire's wait in milliseconds still left, started now if it had
   * not; absent for one that waits until aborted.
   */
  waitLeft?: () => number;
  signal?: AbortSignal;
  target?: string;
  onAnswer?: (a: Answer, cn: Conn) => void;
  /** Runs when the caller gives up on a call sent on a connection. */
  onAbandon?: (cl: Call) => void;
}

class WaitElapsed extends Error {}

export type { PeerStatus, Status } from "./wire.js";

/** One key's watch subscription: on which connection, and who reads it. */
class WatchSub {
  conn: Conn | undefined;
  gen = 0;
  target = "";
  subscribing = false;
  last: QueueState | undefined;
  /**
   * live: the node on conn answered the subscription, and it was not lost
   * since (lostAt). stale: lost for a failure timeout, and the watchers
   * were told.
   */
  live = false;
  lostAt = 0;
  stale = false;
  readonly watchers = new Set<Watch>();
  constructor(readonly key: string) {}

  /** The subscription is gone: its connection dropped, or the node gave its role up. */
  lose(): void {
    this.conn = undefined;
    if (this.live) {
      this.live = false;
      this.lostAt = Date.now();
    }
  }
}

/**
 * A client of the lockd nodes at a list of addresses. It dials in the
 * background and returns at once; share one Client in a process: every
 * call is pipelined on its connections.
 */
export class Client {
  readonly addrs: string[];
  readonly failureTimeout: number;
  readonly redial: number;
  private readonly opts: Required<Pick<ClientOptions, "releaseEvery" | "releaseFor" | "dialTimeout">> & { connsPerAddr: number };
  private readonly tlsOpts: tls.ConnectionOptions | undefined;
  private readonly secret: Buffer | undefined;
  private readonly role: Role;
  private readonly logger: ((msg: string) => void) | undefined;
  private readonly conns: Conn[] = [];
  private dynamic = 0;
  private active = "";
  private rr = 0;
  private changedP!: Promise<void>;
  private changedR!: () => void;
  private isClosed = false;
  private lastError: Error | undefined;
  /** A node answered this client's hello: it is a lockd node, and an outage after is one a patient call waits through. */
  private everUp = false;
  /** A node took this client's TCP connection: a release sent may have arrived there, and is worth re-sending. */
  private everConnected = false;
  private readonly liveness: NodeJS.Timeout;
  private readonly idPrefix: string;
  private readonly idRand: string;
  private ids = 0;
  private refs = 0;
  private readonly subs = new Map<string, WatchSub>();
  private readonly holds = new Set<Hold>();
  /** ClientOptions.unref. */
  readonly unrefIdle: boolean;
  /**
   * @internal A node refused value= (an older lockd): campaigns carry
   * their value in the acquire's id, as such a node shows it.
   */
  valuesRefused = false;
  /** Calls in flight and open watches, while unrefIdle: the keeper runs while there is one. */
  private inFlight = 0;
  private keeper: NodeJS.Timeout | undefined;

  /**
   * @param addrs HOST:PORT of every node, an array or a comma-separated
   *   string; default: env LOCKD_ADDR, else 127.0.0.1:7070.
   */
  constructor(addrs?: string | string[], options: ClientOptions = {}) {
    const env = process.env;
    let list = addrs ?? env.LOCKD_ADDR ?? "127.0.0.1:7070";
    if (typeof list === "string") list = list.split(",");
    this.addrs = checkAddrs(list);
    const o = options;
    this.redial = positive(o.redial, "redial") ?? defaults.redial;
    this.failureTimeout = positive(o.failureTimeout, "failureTimeout") ?? defaults.failureTimeout;
    this.opts = {
      connsPerAddr: positive(o.connsPerAddr, "connsPerAddr") ?? (this.addrs.length === 1 ? 2 : 1),
      releaseEvery: positive(o.releaseEvery, "releaseEvery") ?? defaults.releaseEvery,
      releaseFor: positive(o.releaseFor, "releaseFor") ?? defaults.releaseFor,
      dialTimeout: positive(o.dialTimeout, "dialTimeout") ?? defaults.dialTimeout,
    };
    this.role = o.role ?? "client";
    if (!["client", "admin", "peer"].includes(this.role)) throw new InvalidArgumentError(`role ${JSON.stringify(this.role)}: want client, admin or peer`);
    this.secret = readSecret(o.secret, o.secretFile ?? (o.secret === undefined ? env.LOCKD_SECRET_FILE || undefined : undefined));
    this.tlsOpts = tlsOptions(o.tls);
    this.logger = o.logger;
    this.unrefIdle = o.unref === true;
    this.idRand = randomBytes(8).toString("hex");
    const name = o.name ?? env.LOCKD_NAME ?? "";
    this.idPrefix = name === "" ? "" : cleanName(name) + "#";
    this.renewChanged();
    for (const a of this.addrs) for (let i = 0; i < this.opts.connsPerAddr; i++) this.addConn(a, false);
    const tick = Math.min(Math.max(Math.floor(this.failureTimeout / 10), 1), 100);
    this.liveness = setInterval(() => {
      const now = Date.now();
      for (const cn of this.conns) cn.checkLive(now);
      for (const sub of this.subs.values()) this.checkStale(sub, now);
    }, tick);
    if (this.unrefIdle) this.liveness.unref();
  }

  /**
   * Counts a call or watch starting (1) or ending (-1). With unrefIdle,
   * whose sockets and timers keep nothing alive, a timer that does is
   * running while any is: the process waits for what it asked.
   */
  private busy(d: number): void {
    if (!this.unrefIdle) return;
    this.inFlight += d;
    if (this.inFlight > 0 && !this.keeper) this.keeper = setInterval(() => {}, 1 << 30);
    else if (this.inFlight <= 0 && this.keeper) {
      clearInterval(this.keeper);
      this.keeper = undefined;
    }
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /**
   * The shortest lease hold() and campaign() take, in ms: twice
   * failureTimeout. A held lock stays held only while a renewal lands
   * within each lease; when the active node fails, the client notices
   * within about a failure timeout, the cluster promotes another node
   * within about one, and the renewal must reach it before the lease
   * ends. A shorter lease is lost in any failover.
   */
  get minHoldLease(): number {
    return 2 * this.failureTimeout;
  }

  /** The address of the node last known to be active, "" until one is known. */
  get activeAddr(): string {
    return this.active;
  }

  // ---- ConnHost

  /** @internal */
  open(addr: string): Promise<LineSocket> {
    return dial(addr, {
      dialTimeout: this.opts.dialTimeout,
      failureTimeout: this.failureTimeout,
      tls: this.tlsOpts,
      secret: this.secret,
      role: this.role,
      unref: this.unrefIdle,
      // A node that took the connection was reached: a release sent to
      // it may have arrived, and is worth re-sending. Only its answer to
      // the hello says it is a lockd node (see everUp).
      onConnect: () => {
        this.everConnected = true;
      },
    });
  }

  /** @internal */
  connUp(_cn: Conn): void {
    this.everUp = this.everConnected = true;
    this.notify();
  }

  /** @internal */
  connDown(cn: Conn, err: Error): void {
    if (!(err instanceof ClosedError)) this.lastError = err;
    if (this.active === cn.addr && !this.upAt(cn.addr)) {
      // Calls go round the other nodes until one names the active again.
      this.active = "";
    }
    this.notify();
    for (const sub of this.subs.values()) {
      if (sub.conn === cn) {
        sub.lose();
        void this.subscribe(sub);
      }
    }
  }

  /** @internal */
  log(msg: string): void {
    this.logger?.(msg);
  }

  /**
   * An answer that came after its caller gave up. A grant is released at
   * once, so that an abandoned acquire leaks no lock.
   * @internal
   */
  orphan(cl: Call, a: Answer): void {
    if (cl.op !== "A") return;
    const b = withoutRef(a);
    const keys = [cl.key, ...cl.more];
    const g = b.kind === "A" ? parseGrant(b.fields, keys.length) : undefined;
    if (g === undefined || this.isClosed) return;
    keys.forEach((key, i) => {
      const token = g.tokens[i];
      this.release(key, token).then(
        () => this.log(`released ${key} token ${token}, granted after its acquire gave up`),
        (e) => this.log(`release of ${key} token ${token}, granted after its acquire gave up: ${asError(e).message}`),
      );
    });
  }

  /** @internal */
  watchLine(cn: Conn, a: Answer): void {
    const sub = this.subs.get(a.key);
    if (sub && sub.conn === cn) this.deliverWatch(sub, a);
  }

  /** @internal */
  watchMoved(cn: Conn, a: Answer): boolean {
    const sub = this.subs.get(a.key);
    if (!sub || sub.conn !== cn) return false;
    sub.lose();
    const addr = a.fields[0] ?? "";
    if (validAddr(addr)) {
      this.setActive(addr);
      sub.target = addr;
    }
    void this.subscribe(sub);
    return true;
  }

  // ---- the pool

  private addConn(addr: string, dynamic: boolean): void {
    const cn = new Conn(this, addr);
    this.conns.push(cn);
    if (dynamic) this.dynamic++;
    void cn.run();
  }

  private renewChanged(): void {
    this.changedP = new Promise((r) => (this.changedR = r));
  }

  private notify(): void {
    const r = this.changedR;
    this.renewChanged();
    r();
  }

  private setActive(addr: string): void {
    if (addr !== this.active) {
      this.log(`active node ${addr} (was ${this.active || "unknown"})`);
      this.active = addr;
    }
  }

  private upAt(addr: string): boolean {
    return this.conns.some((cn) => cn.addr === addr && cn.state === "up");
  }

  /**
   * Whether addr is dead; if it is, its connections are dialled at once
   * instead of at the next redial: a node named by an M answer is one the
   * cluster says is active, so a node restarted or resumed there is worth
   * finding now.
   */
  private stale(addr: string): boolean {
    if (!this.dead(addr)) return false;
    for (const cn of this.conns) if (cn.addr === addr) cn.dialNow();
    return true;
  }

  /** How long addr has not answered this client, in words. */
  private silence(addr: string): string {
    let heard = 0;
    for (const cn of this.conns) if (cn.addr === addr && cn.gen > 0) heard = Math.max(heard, cn.lastRead);
    return heard === 0 ? "which this client has never reached" : `which has not answered this client for ${Date.now() - heard} ms`;
  }

  /** Whether every connection to addr failed since it was last up and none came back. */
  private dead(addr: string): boolean {
    let found = false;
    for (const cn of this.conns) {
      if (cn.addr !== addr) continue;
      if (cn.state === "up" || cn.lastErr === undefined) return false;
      found = true;
    }
    return found;
  }

  /**
   * Picks the connection for the next send of a call: round-robin over
   * the live connections to the active node when one is known (or to
   * at.target), else over all live connections. When none is live it
   * starts a dial of those this call has not seen tried and returns a
   * promise of the next change. It throws when every one was tried.
   */
  private choose(at: Attempt): Conn | Promise<void> {
    if (this.isClosed) throw new ClosedError();
    let target = at.target || this.active;
    if (target !== "" && this.dead(target)) target = "";
    if (target !== "") {
      if (this.dynamic < maxDynamic && !this.conns.some((cn) => cn.addr === target)) this.addConn(target, true);
      const [cn, wait] = this.pick(target, at);
      if (cn) return cn;
      if (wait) return this.changedP;
    }
    const [cn, wait] = this.pick("", at);
    if (cn) return cn;
    if (wait) return this.changedP;
    throw this.unavailable(at.lastErr);
  }

  private pick(addr: string, at: Attempt): [Conn | undefined, boolean] {
    const conns = this.conns;
    const usable = (cn: Conn): boolean => {
      if (cn.state !== "up" || (addr !== "" && cn.addr !== addr)) return false;
      const g = at.failed?.get(cn);
      return g === undefined || cn.gen > g;
    };
    // Every acquire carries ref=, so its answer is never held back
    // behind another's of the same key: any live connection will do.
    let n = 0;
    for (const cn of conns) if (usable(cn)) n++;
    if (n > 0) {
      let i = this.rr++ % n;
      for (const cn of conns) {
        if (usable(cn)) {
          if (i === 0) return [cn, false];
          i--;
        }
      }
    }
    let wait = false;
    for (const cn of conns) {
      if (addr !== "" && cn.addr !== addr) continue;
      if (cn.state === "dialing") {
        (at.fresh ??= new Set()).add(cn);
        wait = true;
      } else if (cn.state === "down" && !at.fresh?.has(cn)) {
        (at.fresh ??= new Set()).add(cn);
        cn.dialNow();
        wait = true;
      }
    }
    return [undefined, wait];
  }

  private unavailable(last?: Error): LockdError {
    last ??= this.lastError;
    const addrs = [...new Set(this.conns.map((cn) => cn.addr))].join(", ");
    if (last instanceof AuthError) {
      return new AuthError(`${last.message} (tried ${addrs}); check --secret-file / LOCKD_SECRET_FILE and the TLS settings against the node's`, last);
    }
    const hint = "check that lockd is running there and that the addresses (or LOCKD_ADDR) name it";
    return new UnavailableError(`no lockd node available: tried ${addrs}${last ? ` (${last.message})` : ""}; ${hint}`, last);
  }

  /**
   * Sends req and returns its answer, moving the request to another
   * connection when one drops (if resend) and following M answers to the
   * node they name. The answer is never M; an E answer is thrown.
   */
  private async roundTrip(req: Req, o: TripOptions): Promise<{ a: Answer; cn: Conn }> {
    this.busy(1);
    try {
      return await this.trip(req, o);
    } finally {
      this.busy(-1);
    }
  }

  private async trip(req: Req, o: TripOptions): Promise<{ a: Answer; cn: Conn }> {
    let at = new Attempt();
    at.target = o.target ?? "";
    let outages = 0;
    // Waits out a spell with no node to serve a patient call, which cause
    // describes, then starts a new attempt; early: stop waiting as soon as
    // a connection is up. An acquire with a wait waits no longer than
    // what is left of it (from its first send, or from the outage's
    // start when it was never sent), then rejects with cause.
    const outage = async (early: boolean, cause: unknown) => {
      let pause = Math.min(50 * 2 ** Math.min(outages, 6), this.redial, 1000);
      if (o.waitLeft) {
        const left = o.waitLeft();
        if (left <= 0) throw waitRanOut(cause);
        pause = Math.min(pause, left);
      }
      await this.awaitNode(pause, o.signal, early);
      outages++;
      at = new Attempt();
      if (o.waitLeft && o.waitLeft() <= 0) throw waitRanOut(cause);
    };
    const waitRanOut = (cause: unknown) =>
      new UnavailableError(`${cause instanceof Error ? cause.message : String(cause)}; it stayed so for the whole wait`, cause);
    for (;;) {
      throwIfAborted(o.signal);
      let ch: Conn | Promise<void>;
      try {
        ch = this.choose(at);
      } catch (e) {
        if (!this.waitsOut(e, o)) throw e;
        await outage(true, e);
        continue;
      }
      if (ch instanceof Promise) {
        await raceAbort(ch, o.signal);
        continue;
      }
      const cn = ch;
      const gen = cn.gen;
      let line: string;
      try {
        line = req.line(Date.now());
      } catch (e) {
        if (e instanceof WaitElapsed && (at.lastErr as LockdError | undefined)?.code === "ENOANSWER") {
          // The wait ran out on a node that stopped answering: nobody said the key was busy.
          throw this.unavailable(at.lastErr);
        }
        if (e instanceof WaitElapsed && at.moves > 2) {
          // The wait ran out while nodes sent the request on to one
          // another (a handoff takes one or two): nobody said the key
          // was busy either.
          throw new DisagreeError(
            `the wait ran out while the request was redirected ${at.moves} times in a row over ${((Date.now() - at.movedSince) / 1000).toFixed(1)}s${at.target ? `, the last time to ${at.target}` : ""}: the nodes disagree on which one is active; retry in a moment, and check lockctl status`,
          );
        }
        throw e;
      }
      const ref = req.ref?.() ?? "";
      if (ref !== "") line = line.slice(0, -1) + " ref=" + ref + "\n";
      let got: Result | undefined;
      let wake: ((r: Result) => void) | undefined;
      const cl = new Call(
        req.op,
        req.key,
        line,
        (r) => {
          got = r;
          wake?.(r);
        },
        ref,
        false,
        o.onAnswer,
      );
      if (req.more) cl.more = req.more;
      if (!cn.send(cl)) {
        at.fail(cn, gen, new Error(`connection to ${cn.addr} is down`));
        continue;
      }
      if (at.moves > 0) cn.probe();
      let r: Result;
      try {
        r = await raceAbort(
          new Promise<Result>((res) => {
            if (got) res(got);
            else wake = res;
          }),
          o.signal,
        );
      } catch (e) {
        if (!got) {
          cl.abandoned = true;
          o.onAbandon?.(cl);
          throw e;
        }
        r = got;
      }
      if ("err" in r) {
        if (r.err instanceof ClosedError) throw r.err;
        at.fail(cn, gen, r.err);
        if (!o.resend) {
          throw new LockdError(`${r.err.message}, after the request was sent: it may or may not have been applied`, "ECONNLOST", { cause: r.err });
        }
        if (at.drops >= maxDrops) {
          const err = this.unavailable(new LockdError(`${at.drops} connections dropped during this request, last: ${r.err.message}`, "ECONNLOST"));
          if (!this.waitsOut(err, o)) throw err;
          // Connections that come up and drop again: pause before the
          // next round, whatever is up.
          await outage(false, err);
        }
        continue;
      }
      outages = 0;
      const a = req.op === "A" ? withoutRef(r.ans) : r.ans;
      if (a.kind === "M") {
        const addr = a.fields.length === 1 ? a.fields[0] : "";
        if (!validAddr(addr)) {
          throw new ProtocolError(`node ${cn.addr} redirected ${a.key} to ${JSON.stringify(addr)}, which is not HOST:PORT; check the --peers and --advertise of that node`);
        }
        if (r.landed) at.moves = 0; // taken in and moved later (a handoff): a new attempt begins
        let pause = 0;
        if (this.stale(addr)) {
          // The node named stopped answering this client: either the one
          // that named it has not noticed yet that it failed (a failover
          // under way), or it is back (restarted, resumed) and took its
          // role again. stale() dialled it; ask again shortly, which finds
          // it if it is back, or the node that took over.
          const now = Date.now();
          if (at.staleSince === 0) at.staleSince = now;
          if (!(o.patient && !o.waitLeft) && now - at.staleSince > 10 * this.failureTimeout) {
            throw this.unavailable(new LockdError(`${cn.addr} still names ${addr} as the active node, ${this.silence(addr)}: no other node took over`, "ENOANSWER"));
          }
          at.stale++;
          at.target = "";
          pause = Math.min(at.stale * 25, 100);
        } else {
          at.staleSince = 0;
          this.setActive(addr);
          this.followWatch(req.key, addr);
          const now = Date.now();
          if (at.moves++ === 0) at.movedSince = now;
          if (at.moves > maxMoves && now - at.movedSince > 3 * this.failureTimeout) {
            throw new DisagreeError(`redirected ${at.moves} times in a row over ${((now - at.movedSince) / 1000).toFixed(1)}s, the last time by ${cn.addr} to ${addr}: the nodes disagree on which one is active; retry in a moment, and check lockctl status`);
          }
          at.target = addr;
          pause = at.moves <= 2 ? 0 : Math.min((at.moves - 2) * 25, 100);
        }
        if (pause > 0) await raceAbort(sleep(pause), o.signal);
        continue;
      }
      if (a.kind === "E") throw refusal(a);
      if (req.op !== "H" && req.op !== "S") this.setActive(cn.addr);
      return { a, cn };
    }
  }

  /**
   * Whether err, a call's failure to find a node, is an outage a call
   * with options o waits through: a patient call on a client that has
   * reached a node before, or an acquire with a wait on one that never
   * has, while every node refuses the connection (a cluster starting or
   * restarting). Addresses never reached may well be wrong, all the more
   * when a dial times out: waiting forever on them would hang a client
   * given wrong addresses for good. A node refusing the TLS or the secret
   * (AuthError) will not change its mind.
   */
  private waitsOut(err: unknown, o: TripOptions): boolean {
    if (!o.patient || !(err instanceof UnavailableError)) return false;
    if (this.everUp) return true;
    return o.waitLeft !== undefined && this.nothingListens();
  }

  /** Whether the last dial of every connection was refused: no node listens at any address. */
  private nothingListens(): boolean {
    return this.conns.length > 0 && this.conns.every((cn) => refused(cn.lastErr));
  }

  /** Waits pause ms, or (early) until a connection is up, or the signal aborts. */
  private async awaitNode(pause: number, signal: AbortSignal | undefined, early: boolean): Promise<void> {
    const end = Date.now() + pause;
    for (;;) {
      throwIfAborted(signal);
      if (this.isClosed) throw new ClosedError();
      if (early && this.conns.some((cn) => cn.state === "up")) return;
      const left = end - Date.now();
      if (left <= 0) return;
      let t: NodeJS.Timeout | undefined;
      await raceAbort(Promise.race([this.changedP, new Promise<void>((r) => (t = setTimeout(r, left)))]), signal).finally(() => clearTimeout(t));
    }
  }

  // ---- calls

  /**
   * Waits for key and returns the lock with its fencing token. The wait
   * counts from the first send, also when the request moves to another
   * connection. Rejects with TimeoutError when the wait elapses,
   * RefusedError (LimitMismatchError) when the node refuses,
   * UnavailableError when no node could be reached, AbortError when
   * signal aborts (the waiter is withdrawn; a grant that crossed is
   * released).
   */
  acquire(key: string, options: AcquireOptions): Promise<Lock> {
    return this.acquireAs(key, options, false, "") as Promise<Lock>;
  }

  /** Takes key if it is free right now; null when others hold it. Never queues. */
  async tryAcquire(key: string, options: TryAcquireOptions): Promise<Lock | null> {
    return this.acquireAs(key, { ...options, wait: 0 }, true, "");
  }

  /** @internal acquire whose id names `name` (an election's value, on an older node) instead of the client's name. */
  async acquireAs(key: string, options: AcquireOptions, tryOnly: boolean, name: string, value = ""): Promise<Lock | null> {
    const g = await this.grant([key], options, tryOnly, name, value);
    return g && new Lock(this, key, g.tokens[0], g.lease, g.limit, g.id, g.place, options.shared === true);
  }

  /**
   * Acquires keys (one, or a set: all or none) and returns the grant, or
   * null when a try found a key busy. value is encoded already.
   */
  private async grant(
    keys: string[],
    options: AcquireOptions,
    tryOnly: boolean,
    name: string,
    value: string,
  ): Promise<(Grant & { lease: number; limit: number; id: string }) | null> {
    const what = tryOnly ? "tryAcquire" : "acquire";
    const key = keys[0];
    keyOK(what, key);
    if (typeof options !== "object" || options === null) throw new InvalidArgumentError(`${what} ${key}: pass options with a lease, for example { lease: 30000 }`);
    const lease = leaseOK(what, key, options.lease);
    const wait = options.wait ?? 0;
    if (typeof wait !== "number" || !(wait >= 0) || wait > MAX_MS) {
      throw new InvalidArgumentError(`${what} ${key}: wait ${wait} is out of range; pass 0 to wait forever, or up to ${MAX_MS} ms`);
    }
    const limit = options.limit ?? 1;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
      throw new InvalidArgumentError(`${what} ${key}: limit ${limit} is out of range; a key allows 1 (a lock) to ${MAX_LIMIT} holders at once`);
    }
    const shared = options.shared ?? false;
    if (typeof shared !== "boolean") throw new InvalidArgumentError(`${what} ${key}: shared ${String(shared)}: want true or false`);
    if (shared && limit > 1) {
      throw new InvalidArgumentError(
        `${what} ${key}: { shared: true } and { limit: ${limit} } cannot go together: a semaphore's places are all alike, so none is shared; pass shared for a reader of a lock, or limit for a semaphore`,
      );
    }
    throwIfAborted(options.signal);
    const more = keys.slice(1);
    const prefix = name !== "" ? name + "#" : this.idPrefix;
    const id = prefix + this.idRand + "-" + (++this.ids).toString(36);
    const waitMs = Math.ceil(wait);
    // The wait counts from the first send, or from the start of an outage
    // that came before it.
    let start = 0;
    const waitLeft = (now: number) => {
      if (start === 0) start = now;
      return waitMs - (now - start);
    };
    const head = `A ${key} ${formatSeconds(lease)} `;
    const tail =
      more.map((k) => ` key=${k}`).join("") +
      (shared ? " mode=shared" : "") +
      (limit > 1 ? ` limit=${limit}` : "") +
      ` id=${id}` +
      (value !== "" ? ` value=${value}` : "") +
      "\n";
    // The longest send: the whole wait and the longest ref.
    const tooLong = lineTooLong(head + (tryOnly ? "-" : formatSeconds(waitMs)) + tail.slice(0, -1) + " ref=" + "z".repeat(MAX_REF_LEN) + "\n");
    if (tooLong) throw new InvalidArgumentError(`${what} ${keys.join("+")}: ${tooLong}`);
    const req: Req = {
      op: "A",
      key,
      more: more.length > 0 ? more : undefined,
      line: (now) => {
        if (tryOnly) return head + "-" + tail;
        if (waitMs === 0) return head + "0" + tail;
        const left = waitLeft(now);
        if (left <= 0) throw new WaitElapsed();
        return head + formatSeconds(Math.ceil(left)) + tail;
      },
      ref: () => (++this.refs).toString(36),
    };
    let signal = options.signal;
    let timer: AbortController | undefined;
    let t: NodeJS.Timeout | undefined;
    if (!tryOnly && waitMs > 0) {
      // The node answers T when the wait ends; the wait is also enforced
      // here, a little later, for a node that stopped answering: a grant
      // that still comes is released at once.
      timer = new AbortController();
      t = setTimeout(() => timer!.abort(), waitMs + acquireGrace + this.failureTimeout + waitMs / 10);
      signal = signal ? AbortSignal.any([signal, timer.signal]) : timer.signal;
    }
    const timeout = () =>
      new TimeoutError(`acquire ${key}: timed out waiting for the lock after ${waitMs} ms; another client holds the key: retry later, or wait longer (a wait of 0 waits forever)`);
    try {
      const { a, cn } = await this.roundTrip(req, {
        resend: true,
        signal,
        patient: !tryOnly,
        waitLeft: !tryOnly && waitMs > 0 ? () => waitLeft(Date.now()) : undefined,
        onAbandon: (cl) => this.withdraw(cl, id),
      });
      if (a.kind === "A") {
        const g = parseGrant(a.fields, keys.length);
        if (g) return { ...g, lease, limit, id };
      }
      if (a.kind === "T") {
        if (tryOnly) return null;
        throw timeout();
      }
      throw badAnswer(what, key, cn, a);
    } catch (e) {
      if (e instanceof WaitElapsed) throw timeout();
      if (timer?.signal.aborted && !options.signal?.aborted && e instanceof AbortError) throw timeout();
      throw e;
    } finally {
      clearTimeout(t);
    }
  }

  /**
   * Waits until every one of keys (1 to 16 distinct keys) can be granted
   * together, and returns the LockSet, a token per key. It waits in every
   * key's queue meanwhile; two such acquires over the same keys in any
   * order never deadlock. Rejects as acquire(); a TimeoutError leaves
   * none of the keys held.
   */
  async acquireAll(keys: string[], options: AcquireAllOptions): Promise<LockSet> {
    return (await this.setOf("acquireAll", keys, options, false)) as LockSet;
  }

  /** Takes every one of keys if all are free right now; null (nothing held) when one is busy. Never queues. */
  async tryAcquireAll(keys: string[], options: TryAcquireAllOptions): Promise<LockSet | null> {
    return this.setOf("tryAcquireAll", keys, { ...options, wait: 0 }, true);
  }

  private async setOf(what: string, keys: string[], options: AcquireAllOptions, tryOnly: boolean): Promise<LockSet | null> {
    const ks = keysOK(what, keys);
    const o = { ...options, limit: undefined };
    const g = await this.grant(ks, o, tryOnly, "", "");
    return g && new LockSet(ks.map((k, i) => new Lock(this, k, g.tokens[i], g.lease, 1, g.id, undefined, o.shared === true)));
  }

  /**
   * Acquires every one of keys together (as acquireAll) and keeps them,
   * each renewed in the background as hold() renews its key. The loss
   * of any key is the loss of the set: its signal aborts with a
   * HoldLostError naming the key, and the other keys are released.
   */
  async holdAll(keys: string[], options: HoldAllOptions): Promise<HoldSet> {
    const ks = keysOK("holdAll", keys);
    this.holdTerms(ks[0], options);
    const asked = Date.now();
    const o = { ...options, limit: undefined };
    const g = (await this.grant(ks, o, false, "", ""))!;
    const locks = ks.map((k, i) => new Lock(this, k, g.tokens[i], g.lease, 1, g.id, undefined, o.shared === true));
    const holds: Hold[] = [];
    try {
      for (const lock of locks) holds.push(await this.holdOf(lock, options, asked));
    } catch (e) {
      for (const h of holds) void h.release().catch(() => {});
      for (const lock of locks.slice(holds.length)) void this.release(lock).catch(() => {});
      throw e;
    }
    return new HoldSet(holds);
  }

  /** @internal renew carrying value=V (encoded): an election's proclaim. */
  async renewValue(key: string, token: bigint, lease: number, value: string, signal?: AbortSignal): Promise<void> {
    const line = `N ${key} ${token} ${formatSeconds(leaseOK("proclaim", key, lease))} value=${value}\n`;
    const tooLong = lineTooLong(line);
    if (tooLong) throw new InvalidArgumentError(`proclaim ${key}: ${tooLong}`);
    const { a: ans, cn } = await this.roundTrip({ op: "N", key, line: () => line }, { resend: true, signal });
    if (ans.fields.length === 1 && ans.fields[0] === "ok") return;
    if (ans.fields.length === 1 && ans.fields[0] === "notheld") throw notHeld("proclaim", key, token);
    throw badAnswer("proclaim", key, cn, ans);
  }

  /** Takes an abandoned acquire out of the node's queue (X key ID), on the connection it waits on. */
  private withdraw(cl: Call, id: string): void {
    const cn = cl.conn;
    if (!cn || cn.gen !== cl.gen) return;
    cn.send(new Call("X", cl.key, `X ${cl.key} ${id}\n`, () => {}, "", true));
  }

  /**
   * Gives the lock back, so the next waiter is granted at once. The
   * release is re-sent every releaseEvery ms, on any live connection and
   * preferring the active node, until a node answers or releaseFor ms
   * have passed. Rejects with NotHeldError when the token does not hold
   * the key.
   */
  release(lock: LockRef, options?: CallOptions): Promise<void>;
  release(key: string, token: bigint, options?: CallOptions): Promise<void>;
  release(a: string | LockRef, b?: bigint | CallOptions, c?: CallOptions): Promise<void> {
    const [key, token, o] = typeof a === "string" ? [a, b as bigint, c] : [a?.key, a?.token, b as CallOptions | undefined];
    try {
      keyOK("release", key);
      tokenOK("release", key, token);
      throwIfAborted(o?.signal);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.releaseLoop(key, token, o?.signal);
  }

  private releaseLoop(key: string, token: bigint, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const line = `R ${key} ${token}\n`;
      const start = Date.now();
      let at = new Attempt();
      let sends = 0;
      let lastErr: Error | undefined;
      let waiting = false;
      let finished = false;
      const outstanding = new Set<Call>();
      let timer: NodeJS.Timeout | undefined;
      let soonT: NodeJS.Timeout | undefined;
      const unwatch = signal ? onAbort(signal, () => finish(abortError(signal))) : undefined;
      this.busy(1);
      const finish = (err?: Error) => {
        if (finished) return;
        finished = true;
        this.busy(-1);
        clearTimeout(timer);
        clearTimeout(soonT);
        unwatch?.();
        for (const cl of outstanding) cl.abandoned = true;
        if (err) reject(err);
        else resolve();
      };
      const send = () => {
        if (finished) return;
        for (;;) {
          let ch: Conn | Promise<void>;
          try {
            ch = this.choose(at);
          } catch (e) {
            const err = asError(e);
            if (err instanceof ClosedError || !this.everConnected) {
              // No node was ever reached: nothing was lost in a drop that
              // a re-send could make up for.
              finish(err);
              return;
            }
            lastErr = err;
            return;
          }
          if (ch instanceof Promise) {
            if (!waiting) {
              waiting = true;
              void ch.then(() => {
                waiting = false;
                send();
              });
            }
            return;
          }
          const cn = ch;
          const cl: Call = new Call("R", key, line, (r) => onResult(cl, r));
          if (!cn.send(cl)) {
            at.fail(cn, cn.gen, new Error(`connection to ${cn.addr} is down`));
            continue;
          }
          outstanding.add(cl);
          sends++;
          return;
        }
      };
      const onResult = (cl: Call, r: Result) => {
        outstanding.delete(cl);
        if (finished) return;
        if ("err" in r) {
          if (r.err instanceof ClosedError) return finish(r.err);
          at.fail(cl.conn!, cl.gen, r.err);
          lastErr = r.err;
          if (outstanding.size === 0) send();
          return;
        }
        const a = r.ans;
        const cn = cl.conn!;
        if (a.kind === "R" && a.fields.length === 1 && (a.fields[0] === "ok" || a.fields[0] === "notheld")) {
          this.setActive(cn.addr);
          return finish(a.fields[0] === "ok" ? undefined : notHeld("release", key, token));
        }
        if (a.kind === "E") return finish(refusal(a));
        if (a.kind === "M") {
          const addr = a.fields.length === 1 ? a.fields[0] : "";
          if (!validAddr(addr)) return finish(new ProtocolError(`node ${cn.addr} redirected ${key} to ${JSON.stringify(addr)}, which is not HOST:PORT`));
          if (this.stale(addr)) {
            // A node that stopped answering this client: a failover the
            // redirecting node has not seen yet, or the node is back
            // (stale() dialled it). Send again shortly, not at the next
            // releaseEvery.
            soonT ??= setTimeout(() => {
              soonT = undefined;
              const next = new Attempt();
              next.lastErr = at.lastErr;
              at = next;
              send();
            }, 25);
            return;
          }
          this.setActive(addr);
          at.target = addr;
          // Follow the first redirects at once; after that the timer
          // paces us while a handoff settles.
          if (++at.moves <= 2) send();
          return;
        }
        finish(badAnswer("release", key, cn, a));
      };
      const tick = () => {
        const left = this.opts.releaseFor - (Date.now() - start);
        if (left <= 0) {
          const last = this.unavailable(lastErr);
          if (sends === 0) {
            return finish(new UnavailableError(`release ${key} token ${token}: could not be sent within ${this.opts.releaseFor} ms: ${last.message}; the lock frees itself when its lease ends`, last));
          }
          return finish(new UnavailableError(`release ${key} token ${token}: no node answered within ${this.opts.releaseFor} ms (sent ${sends} times): ${last.message}; the lock frees itself when its lease ends`, last));
        }
        timer = setTimeout(tick, Math.min(this.opts.releaseEvery, left));
        const next = new Attempt();
        next.target = at.target;
        next.lastErr = at.lastErr;
        at = next;
        send();
      };
      send();
      timer = setTimeout(tick, this.opts.releaseEvery);
    });
  }

  /** Restarts the lease of a held lock from now. Rejects with NotHeldError when the token no longer holds the key. */
  renew(lock: LockRef, lease?: number, options?: CallOptions): Promise<void>;
  renew(key: string, token: bigint, lease: number, options?: CallOptions): Promise<void>;
  async renew(a: string | LockRef, b?: bigint | number, c?: number | CallOptions, d?: CallOptions): Promise<void> {
    let key: string, token: bigint, lease: number | undefined, o: CallOptions | undefined;
    if (typeof a === "string") [key, token, lease, o] = [a, b as bigint, c as number, d];
    else [key, token, lease, o] = [a?.key, a?.token, (b as number | undefined) ?? a?.lease, c as CallOptions | undefined];
    keyOK("renew", key);
    tokenOK("renew", key, token);
    const ms = leaseOK("renew", key, lease);
    const line = `N ${key} ${token} ${formatSeconds(ms)}\n`;
    const { a: ans, cn } = await this.roundTrip({ op: "N", key, line: () => line }, { resend: true, signal: o?.signal });
    if (ans.fields.length === 1 && ans.fields[0] === "ok") return;
    if (ans.fields.length === 1 && ans.fields[0] === "notheld") throw notHeld("renew", key, token);
    throw badAnswer("renew", key, cn, ans);
  }

  /** The holders of key and its waiters, in queue order. */
  async queue(key: string, options?: CallOptions): Promise<QueueState> {
    keyOK("queue", key);
    const { a, cn } = await this.roundTrip({ op: "Q", key, line: () => `Q ${key}\n` }, { resend: true, signal: options?.signal });
    const q = parseQueue(key, a.fields);
    if (!q) throw badAnswer("queue", key, cn, a);
    return q;
  }

  /**
   * The keys held or waited on that pattern selects: "*" all, "pre*"
   * those starting with "pre", anything else that key alone. Sorted, at
   * most 1000; total counts them all.
   */
  async keys(pattern = "*", options?: CallOptions): Promise<{ keys: string[]; total: number }> {
    keyOK("keys", pattern);
    const { a, cn } = await this.roundTrip({ op: "K", key: pattern, line: () => `K ${pattern}\n` }, { resend: true, signal: options?.signal });
    const total = Number(a.fields[0]);
    if (a.fields.length < 1 || !Number.isInteger(total) || total < a.fields.length - 1) throw badAnswer("keys", pattern, cn, a);
    return { keys: a.fields.slice(1), total };
  }

  /**
   * How a node sees itself and the cluster (its S answer), typed: the
   * active node, or any node while none is known.
   */
  async status(options?: CallOptions): Promise<Status> {
    const { a, cn } = await this.roundTrip({ op: "S", key: "-", line: () => "S -\n" }, { resend: true, signal: options?.signal });
    if (a.kind !== "S") throw badAnswer("status", "", cn, a);
    const st = parseStatus(a.fields);
    if (typeof st === "string") throw new ProtocolError(`status: ${cn.addr} answered ${st}; check that client and server versions match`);
    if (st.self === "") st.self = cn.addr;
    return st;
  }

  /**
   * Watches key: the iterator yields its holders and waiters now, and
   * again after every change (grant, release, expiry, a waiter joining or
   * leaving). It follows the active node across failovers, yielding the
   * state it finds there first. Close it with close() or signal.
   */
  watch(key: string, options?: CallOptions): Watch {
    keyOK("watch", key);
    if (this.isClosed) throw new ClosedError();
    let sub = this.subs.get(key);
    if (!sub) {
      sub = new WatchSub(key);
      this.subs.set(key, sub);
    }
    const w = new Watch(key, (x) => this.unwatch(sub!, x));
    this.busy(1);
    sub.watchers.add(w);
    if (options?.signal) {
      if (options.signal.aborted) w.close();
      else w.unwatchSignal = onAbort(options.signal, () => w.close());
    }
    if (sub.conn && sub.last) w.push(sub.last);
    else void this.subscribe(sub);
    return w;
  }

  private unwatch(sub: WatchSub, w: Watch): void {
    this.busy(-1);
    sub.watchers.delete(w);
    if (sub.watchers.size > 0 || this.subs.get(sub.key) !== sub) return;
    this.subs.delete(sub.key);
    const cn = sub.conn;
    sub.conn = undefined;
    if (cn && cn.gen === sub.gen) cn.send(new Call("U", sub.key, `U ${sub.key}\n`, () => {}, "", true));
  }

  private deliverWatch(sub: WatchSub, a: Answer): void {
    const q = parseQueue(sub.key, a.fields);
    if (!q) {
      this.log(`watch ${sub.key}: unreadable L answer ${a.fields.join(" ").slice(0, 80)}`);
      return;
    }
    sub.last = q;
    sub.live = true;
    sub.stale = false;
    for (const w of sub.watchers) w.push(q);
  }

  /**
   * Tells sub's watchers, once, that the watch has had no node serve it
   * for a failure timeout: the last state again, marked stale.
   */
  private checkStale(sub: WatchSub, now: number): void {
    if (sub.live || sub.stale || sub.lostAt === 0 || !sub.last || now - sub.lostAt < this.failureTimeout) return;
    sub.stale = true;
    const q = { ...sub.last, stale: true };
    for (const w of sub.watchers) w.push(q);
  }

  /** Subscribes sub where the active is, retrying while no node can be reached. */
  private async subscribe(sub: WatchSub): Promise<void> {
    if (sub.subscribing) return;
    sub.subscribing = true;
    try {
      while (!this.isClosed && this.subs.get(sub.key) === sub && !sub.conn) {
        // Taken now: an M that moves the watch while this L is on its way
        // names the next target.
        const target = sub.target;
        sub.target = "";
        try {
          const { a, cn } = await this.roundTrip(
            { op: "L", key: sub.key, line: () => `L ${sub.key}\n` },
            {
              resend: true,
              target,
              onAnswer: (ans, c) => {
                if (ans.kind === "L" && this.subs.get(sub.key) === sub) {
                  sub.conn = c;
                  sub.gen = c.gen;
                  this.deliverWatch(sub, ans);
                }
              },
            },
          );
          if (a.kind !== "L") throw badAnswer("watch", sub.key, cn, a);
          if (this.subs.get(sub.key) !== sub && (sub.conn as Conn | undefined) === cn) {
            // Every watcher left while the L was on its way.
            cn.send(new Call("U", sub.key, `U ${sub.key}\n`, () => {}, "", true));
            sub.conn = undefined;
          }
        } catch (e) {
          const err = asError(e);
          if (this.isClosed || err instanceof ClosedError) break;
          if (err instanceof RefusedError || err instanceof AuthError || err instanceof ProtocolError) {
            if (this.subs.get(sub.key) === sub) this.subs.delete(sub.key);
            for (const w of sub.watchers) w.end(err);
            return;
          }
          this.log(`watch ${sub.key}: ${err.message}; trying again in ${this.redial} ms`);
          await new Promise((r) => setTimeout(r, this.redial).unref());
        }
      }
    } finally {
      sub.subscribing = false;
    }
    if (this.isClosed) for (const w of sub.watchers) w.end(new ClosedError());
  }

  /** A call of key followed an M to addr: the watch of key moves there too. */
  private followWatch(key: string, addr: string): void {
    const sub = this.subs.get(key);
    if (!sub || !sub.conn || sub.conn.addr === addr) return;
    const cn = sub.conn;
    sub.lose();
    if (cn.gen === sub.gen) cn.send(new Call("U", key, `U ${key}\n`, () => {}, "", true));
    sub.target = addr;
    void this.subscribe(sub);
  }

  /**
   * Acquires key and keeps it: the lease is renewed in the background
   * (every third of it) until release(). Its signal aborts, with a
   * HoldLostError, when the lock is lost or no longer provably held.
   * `{ shared: true }` holds it as a reader.
   */
  async hold(key: string, options: HoldOptions): Promise<Hold> {
    return this.holdAs(key, options, "");
  }

  /** @internal */
  async holdAs(key: string, options: HoldOptions, name: string, value = ""): Promise<Hold> {
    this.holdTerms(key, options);
    const asked = Date.now(); // the lease cannot have started before
    const lock = (await this.acquireAs(key, options, false, name, value)) as Lock;
    return this.holdOf(lock, options, asked);
  }

  private holdTerms(key: string, options: HoldOptions): void {
    const least = this.minHoldLease;
    if (typeof options?.lease === "number" && options.lease < least) {
      throw new InvalidArgumentError(
        `hold ${key}: lease ${options.lease} ms is too short to be renewed across a failover: the shortest is ${least} ms (twice the failure timeout, ${this.failureTimeout} ms); leases are in milliseconds: give at least ${least}, or, if the cluster runs a shorter --failure-timeout, give the client the same failureTimeout`,
      );
    }
    if (options?.max !== undefined && !(options.max > 0)) throw new InvalidArgumentError(`hold ${key}: max ${options.max} must be more than 0 ms`);
    if (options?.renewEvery !== undefined && !(options.renewEvery > 0)) {
      throw new InvalidArgumentError(`hold ${key}: renewEvery ${options.renewEvery} must be more than 0 ms`);
    }
  }

  /** The hold of a lock granted after an acquire sent at asked. */
  private async holdOf(lock: Lock, options: HoldOptions, asked: number): Promise<Hold> {
    let start = asked;
    const got = Date.now();
    if (got - asked > lock.lease / 3) {
      // A grant after a long wait may be older than the answer that
      // brought it: confirm it with a renewal, so that a fresh hold has
      // most of a lease ahead of it, proven.
      start = await this.confirm(lock, got, options.signal);
    }
    const h = new Hold(this, lock, options, start, () => this.holds.delete(h));
    this.holds.add(h);
    return h;
  }

  /** Renews a lock whose grant arrived at got; returns when the acknowledged renewal was sent. */
  private async confirm(lock: Lock, got: number, signal?: AbortSignal): Promise<number> {
    const end = got + lock.lease;
    const retry = Math.min(Math.max(Math.floor(lock.lease / 30), 10), 1000);
    const giveBack = () => void this.release(lock.key, lock.token).catch(() => {});
    for (;;) {
      const sent = Date.now();
      if (sent >= end) {
        giveBack();
        throw new HoldLostError("expired", `hold ${lock.key} token ${lock.token}: the grant came after a long wait and no renewal confirming it was acknowledged within its lease`);
      }
      const limit = AbortSignal.timeout(end - sent);
      try {
        await this.renew(lock, lock.lease, { signal: signal ? AbortSignal.any([signal, limit]) : limit });
        return sent;
      } catch (e) {
        if (signal?.aborted) {
          giveBack();
          throw e;
        }
        if (e instanceof NotHeldError || e instanceof RefusedError) {
          throw new HoldLostError("notheld", `hold ${lock.key} token ${lock.token}: the lock was lost before the hold began: ${(e as Error).message}`, e);
        }
        if (e instanceof ClosedError) throw e;
      }
      await sleep(retry);
    }
  }

  /** An election on key: campaign to lead, read or observe the leader. */
  election(key: string, options?: { lease?: number }): Election {
    keyOK("election", key);
    return new Election(this, key, options?.lease);
  }

  /**
   * Closes every connection. Waiting calls reject with ClosedError,
   * watches end, holds stop renewing (their signal aborts with reason
   * "closed"); locks still held stay held until their lease ends.
   */
  async close(): Promise<void> {
    if (this.isClosed) return;
    this.isClosed = true;
    clearInterval(this.liveness);
    for (const h of [...this.holds]) h.lose("closed", "the client was closed; the lock stays held on the node until its lease ends");
    for (const cn of this.conns) cn.stop();
    this.notify();
    for (const sub of this.subs.values()) for (const w of sub.watchers) w.end(new ClosedError());
    this.subs.clear();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/**
 * A watch of one key: an async iterator of its states. Iterate it with
 * for await; break, close() or the signal ends it.
 *
 * When the watch loses the cluster (no node has served it for the
 * client's failureTimeout: the nodes are down, frozen or out of reach),
 * it yields the last state again with `stale: true`: it may be out of
 * date. It keeps trying, and once a node serves it again it yields the
 * state there, `stale: false`: it is current again. `stale` on the watch
 * says the same of the state last yielded.
 */
export class Watch implements AsyncIterable<QueueState>, Disposable, AsyncDisposable {
  /** @internal Stops listening to the signal watch() was given. */
  unwatchSignal: (() => void) | undefined;
  private states: QueueState[] = [];
  private wake: (() => void) | undefined;
  private ended = false;
  private error: Error | undefined;
  private lastStale = false;
  /** @internal */
  constructor(
    readonly key: string,
    private readonly onClose: (w: Watch) => void,
  ) {}

  /** @internal */
  push(q: QueueState): void {
    if (this.ended) return;
    // A reader that falls far behind gets the latest states.
    if (this.states.length >= 1000) this.states.shift();
    this.states.push(q);
    this.wake?.();
  }

  /** @internal */
  end(err?: Error): void {
    if (this.ended) return;
    this.ended = true;
    if (err && !(err instanceof ClosedError)) this.error = err;
    this.unwatchSignal?.();
    this.onClose(this);
    this.wake?.();
  }

  /** Ends the watch. */
  close(): void {
    this.end();
  }

  /** Ends the watch, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }

  /** Ends the watch, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.close();
  }

  /** Whether the state last yielded said the watch had lost the cluster. */
  get stale(): boolean {
    return this.lastStale;
  }

  /** The next state; done once the watch ended. Throws what ended it, if it did not end by close(). */
  async next(): Promise<IteratorResult<QueueState, undefined>> {
    for (;;) {
      const q = this.states.shift();
      if (q) {
        this.lastStale = q.stale;
        return { done: false, value: q };
      }
      if (this.ended) {
        if (this.error) {
          const e = this.error;
          this.error = undefined;
          throw e;
        }
        return { done: true, value: undefined };
      }
      await new Promise<void>((r) => (this.wake = r));
      this.wake = undefined;
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<QueueState, undefined> {
    return {
      next: () => this.next(),
      return: async () => {
        this.close();
        return { done: true, value: undefined };
      },
    };
  }
}

// ---- helpers

function checkAddrs(addrs: string[]): string[] {
  if (!Array.isArray(addrs) || addrs.length === 0) {
    throw new InvalidArgumentError("no address given; pass at least one HOST:PORT of a lockd node (or set LOCKD_ADDR)");
  }
  const out: string[] = [];
  addrs.forEach((raw, i) => {
    const a = String(raw).trim();
    if (a === "") throw new InvalidArgumentError(`address ${i + 1} of ${addrs.length} is blank; pass HOST:PORT for every node (or LOCKD_ADDR)`);
    try {
      splitHostPort(a);
    } catch (e) {
      throw new InvalidArgumentError(asError(e).message);
    }
    if (!out.includes(a)) out.push(a);
  });
  return out;
}

function validAddr(a: string): boolean {
  try {
    splitHostPort(a);
    return true;
  } catch {
    return false;
  }
}

function positive(v: number | undefined, what: string): number | undefined {
  if (v === undefined || v === 0) return undefined;
  if (typeof v !== "number" || !(v > 0)) throw new InvalidArgumentError(`option ${what} ${v}: want a number more than 0 (milliseconds), or leave it out`);
  return v;
}

function readSecret(secret: string | Buffer | undefined, file: string | undefined): Buffer | undefined {
  let b: Buffer;
  let where = "the secret";
  if (secret !== undefined) b = Buffer.from(secret);
  else if (file !== undefined) {
    where = `secret file ${file}`;
    try {
      b = readFileSync(file);
    } catch (e) {
      throw new InvalidArgumentError(`${where}: ${asError(e).message}`);
    }
  } else return undefined;
  const s = b.toString("latin1").trim();
  if (s.length < 16) throw new InvalidArgumentError(`${where} is ${s.length} bytes, shorter than 16; make a longer one with: head -c 32 /dev/urandom | base64 > FILE`);
  if (s.length > 1024) throw new InvalidArgumentError(`${where} is ${s.length} bytes, longer than 1024`);
  if (!/^[\x21-\x7e]+$/.test(s)) throw new InvalidArgumentError(`${where} holds a space, a control character or a non-ASCII byte; use printable ASCII, for example base64`);
  return Buffer.from(s, "latin1");
}

function tlsOptions(t: boolean | TLSOptions | undefined): tls.ConnectionOptions | undefined {
  const env = process.env;
  if (t === undefined) {
    const on = env.LOCKD_TLS !== undefined && !["", "0", "false"].includes(env.LOCKD_TLS.toLowerCase());
    if (!on && !env.LOCKD_TLS_CA && !env.LOCKD_TLS_CERT) return undefined;
    t = {
      caFile: env.LOCKD_TLS_CA || undefined,
      certFile: env.LOCKD_TLS_CERT || undefined,
      keyFile: env.LOCKD_TLS_KEY || undefined,
      serverName: env.LOCKD_TLS_SERVER_NAME || undefined,
    };
  }
  if (t === false) return undefined;
  if (t === true) return {};
  const read = (file: string | undefined, what: string): Buffer | undefined => {
    if (file === undefined) return undefined;
    try {
      return readFileSync(file);
    } catch (e) {
      throw new InvalidArgumentError(`TLS ${what} ${file}: ${asError(e).message}`);
    }
  };
  const o: tls.ConnectionOptions = {};
  const ca = t.ca ?? read(t.caFile, "CA");
  const cert = t.cert ?? read(t.certFile, "certificate");
  const key = t.key ?? read(t.keyFile, "key");
  if ((cert === undefined) !== (key === undefined)) throw new InvalidArgumentError("TLS certificate and key go together: give both, or neither");
  if (ca !== undefined) o.ca = ca;
  if (cert !== undefined) o.cert = cert;
  if (key !== undefined) o.key = key;
  if (t.serverName) o.servername = t.serverName;
  return o;
}

/** Makes name fit an acquire id: no byte that cannot stand in a word, at most MAX_NAME_LEN bytes. */
export function cleanName(name: string): string {
  let s = name.replace(/[\x00-\x20\x7f]/g, "_");
  while (Buffer.byteLength(s, "utf8") > MAX_NAME_LEN) s = s.slice(0, -1);
  // Do not leave half of a surrogate pair.
  if (/[\ud800-\udbff]$/.test(s)) s = s.slice(0, -1);
  return s;
}

function keyOK(op: string, key: string): void {
  const msg = checkKey(key);
  if (msg !== "") throw new InvalidArgumentError(`${op} ${JSON.stringify(key)}: ${msg}; a key is 1 to 255 bytes without space, tab or control character`);
}

function keysOK(op: string, keys: string[]): string[] {
  if (!Array.isArray(keys)) throw new InvalidArgumentError(`${op}: keys must be an array of keys, not ${typeof keys}`);
  if (keys.length === 0 || keys.length > MAX_SET_KEYS) throw new InvalidArgumentError(`${op}: ${keys.length} keys given; a set is 1 to ${MAX_SET_KEYS} keys`);
  const seen = new Set<string>();
  for (const k of keys) {
    keyOK(op, k);
    if (seen.has(k)) throw new InvalidArgumentError(`${op}: key ${JSON.stringify(k)} is given twice; name each key once`);
    seen.add(k);
  }
  return [...keys];
}

function leaseOK(op: string, key: string, lease: number | undefined): number {
  if (typeof lease !== "number" || !(lease >= 1) || lease > MAX_MS) {
    throw new InvalidArgumentError(`${op} ${key}: lease ${lease} is out of range; give at least 1 ms and at most ${MAX_MS} ms`);
  }
  return Math.floor(lease);
}

function tokenOK(op: string, key: string, token: bigint): void {
  if (typeof token !== "bigint" || token < 0n || token > MAX_TOKEN) {
    throw new InvalidArgumentError(`${op} ${key}: token ${String(token)} is not an unsigned 64-bit bigint; pass lock.token as it came (BigInt("...") from a string)`);
  }
}

function notHeld(op: string, key: string, token: bigint): NotHeldError {
  return new NotHeldError(`${op} ${key} token ${token}: the token does not hold the key: it was released already, its lease ran out, or it never held it; acquire the key again if you still need it`);
}

/** The error of an E answer. */
function refusal(a: Answer): LockdError {
  const op = a.fields[0]?.length === 2 && a.fields[0][1] === ":" ? a.fields[0][0] : "?";
  const words = errorText(a);
  if (op === "A" && words.startsWith("limit mismatch:")) return new LimitMismatchError(a.key, words);
  if (words.startsWith("authenticate first") || words.startsWith("this needs the admin role")) {
    return new AuthError(`lockd refused ${opName(op)} ${a.key}: ${words}`);
  }
  return new RefusedError(op, a.key, words);
}

function badAnswer(op: string, key: string, cn: Conn | undefined, a: Answer): ProtocolError {
  const line = [a.kind, a.key, ...a.fields].join(" ");
  return new ProtocolError(`${op}${key ? " " + key : ""}: ${cn?.addr ?? "a node"} answered ${JSON.stringify(line)}, which this client does not understand; check that client and server versions match`);
}

export function abortError(signal: AbortSignal): AbortError {
  const r: unknown = signal.reason;
  return new AbortError(`the call was aborted${r instanceof Error ? `: ${r.message}` : r !== undefined ? `: ${String(r)}` : ""}`, r);
}

function throwIfAborted(signal?: AbortSignal): void {
  if (signal?.aborted) throw abortError(signal);
}

/** p, or an AbortError as soon as signal aborts. */
function raceAbort<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(abortError(signal));
  return new Promise<T>((resolve, reject) => {
    const unwatch = onAbort(signal, () => reject(abortError(signal)));
    p.then(
      (v) => {
        unwatch();
        resolve(v);
      },
      (e) => {
        unwatch();
        reject(e);
      },
    );
  });
}

/**
 * Whether err is a dial refused: nothing listens at the address (at any
 * of those its name resolved to, for an AggregateError).
 */
function refused(err: Error | undefined): boolean {
  if (err instanceof AggregateError && err.errors.length > 0) return err.errors.every((e) => refused(asError(e)));
  return (err as NodeJS.ErrnoException | undefined)?.code === "ECONNREFUSED";
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
