// A lock that keeps itself alive and says when it is lost, and leader
// election built on it.

import { onAbort } from "./abort.js";
import { type AcquireOptions, type CallOptions, type Client, Lock, type Watch } from "./client.js";
import { ClosedError, HoldLostError, InvalidArgumentError, type LostReason, NotHeldError, RefusedError } from "./errors.js";
import { type Holder, checkID, encodeValue, idName } from "./wire.js";

export interface HoldOptions extends AcquireOptions {
  /** Renew this often, in ms; default: a third of the lease. */
  renewEvery?: number;
  /**
   * Keep the lock at most this long, in ms: then it is released and
   * the signal aborts with reason "max". Default: until release().
   */
  max?: number;
}

/**
 * A held lock that renews itself in the background. `signal` aborts,
 * with a HoldLostError whose `reason` says why, as soon as the lock is
 * lost (the node said notheld), no longer provably held (no renewal was
 * acknowledged within the lease: counted from the moment the last
 * acknowledged renewal was sent, which the node's lease cannot precede),
 * released, past `max`, or its client closed. Pass `signal` to the work
 * the lock protects, and the fencing token to the resource.
 *
 * `await using lock = await client.hold(...)` releases it at the end of
 * the block (Symbol.asyncDispose).
 */
export class Hold implements AsyncDisposable {
  readonly key: string;
  /** The fencing token, a u64 bigint. */
  readonly token: bigint;
  readonly lease: number;
  readonly limit: number;
  readonly id: string;
  /** The semaphore place (1 to limit) the node granted, undefined when it named none. */
  readonly place: number | undefined;
  /** It is held as a reader ({ shared: true }). */
  readonly shared: boolean;
  /** Aborts when the lock is lost; its reason is a HoldLostError. */
  readonly signal: AbortSignal;
  private readonly ctl = new AbortController();
  private readonly every: number;
  private base: number;
  private expiryT: NodeJS.Timeout | undefined;
  private renewT: NodeJS.Timeout | undefined;
  private maxT: NodeJS.Timeout | undefined;
  private releasing: Promise<void> | undefined;

  /** @internal */
  constructor(
    private readonly client: Client,
    lock: Lock,
    options: HoldOptions,
    start: number,
    private readonly onEnd: () => void,
  ) {
    this.key = lock.key;
    this.token = lock.token;
    this.lease = lock.lease;
    this.limit = lock.limit;
    this.id = lock.id;
    this.place = lock.place;
    this.shared = lock.shared;
    this.signal = this.ctl.signal;
    this.every = options.renewEvery ?? Math.max(Math.floor(this.lease / 3), 1);
    // The lease began at the grant, which came after the acquire (or the
    // renewal that confirmed it) was sent: that moment is a proven lower
    // bound of the lease's start.
    this.base = start;
    this.armExpiry();
    this.renewT = setTimeout(() => void this.renewOnce(), Math.max(start + this.every - Date.now(), 0));
    if (options.max !== undefined) {
      this.maxT = setTimeout(() => {
        this.lose("max", `the hold of ${this.key} reached its max of ${options.max} ms and was released`);
        void this.client.release(this.key, this.token).catch(() => {});
      }, options.max);
    }
    const user = options.signal;
    if (user) {
      const unwatch = onAbort(user, () => void this.release().catch(() => {}));
      this.signal.addEventListener("abort", unwatch, { once: true });
    }
  }

  /** The lock as acquire() returns it. */
  get lock(): Lock {
    return new Lock(this.client, this.key, this.token, this.lease, this.limit, this.id, this.place, this.shared);
  }

  /** Why the lock is no longer held, undefined while it is. */
  get lost(): HoldLostError | undefined {
    return this.signal.aborted ? (this.signal.reason as HoldLostError) : undefined;
  }

  /** Throws the HoldLostError when the lock is lost: call it before each step of the work. */
  throwIfLost(): void {
    if (this.signal.aborted) throw this.signal.reason;
  }

  private armExpiry(): void {
    clearTimeout(this.expiryT);
    this.expiryT = setTimeout(
      () => {
        this.lose("expired", `the lease of ${this.key} may have run out: no renewal was acknowledged within ${this.lease} ms`);
        // The node may still hold it and be out of reach: free it as soon as one answers.
        void this.client.release(this.key, this.token).catch(() => {});
      },
      Math.max(this.base + this.lease - Date.now(), 0),
    );
  }

  private async renewOnce(): Promise<void> {
    if (this.signal.aborted) return;
    const sent = Date.now();
    let retry = Math.min(Math.max(Math.floor(this.every / 10), 10), 1000);
    try {
      await this.client.renew(this.key, this.token, this.lease, { signal: this.signal });
      if (this.signal.aborted) return;
      this.base = Math.max(this.base, sent);
      this.armExpiry();
      retry = Math.max(sent + this.every - Date.now(), 0);
    } catch (e) {
      if (this.signal.aborted) return;
      // A refusal will not change on a retry: the lock is as good as lost.
      if (e instanceof NotHeldError || e instanceof RefusedError) return this.lose("notheld", `the lock on ${this.key} is lost: ${e.message}`, e);
      if (e instanceof ClosedError) return this.lose("closed", "the client was closed", e);
      // Unreachable for now: keep trying until the lease is no longer provable.
    }
    this.renewT = setTimeout(() => void this.renewOnce(), retry);
  }

  /** @internal The lease is proven to last until at least start + lease (a proclaim renewed it). */
  renewed(start: number): void {
    if (this.signal.aborted || start <= this.base) return;
    this.base = start;
    this.armExpiry();
  }

  /** @internal Ends the hold: stops renewing and aborts the signal. */
  lose(reason: LostReason, message: string, cause?: unknown): void {
    if (this.signal.aborted) return;
    clearTimeout(this.expiryT);
    clearTimeout(this.renewT);
    clearTimeout(this.maxT);
    this.onEnd();
    this.ctl.abort(new HoldLostError(reason, message, cause));
  }

  /**
   * Stops renewing, aborts the signal (reason "released") and gives the
   * lock back. A lock lost already is released all the same (harmless),
   * without error.
   */
  release(): Promise<void> {
    if (!this.releasing) {
      const wasHeld = !this.signal.aborted;
      this.lose("released", `the lock on ${this.key} was released`);
      this.releasing = this.client.release(this.key, this.token).catch((e) => {
        if (e instanceof NotHeldError && !wasHeld) return;
        throw e;
      });
    }
    return this.releasing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.release();
    } catch (e) {
      if (!(e instanceof NotHeldError) && !(e instanceof ClosedError)) throw e;
    }
  }
}

/** Options of holdAll: those of a hold, but a set has no limit. */
export type HoldAllOptions = Omit<HoldOptions, "limit">;

/**
 * Several keys held together, each renewed in the background as a Hold
 * is (`holds`, one per key in order; `tokens` maps each key to its
 * token). The set is lost when any of its keys is: `signal` aborts with
 * a HoldLostError whose message names the key (`lostKey` says it too),
 * and the other keys are released. `await using` releases every key.
 */
export class HoldSet implements AsyncDisposable {
  readonly keys: string[];
  readonly tokens: Map<string, bigint>;
  /** Aborts when any key is lost; its reason is a HoldLostError. */
  readonly signal: AbortSignal;
  private readonly ctl = new AbortController();
  private lostAt: string | undefined;
  private releasing: Promise<void> | undefined;

  /** @internal */
  constructor(readonly holds: Hold[]) {
    this.keys = holds.map((h) => h.key);
    this.tokens = new Map(holds.map((h) => [h.key, h.token]));
    this.signal = this.ctl.signal;
    for (const h of holds) {
      if (h.signal.aborted) this.memberLost(h);
      else h.signal.addEventListener("abort", () => this.memberLost(h), { once: true });
    }
  }

  private memberLost(h: Hold): void {
    if (this.signal.aborted) return;
    const r = h.signal.reason as HoldLostError;
    this.lostAt = h.key;
    this.ctl.abort(new HoldLostError(r.reason, `the hold of ${this.keys.join(" ")}: key ${h.key} is no longer held, so neither is the set: ${r.message}`, r));
    for (const o of this.holds) if (o !== h) void o.release().catch(() => {});
  }

  /** The key whose loss lost the set, undefined while it is held (or when it was released). */
  get lostKey(): string | undefined {
    return this.lostAt;
  }

  /** Why the set is no longer held, undefined while it is. */
  get lost(): HoldLostError | undefined {
    return this.signal.aborted ? (this.signal.reason as HoldLostError) : undefined;
  }

  /** Throws the HoldLostError when the set is lost. */
  throwIfLost(): void {
    if (this.signal.aborted) throw this.signal.reason;
  }

  /** Stops renewing, aborts the signal (reason "released") and gives every key back. */
  release(): Promise<void> {
    if (!this.releasing) {
      const wasHeld = !this.signal.aborted;
      if (wasHeld) this.ctl.abort(new HoldLostError("released", `the hold of ${this.keys.join(" ")} was released`));
      this.releasing = Promise.allSettled(this.holds.map((h) => h.release())).then((rs) => {
        for (const r of rs) if (r.status === "rejected" && wasHeld) throw r.reason;
      });
    }
    return this.releasing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.release();
    } catch (e) {
      if (!(e instanceof NotHeldError) && !(e instanceof ClosedError)) throw e;
    }
  }
}

/** Who leads an election: the value it campaigned with, and its fencing token. */
export interface Leader {
  value: string;
  token: bigint;
  /**
   * From an observation: it had lost the cluster, and this, the last
   * leader known, may have changed since. false from leader().
   */
  stale: boolean;
}

/**
 * An election on one key: the leader is the holder of the key's lock,
 * and its value (1 to 1024 bytes of UTF-8 text, spaces included)
 * travels with its hold, so any client that reads the key's queue sees
 * who leads; proclaim() changes it without giving the key up.
 */
export class Election {
  private held: Hold | undefined;
  /** @internal */
  constructor(
    private readonly client: Client,
    readonly key: string,
    private readonly lease = 10_000,
  ) {}

  private encode(op: string, value: string): string {
    try {
      return encodeValue(value);
    } catch (m) {
      throw new InvalidArgumentError(`${op} ${this.key}: ${String(m)}`);
    }
  }

  /**
   * Waits to lead (FIFO among the candidates), through an outage too,
   * and returns the leader's hold: it renews itself, and its signal
   * aborts when leadership is lost. Its lease is at least
   * client.minHoldLease, as a hold's. value says who leads: 1 to 1024
   * bytes of UTF-8 text.
   */
  async campaign(value: string, options: { lease?: number; signal?: AbortSignal } = {}): Promise<Hold> {
    const enc = this.encode("campaign", value);
    const o = { lease: options.lease ?? this.lease, wait: 0, signal: options.signal };
    let h: Hold | undefined;
    if (!this.client.valuesRefused) {
      try {
        h = await this.client.holdAs(this.key, o, "", enc);
      } catch (e) {
        // A node older than values refuses value= as any word it does not
        // know; a value that fits an id goes there instead, where such a
        // node shows it.
        if (!(e instanceof RefusedError && e.words.includes('"value=') && fitsID(value))) throw e;
        this.client.valuesRefused = true;
      }
    }
    h ??= await this.client.holdAs(this.key, o, value);
    this.held = h;
    return h;
  }

  /**
   * Changes the leader's value without giving leadership up: observers
   * see the new one at once. It renews the lease as it goes. Rejects with
   * NotHeldError when this election does not lead (it never campaigned,
   * or resigned), the HoldLostError when leadership was lost, and
   * RefusedError when the node does not take values (an older lockd).
   */
  async proclaim(value: string, options?: CallOptions): Promise<void> {
    const enc = this.encode("proclaim", value);
    const h = this.held;
    if (!h) throw new NotHeldError(`proclaim ${this.key}: this election does not lead; campaign first`);
    h.throwIfLost();
    const sent = Date.now();
    try {
      await this.client.renewValue(this.key, h.token, h.lease, enc, options?.signal);
    } catch (e) {
      if (e instanceof NotHeldError) {
        h.lose("notheld", `the lock on ${this.key} is lost: ${e.message}`, e);
        h.throwIfLost();
      }
      throw e;
    }
    h.renewed(sent);
  }

  /** The leader now, null when nobody leads. */
  async leader(options?: CallOptions): Promise<Leader | null> {
    const q = await this.client.queue(this.key, options);
    return leaderOf(q.holders);
  }

  /**
   * The leader now, then every time it changes (null while nobody
   * leads), following the active node across failovers. When it loses the
   * cluster it yields the last leader known again, stale (see
   * Observation.stale); once it reaches the cluster again, who leads
   * there (the same leader too).
   */
  observe(options?: CallOptions): Observation {
    return new Observation(this.client.watch(this.key, options));
  }

  /** Gives up leadership (releases the hold campaign returned), or a candidacy's place. */
  async resign(): Promise<void> {
    const h = this.held;
    this.held = undefined;
    if (h) await h.release();
  }
}

function leaderOf(holders: Holder[], stale = false): Leader | null {
  const h = holders[0];
  return h ? { value: h.value ?? idName(h.id), token: h.token, stale } : null;
}

/** Whether value fits the name part of an acquire id, where a node older than values shows it. */
function fitsID(value: string): boolean {
  return checkID(value) === "" && Buffer.byteLength(value) <= 33 && !value.includes("#");
}

/**
 * An election's leaders as they change; close() or break ends it. When
 * the observation loses the cluster it yields the last leader known
 * again (null when nobody led) with `stale` true, here and on the
 * Leader; the next value, once it reaches the cluster again, has it
 * false.
 */
export class Observation implements AsyncIterable<Leader | null>, Disposable, AsyncDisposable {
  private last: string | null | undefined;
  private lastStale = false;
  /** @internal */
  constructor(private readonly w: Watch) {}

  /** Whether the value last yielded said the observation had lost the cluster. */
  get stale(): boolean {
    return this.lastStale;
  }

  async next(): Promise<IteratorResult<Leader | null, undefined>> {
    for (;;) {
      const r = await this.w.next();
      if (r.done) return r;
      const stale = r.value.stale;
      const l = leaderOf(r.value.holders, stale);
      const t = l ? `${l.token} ${l.value}` : null;
      if (!stale && !this.lastStale && this.last !== undefined && t === this.last) continue;
      if (!stale) this.last = t;
      this.lastStale = stale;
      return { done: false, value: l };
    }
  }

  close(): void {
    this.w.close();
  }

  /** Ends the observation, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }

  /** Ends the observation, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.close();
  }

  [Symbol.asyncIterator](): AsyncIterator<Leader | null, undefined> {
    return {
      next: () => this.next(),
      return: async () => {
        this.close();
        return { done: true, value: undefined };
      },
    };
  }
}
