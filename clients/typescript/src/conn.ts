// One persistent connection slot to one address: it dials, proves the
// secret, sends the first keep-alive, then writes pipelined requests and
// matches each answer to its request, until the connection drops; then
// it waits the redial interval (or a call's demand) and dials again.

import * as net from "node:net";
import * as tls from "node:tls";
import { Handshake, HandshakeError } from "./auth.js";
import { AuthError, ClosedError, LockdError, ProtocolError } from "./errors.js";
import { type Answer, MAX_ANSWER_LEN, answerRef, parseAnswer, reqOp } from "./wire.js";

/** What a call learns of its send: the answer, or why there will be none. */
export type Result = { ans: Answer; landed: boolean } | { err: Error };

/** One request sent on one connection, waiting for its answer. */
export class Call {
  seq = 0;
  conn: Conn | undefined;
  gen = 0;
  /** The caller gave up: the answer, when it comes, goes to Client.orphan. */
  abandoned = false;
  done = false;
  /** An acquire's keys after key, for a set: a grant nobody took goes back key by key. */
  more: string[] = [];
  constructor(
    readonly op: string,
    readonly key: string,
    readonly line: string,
    readonly cb: (r: Result) => void,
    readonly ref = "",
    /** A keep-alive, or a request whose answer nobody waits for. */
    readonly quiet = false,
    /** Runs as the answer is read, before anything else is: a watch takes its place here. */
    readonly onAnswer?: (a: Answer, cn: Conn) => void,
  ) {}
}

/** What a connection needs of its client. */
export interface ConnHost {
  readonly closed: boolean;
  readonly failureTimeout: number;
  readonly redial: number;
  /** Whether an idle client lets the process exit (ClientOptions.unref). */
  readonly unrefIdle: boolean;
  open(addr: string): Promise<LineSocket>;
  connUp(cn: Conn): void;
  connDown(cn: Conn, err: Error): void;
  orphan(cl: Call, a: Answer): void;
  watchLine(cn: Conn, a: Answer): void;
  /** An M matching no request: a watch of key on cn moves. */
  watchMoved(cn: Conn, a: Answer): boolean;
  log(msg: string): void;
}

/** The ops whose requests an M answer may answer: all but S. */
const matchOps = ["A", "R", "N", "Q", "K", "H", "X", "L", "U"];

export type ConnState = "dialing" | "up" | "down";

export class Conn {
  state: ConnState = "dialing";
  /** Successful dials so far: names the current connection. */
  gen = 0;
  lastErr: Error | undefined;
  lastRead = 0;

  private sock: LineSocket | undefined;
  private seq = 0;
  private answered = 0;
  private readonly pending = new Map<string, Call[]>();
  private readonly refs = new Map<string, Call>();
  private wbuf: string[] = [];
  private flushing = false;
  private probes = 0;
  private probeAt = 0;
  private deadErr: Error | undefined;
  private wakeDial: (() => void) | undefined;
  private stopped = false;

  constructor(
    readonly host: ConnHost,
    readonly addr: string,
  ) {}

  /** Owns the connection's life; returns once the client is closed. */
  async run(): Promise<void> {
    let dropped = false;
    while (!this.host.closed) {
      this.state = "dialing";
      let err: Error;
      try {
        const ls = await this.host.open(this.addr);
        if (this.host.closed) {
          ls.destroy();
          return;
        }
        this.gen++;
        this.state = "up";
        this.lastErr = undefined;
        this.lastRead = Date.now();
        this.sock = ls;
        this.deadErr = undefined;
        this.probes = 0;
        this.host.log(dropped ? `connection to ${this.addr} restored` : `connection to ${this.addr} up`);
        this.host.connUp(this);
        const readErr = await ls.serve((line) => this.onLine(line));
        dropped = true;
        if (this.host.closed) err = new ClosedError();
        else if (this.deadErr) err = this.deadErr;
        else err = new LockdError(`connection to ${this.addr} lost: ${readErr.message}`, "ECONNLOST", { cause: readErr });
      } catch (e) {
        err = this.host.closed ? new ClosedError() : asError(e);
      }
      this.down(err);
      if (this.host.closed) return;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, this.host.redial);
        if (this.host.unrefIdle) t.unref();
        this.wakeDial = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.wakeDial = undefined;
    }
  }

  /** Cuts short the wait before the next dial. */
  dialNow(): void {
    if (this.state !== "down") return;
    this.state = "dialing";
    this.wakeDial?.();
  }

  /** Closes the connection and stops re-dialling (the client closes). */
  stop(): void {
    this.stopped = true;
    this.sock?.destroy();
    this.wakeDial?.();
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  /** Marks the connection unusable, then fails everything outstanding on it. */
  private down(err: Error): void {
    this.state = "down";
    this.lastErr = err;
    const calls: Call[] = [];
    for (const q of this.pending.values()) calls.push(...q);
    calls.push(...this.refs.values());
    this.pending.clear();
    this.refs.clear();
    this.wbuf = [];
    this.sock?.destroy();
    this.sock = undefined;
    this.host.connDown(this, err);
    for (const cl of calls) {
      if (!cl.quiet && !cl.done) {
        cl.done = true;
        cl.cb({ err });
      }
    }
  }

  /** Sends cl and registers it for its answer; false when the connection is down. */
  send(cl: Call): boolean {
    if (!this.sock || this.state !== "up") return false;
    this.queue(cl);
    return true;
  }

  private queue(cl: Call): void {
    cl.seq = ++this.seq;
    cl.conn = this;
    cl.gen = this.gen;
    if (cl.ref !== "") {
      // Matched by its ref alone: its answers carry it, and are not
      // held behind other acquires of the key.
      this.refs.set(cl.ref, cl);
    } else {
      const k = cl.op + " " + cl.key;
      const q = this.pending.get(k);
      if (q) q.push(cl);
      else this.pending.set(k, [cl]);
    }
    this.wbuf.push(cl.line);
    if (!this.flushing) {
      this.flushing = true;
      // Let every caller that is ready run first, so that under load
      // one write carries many requests.
      setImmediate(() => this.flush());
    }
  }

  private flush(): void {
    this.flushing = false;
    const sock = this.sock;
    if (!sock || this.wbuf.length === 0) return;
    const data = this.wbuf.length === 1 ? this.wbuf[0] : this.wbuf.join("");
    this.wbuf = [];
    sock.write(data);
  }

  /** Queues a keep-alive: S, which every node answers at once without touching a lock. */
  probe(now = Date.now()): void {
    if (!this.sock) return;
    this.queue(new Call("S", "-", "S -\n", () => {}, "", true));
    if (this.probes === 0) this.probeAt = now;
    this.probes++;
  }

  /**
   * The liveness check, run ten times per failure timeout: a connection
   * that read nothing for a quarter of it while requests wait, or for
   * all of it when idle, sends a keep-alive; one whose keep-alive went
   * unanswered for half of it while nothing at all was read for all of
   * it is closed, which fails its calls over as a drop does.
   */
  checkLive(now: number): void {
    const ft = this.host.failureTimeout;
    if (!this.sock || this.deadErr) return;
    const silent = now - this.lastRead;
    if (this.probes > 0) {
      if (now - this.probeAt < ft / 2 || silent < ft) return;
      this.deadErr = new LockdError(
        `lockd did not answer: ${this.addr} answered nothing, not even a keep-alive, for ${silent} ms (the failure timeout is ${ft} ms)`,
        "ENOANSWER",
      );
      this.sock.destroy();
      return;
    }
    if (silent >= ft || (silent >= ft / 4 && (this.pending.size > 0 || this.refs.size > 0))) this.probe(now);
  }

  private take(k: string, cl?: Call): Call | undefined {
    const q = this.pending.get(k);
    if (!q || q.length === 0) return undefined;
    let i = 0;
    if (cl) {
      i = q.indexOf(cl);
      if (i < 0) return undefined;
    }
    const got = q[i];
    q.splice(i, 1);
    if (q.length === 0) this.pending.delete(k);
    return got;
  }

  /** The oldest outstanding request on key, whatever its op: the one an M answers. */
  private takeAny(key: string): Call | undefined {
    let best: Call | undefined;
    for (const op of matchOps) {
      const q = this.pending.get(op + " " + key);
      if (q && q.length > 0 && (!best || q[0].seq < best.seq)) best = q[0];
    }
    return best ? this.take(best.op + " " + key, best) : undefined;
  }

  /**
   * The oldest ref'd acquire of key, for an answer to it that carries no
   * ref: from a node that does not echo refs, or refuses them. Never
   * met on a node that speaks ref=, so it costs the usual path nothing.
   */
  private takeUnrefd(key: string): Call | undefined {
    for (const [ref, cl] of this.refs) {
      if (cl.key === key) {
        this.refs.delete(ref);
        return cl;
      }
    }
    return undefined;
  }

  private onLine(line: string): void {
    this.lastRead = Date.now();
    const a = parseAnswer(line);
    if (!a) throw new ProtocolError(`${this.addr} sent a line the client cannot read: ${JSON.stringify(line.slice(0, 64))}`);
    let cl: Call | undefined;
    const ref = answerRef(a);
    if (ref !== "") {
      const r = this.refs.get(ref);
      if (r && r.key === a.key) {
        this.refs.delete(ref);
        cl = r;
      }
    } else if (a.kind === "M") {
      cl = this.takeAny(a.key);
      if (!cl && this.host.watchMoved(this, a)) return;
    } else if (a.kind === "L") {
      cl = this.take("L " + a.key);
      if (!cl) {
        this.host.watchLine(this, a);
        return;
      }
    } else {
      const op = reqOp(a);
      if (op !== "") cl = this.take(op + " " + a.key);
    }
    if (!cl && (a.kind === "A" || a.kind === "T" || a.kind === "M" || reqOp(a) === "A")) cl = this.takeUnrefd(a.key);
    if (!cl) {
      if (a.kind === "E") {
        // One of our requests will never be answered: the stream is out
        // of step, so start afresh and let the calls retry.
        throw new ProtocolError(`${this.addr} sent an error that matches no request: ${line.slice(0, 200)}`);
      }
      this.host.log(`answer from ${this.addr} matches no request: ${line.slice(0, 80)}`);
      return;
    }
    const landed = this.answered > cl.seq;
    this.answered = Math.max(this.answered, cl.seq);
    if (cl.quiet && cl.op === "S") {
      this.probes--;
      this.probeAt = Date.now();
      return;
    }
    cl.onAnswer?.(a, this);
    if (cl.done) return;
    cl.done = true;
    if (cl.abandoned) this.host.orphan(cl, a);
    else cl.cb({ ans: a, landed });
  }
}

/** A socket read line by line: a handshake awaits lines, then serve hands each to a dispatcher. */
export class LineSocket {
  private chunks: Buffer[] = [];
  private lines: string[] = [];
  private waiter: ((line: string | Error) => void) | undefined;
  private handler: ((line: string) => void) | undefined;
  private ended: ((err: Error) => void) | undefined;
  private closeErr: Error | undefined;

  constructor(readonly sock: net.Socket) {
    sock.setNoDelay(true);
    sock.on("data", (d: Buffer) => this.onData(d));
    sock.on("error", (e) => {
      this.closeErr ??= e;
    });
    sock.on("close", () => this.fail(this.closeErr ?? new Error("the node closed the connection")));
  }

  write(s: string): void {
    this.sock.write(s);
  }

  destroy(): void {
    this.sock.destroy();
  }

  private fail(err: Error): void {
    this.closeErr ??= err;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w(err);
    }
    if (this.ended) {
      const e = this.ended;
      this.ended = undefined;
      e(this.closeErr);
    }
  }

  private onData(d: Buffer): void {
    let start = 0;
    for (;;) {
      const nl = d.indexOf(10, start);
      if (nl < 0) break;
      let line: string;
      if (this.chunks.length > 0) {
        this.chunks.push(d.subarray(start, nl));
        line = Buffer.concat(this.chunks).toString("utf8");
        this.chunks = [];
      } else {
        line = d.toString("utf8", start, nl);
      }
      start = nl + 1;
      this.emit(line);
      if (this.sock.destroyed) return;
    }
    if (start < d.length) {
      this.chunks.push(d.subarray(start));
      let n = 0;
      for (const c of this.chunks) n += c.length;
      if (n > MAX_ANSWER_LEN) {
        this.closeErr = new ProtocolError(`the node sent an answer longer than ${MAX_ANSWER_LEN} bytes`);
        this.sock.destroy();
      }
    }
  }

  private emit(line: string): void {
    if (this.handler) {
      try {
        this.handler(line);
      } catch (e) {
        this.closeErr = asError(e);
        this.sock.destroy();
      }
      return;
    }
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w(line);
      return;
    }
    this.lines.push(line);
  }

  /** The next line, within ms. */
  next(ms: number, what: string): Promise<string> {
    const l = this.lines.shift();
    if (l !== undefined) return Promise.resolve(l);
    if (this.closeErr) return Promise.reject(this.closeErr);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.waiter = undefined;
        reject(new LockdError(what, "ENOANSWER"));
      }, ms);
      this.waiter = (x) => {
        clearTimeout(t);
        if (typeof x === "string") resolve(x);
        else reject(x);
      };
    });
  }

  /** Hands every line to handler until the connection ends; resolves with why it ended. */
  serve(handler: (line: string) => void): Promise<Error> {
    return new Promise((resolve) => {
      if (this.closeErr) {
        resolve(this.closeErr);
        return;
      }
      this.ended = resolve;
      this.handler = handler;
      const early = this.lines;
      this.lines = [];
      for (const l of early) this.emit(l);
    });
  }
}

export interface DialOptions {
  dialTimeout: number;
  failureTimeout: number;
  tls?: tls.ConnectionOptions;
  secret?: Buffer;
  role: "client" | "admin" | "peer";
  /** Runs once the TCP connection is open, before TLS and the rest. */
  onConnect?: () => void;
  /** The socket and the dial's timers do not keep the process alive. */
  unref?: boolean;
}

/**
 * Dials addr and makes the connection ready for requests: TLS when
 * configured, then the secret, then a first keep-alive answered (the
 * kernel of a frozen process still completes TCP handshakes, so a
 * connection that merely opened proves nothing).
 */
export async function dial(addr: string, o: DialOptions): Promise<LineSocket> {
  const { host, port } = splitHostPort(addr);
  const sock = await new Promise<net.Socket>((resolve, reject) => {
    let s: net.Socket;
    let settled = false;
    const t = setTimeout(() => {
      settled = true;
      s.destroy();
      reject(new LockdError(`dialling ${addr} took longer than ${o.dialTimeout} ms`, "ENOANSWER"));
    }, o.dialTimeout);
    if (o.unref) t.unref();
    // Stays attached: an error emitted before the LineSocket listens
    // must not go unhandled.
    const fail = (e: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(t);
      s.destroy();
      if (o.tls && !(e as NodeJS.ErrnoException).syscall) reject(new AuthError(`${addr}: TLS: ${e.message}`, e));
      else reject(e);
    };
    const ready = () => {
      if (settled) return;
      settled = true;
      clearTimeout(t);
      resolve(s);
    };
    if (o.tls) {
      const servername = o.tls.servername ?? (net.isIP(host) ? undefined : host);
      s = tls.connect({ ...o.tls, host, port, servername, minVersion: "TLSv1.2" }, ready);
    } else {
      s = net.connect({ host, port }, ready);
    }
    if (o.unref) s.unref();
    s.on("error", fail);
    s.once("connect", () => o.onConnect?.());
  });
  const ls = new LineSocket(sock);
  try {
    if (o.secret) {
      const hs = new Handshake(o.secret, o.role, addr);
      let out = hs.start();
      while (out !== "") {
        ls.write(out);
        const line = await ls.next(o.dialTimeout, `${addr} took the connection but did not answer the authentication within ${o.dialTimeout} ms`);
        try {
          out = hs.step(line);
        } catch (e) {
          if (e instanceof HandshakeError) throw new AuthError(`${addr}: the secret: ${e.message}`, e);
          throw e;
        }
      }
    }
    ls.write("S -\n");
    // Without TLS, a node that speaks TLS waits for the rest of a record
    // in silence, as a frozen node does.
    const plain = o.tls ? "" : "; a frozen node does that, and so does one that speaks TLS to a client without TLS (set the tls option)";
    const line = await ls.next(o.failureTimeout, `lockd did not answer: ${addr} took the connection but did not answer a status request within ${o.failureTimeout} ms (the failure timeout)${plain}`);
    const a = parseAnswer(line);
    if (!a || (a.kind !== "S" && a.kind !== "E")) {
      throw new ProtocolError(`${addr} answered ${JSON.stringify(line.slice(0, 64))} to a status request; check that a lockd node, not another service, listens there`);
    }
  } catch (e) {
    ls.destroy();
    throw e;
  }
  return ls;
}

/** Splits HOST:PORT, [V6]:PORT included; throws on anything else. */
export function splitHostPort(addr: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):([0-9]{1,5})$/.exec(addr);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new Error(`address ${JSON.stringify(addr)} is not HOST:PORT; write it like 127.0.0.1:7070`);
  return { host: m[1] ?? m[2] ?? "", port };
}

export function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
