// A lock that keeps itself alive and says when it is lost, and leader
// election built on it.

import { onAbort } from "./abort.js";
import { type AcquireOptions, type CallOptions, type Client, Lock, type Watch } from "./client.js";
import { ClosedError, HoldLostError, InvalidArgumentError, type LostReason, NotHeldError, RefusedError } from "./errors.js";
import { checkID, idName } from "./wire.js";

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
    return new Lock(this.client, this.key, this.token, this.lease, this.limit, this.id);
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
 * its value the name part of its acquire's id (VALUE#SUFFIX, as queue()
 * and lockctl queues show it), so any client that reads the key's queue
 * sees who leads.
 */
export class Election {
  private held: Hold | undefined;
  /** @internal */
  constructor(
    private readonly client: Client,
    readonly key: string,
    private readonly lease = 10_000,
  ) {}

  /**
   * Waits to lead (FIFO among the candidates), through an outage too,
   * and returns the leader's hold: it renews itself, and its signal
   * aborts when leadership is lost. Its lease is at least
   * client.minHoldLease, as a hold's. value says who leads: 1 to 33 bytes, no space, control
   * character or '#'.
   */
  async campaign(value: string, options: { lease?: number; signal?: AbortSignal } = {}): Promise<Hold> {
    if (typeof value !== "string" || checkID(value) !== "" || Buffer.byteLength(value) > 33 || value.includes("#")) {
      throw new InvalidArgumentError(`campaign ${this.key}: value ${JSON.stringify(value)}: want 1 to 33 bytes without space, control character or '#'`);
    }
    const h = await this.client.holdAs(this.key, { lease: options.lease ?? this.lease, wait: 0, signal: options.signal }, value);
    this.held = h;
    return h;
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

function leaderOf(holders: { token: bigint; id: string }[], stale = false): Leader | null {
  const h = holders[0];
  return h ? { value: idName(h.id), token: h.token, stale } : null;
}

/**
 * An election's leaders as they change; close() or break ends it. When
 * the observation loses the cluster it yields the last leader known
 * again (null when nobody led) with `stale` true, here and on the
 * Leader; the next value, once it reaches the cluster again, has it
 * false.
 */
export class Observation implements AsyncIterable<Leader | null>, Disposable, AsyncDisposable {
  private last: bigint | null | undefined;
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
      const t = l ? l.token : null;
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
