// The line grammar of lockd's protocol (package proto's doc.go is the
// document): formatting requests, reading answers, and the limits a
// client checks before it sends anything.

/** The longest key, in bytes. */
export const MAX_KEY_LEN = 255;
/** The largest duration on the wire: ten years, in milliseconds. */
export const MAX_MS = 10 * 365 * 24 * 3600 * 1000;
/** The largest limit= an acquire may carry. */
export const MAX_LIMIT = 65535;
/** The longest acquire id, in bytes. */
export const MAX_ID_LEN = 64;
/** The largest token: tokens are unsigned 64-bit integers. */
export const MAX_TOKEN = (1n << 64n) - 1n;
/** The longest value (an election's), in bytes of UTF-8. */
export const MAX_VALUE_LEN = 1024;
/** The most keys one acquire takes. */
export const MAX_SET_KEYS = 16;
/** The longest request line a node reads, in bytes, its line ending aside: a node closes a connection that sends a longer one. */
export const MAX_LINE_LEN = 4096;
/** The longest ref= this client writes on an acquire. */
export const MAX_REF_LEN = 16;

/** Why a request line (its "\n" included) is too long for a node to read, or undefined when it fits. */
export function lineTooLong(line: string): string | undefined {
  const n = Buffer.byteLength(line, "utf8") - (line.endsWith("\n") ? 1 : 0);
  if (n <= MAX_LINE_LEN) return undefined;
  return `the request line would be ${n} bytes, longer than the ${MAX_LINE_LEN} a lockd request line may hold (keys, id and value, a value percent-encoded up to 3 bytes a byte): use fewer or shorter keys, or a shorter value`;
}

/** An answer longer than this is not lockd's (a K answer of 1000 keys of 255 bytes fits). */
export const MAX_ANSWER_LEN = 1 << 20;

/** One answer line: its kind (the op letter, or T, M, E), key and words. */
export interface Answer {
  kind: string;
  key: string;
  fields: string[];
}

/** Why key cannot be a key, or "" when it can. */
export function checkKey(key: string): string {
  if (typeof key !== "string" || key.length === 0) return "key is empty";
  const n = Buffer.byteLength(key, "utf8");
  if (n > MAX_KEY_LEN) return `key is ${n} bytes, longer than ${MAX_KEY_LEN}`;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c <= 0x20 || c === 0x7f) return "key holds a space, a tab or a control character";
  }
  return "";
}

/** Why id cannot be an acquire's id=ID, or "". */
export function checkID(id: string): string {
  const n = Buffer.byteLength(id, "utf8");
  if (n === 0 || n > MAX_ID_LEN) return `want 1 to ${MAX_ID_LEN} bytes`;
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    if (c <= 0x20 || c === 0x7f) return "no space or control character";
  }
  return "";
}

/**
 * Writes milliseconds as wire seconds, cut to the millisecond, without
 * trailing zeros: 30000 -> "30", 500 -> "0.5", 2250 -> "2.25".
 */
export function formatSeconds(ms: number): string {
  let m = Math.floor(ms);
  if (!(m > 0)) m = 0;
  const s = Math.floor(m / 1000);
  const f = m % 1000;
  if (f === 0) return String(s);
  return (s + "." + String(f).padStart(3, "0")).replace(/0+$/, "");
}

/** Reads wire seconds as milliseconds, or NaN when malformed. */
export function parseSeconds(s: string): number {
  if (!/^[0-9]+(\.[0-9]{1,3})?$/.test(s)) return NaN;
  const [i, f = ""] = s.split(".");
  return Number(i) * 1000 + Number(f.padEnd(3, "0"));
}

/** Reads an unsigned 64-bit decimal token, or undefined. */
export function parseToken(s: string): bigint | undefined {
  if (!/^[0-9]{1,20}$/.test(s)) return undefined;
  const t = BigInt(s);
  return t <= MAX_TOKEN ? t : undefined;
}

/** Reads one answer line (without its line end), or undefined when it is not one. */
export function parseAnswer(line: string): Answer | undefined {
  if (line.endsWith("\r")) line = line.slice(0, -1);
  if (line.length < 3 || line[1] !== " ") return undefined;
  const kind = line[0];
  if (kind < "A" || kind > "Z") return undefined;
  const rest = line.slice(2);
  const sp = rest.indexOf(" ");
  const key = sp < 0 ? rest : rest.slice(0, sp);
  if (key === "") return undefined;
  const fields = sp < 0 ? [] : rest.slice(sp + 1).split(" ").filter((w) => w !== "");
  return { kind, key, fields };
}

/**
 * The op of the request an answer belongs to: T answers A, E names its
 * op ("E key R: ..."), M carries none ("").
 */
export function reqOp(a: Answer): string {
  switch (a.kind) {
    case "T":
      return "A";
    case "M":
      return "";
    case "E": {
      const f = a.fields[0];
      return f !== undefined && f.length === 2 && f[1] === ":" ? f[0] : "";
    }
  }
  return a.kind;
}

/** The ref=R an answer to an acquire carries, "" when none. */
export function answerRef(a: Answer): string {
  const f = a.fields;
  switch (a.kind) {
    case "A":
    case "T":
    case "M": {
      const w = f[f.length - 1];
      return w !== undefined && w.startsWith("ref=") ? w.slice(4) : "";
    }
    case "E":
      return f.length > 1 && f[0] === "A:" && f[1].startsWith("ref=") ? f[1].slice(4) : "";
  }
  return "";
}

/** a without its ref word, so the rest reads as an answer without ref=. */
export function withoutRef(a: Answer): Answer {
  const f = a.fields;
  switch (a.kind) {
    case "A":
    case "T":
    case "M":
      if (f.length > 0 && f[f.length - 1].startsWith("ref=")) return { ...a, fields: f.slice(0, -1) };
      break;
    case "E":
      if (f.length > 1 && f[0] === "A:" && f[1].startsWith("ref=")) return { ...a, fields: [f[0], ...f.slice(2)] };
      break;
  }
  return a;
}

/** The words of an E answer, without its op and ref. */
export function errorText(a: Answer): string {
  let f = withoutRef(a).fields;
  if (f.length > 0 && f[0].length === 2 && f[0][1] === ":") f = f.slice(1);
  return f.join(" ");
}

/**
 * A value percent-encoded for the wire: every byte of its UTF-8 but
 * A-Z a-z 0-9 - . _ ~ written %XX. Throws a string saying why when it is
 * not 1 to MAX_VALUE_LEN bytes of UTF-8 text.
 */
export function encodeValue(v: string): string {
  if (typeof v !== "string") throw `the value must be a string, not ${typeof v}`;
  if (/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(v)) throw "the value is not UTF-8 text (it holds a lone surrogate)";
  const b = Buffer.from(v, "utf8");
  if (b.length === 0) throw `the value is empty; a value is 1 to ${MAX_VALUE_LEN} bytes of UTF-8 text, spaces allowed`;
  if (b.length > MAX_VALUE_LEN) throw `the value is ${b.length} bytes of UTF-8, more than ${MAX_VALUE_LEN}`;
  let out = "";
  for (const c of b) {
    const ok = (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x2d || c === 0x2e || c === 0x5f || c === 0x7e;
    out += ok ? String.fromCharCode(c) : "%" + c.toString(16).toUpperCase().padStart(2, "0");
  }
  return out;
}

/** A value= word's value as text (bytes that are not UTF-8 replaced, a % without two hex digits kept); also one key of a wset= word, split on "+" first. */
export function decodeValue(v: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c === 0x25 && /^[0-9A-Fa-f]{2}$/.test(v.slice(i + 1, i + 3))) {
      bytes.push(parseInt(v.slice(i + 1, i + 3), 16));
      i += 2;
    } else for (const x of Buffer.from(v[i], "utf8")) bytes.push(x);
  }
  return Buffer.from(bytes).toString("utf8");
}

/** What an A answer grants: a token per key asked, in order, and the semaphore place when it names one. */
export interface Grant {
  tokens: bigint[];
  place: number | undefined;
}

/** Reads the words of an A answer after its key (ref= taken off): n tokens, then name=value words. */
export function parseGrant(f: string[], n: number): Grant | undefined {
  const tokens: bigint[] = [];
  let place: number | undefined;
  for (const w of f) {
    const eq = w.indexOf("=");
    if (eq < 0) {
      const t = parseToken(w);
      if (t === undefined || place !== undefined) return undefined;
      tokens.push(t);
    } else if (w.slice(0, eq) === "place" && /^[0-9]{1,9}$/.test(w.slice(eq + 1))) place = Number(w.slice(eq + 1));
  }
  return tokens.length === n ? { tokens, place } : undefined;
}

/** The name part of an acquire id NAME#SUFFIX: what comes before its last '#', or the whole id. */
export function idName(id: string): string {
  const i = id.lastIndexOf("#");
  return i >= 0 ? id.slice(0, i) : id;
}

/** One holder of a key, as Q and L show it. */
export interface Holder {
  token: bigint;
  /** Milliseconds left of its lease. */
  leaseLeft: number;
  /** The id its acquire carried, "" when none. */
  id: string;
  /** It holds the key as a reader (the key is held shared). */
  shared: boolean;
  /** It was granted as one key of a set, whose id this is (the token of the set's first key). */
  setId?: bigint;
  /** The semaphore place it holds, when the answer names it. */
  place?: number;
  /** Its value (an election's leader's), decoded, when it has one. */
  value?: string;
}

/** One waiter of a key, in queue order. */
export interface Waiter {
  /** Milliseconds it has waited so far. */
  waited: number;
  /** The remote address of its connection, "" when unknown. */
  addr: string;
  /** The id its acquire carried, "" when none. */
  id: string;
  /** It waits as a reader. */
  shared: boolean;
  /** The keys of the set it waits for, in order; empty when it waits for this key alone. */
  setKeys: string[];
}

/** A key's holders and waiters: the answer to queue(), and each state a watch delivers. */
export interface QueueState {
  key: string;
  /** Every holder, oldest first; empty when nobody holds the key. */
  holders: Holder[];
  /** How many wait, which may be more than waiters lists (at most 1000). */
  nwaiters: number;
  /** The first waiters, next to be granted first. */
  waiters: Waiter[];
  /** How many may hold the key at once: 1 for a lock. */
  limit: number;
  /** The key is held by readers. */
  shared: boolean;
  /**
   * From a watch: it had lost the cluster (no node served it for the
   * client's failureTimeout), and this, the last state it read, may be
   * out of date. false from queue().
   */
  stale: boolean;
}

/** Reads the words of a Q answer (or an L answer) after its key. */
export function parseQueue(key: string, f: string[]): QueueState | undefined {
  if (f.length < 3) return undefined;
  let extra = f.length;
  while (extra > 3 && f[extra - 1].includes("=")) extra--;
  const q: QueueState = { key, holders: [], nwaiters: 0, waiters: [], limit: 1, shared: false, stale: false };
  if (f[0] !== "-") {
    const token = parseToken(f[0]);
    const left = parseSeconds(f[1]);
    if (token === undefined || Number.isNaN(left)) return undefined;
    q.holders.push({ token, leaseLeft: left, id: "", shared: false });
  }
  if (!/^[0-9]+$/.test(f[2])) return undefined;
  q.nwaiters = Number(f[2]);
  for (const w of f.slice(3, extra)) {
    const c = w.indexOf(",");
    const waited = parseSeconds(c < 0 ? w : w.slice(0, c));
    if (Number.isNaN(waited)) return undefined;
    let addr = c < 0 ? "" : w.slice(c + 1);
    if (addr === "-") addr = "";
    q.waiters.push({ waited, addr, id: "", shared: false, setKeys: [] });
  }
  if (q.nwaiters < q.waiters.length) return undefined;
  for (const w of f.slice(extra)) {
    const eq = w.indexOf("=");
    const name = w.slice(0, eq);
    const val = w.slice(eq + 1);
    const c = val.indexOf(",");
    const which = c < 0 ? val : val.slice(0, c);
    const rest = c < 0 ? "" : val.slice(c + 1);
    switch (name) {
      case "limit": {
        const l = Number(val);
        if (!Number.isInteger(l) || l < 1) return undefined;
        q.limit = l;
        break;
      }
      case "holder": {
        const token = parseToken(which);
        const left = parseSeconds(rest);
        if (token === undefined || Number.isNaN(left)) return undefined;
        q.holders.push({ token, leaseLeft: left, id: "", shared: false });
        break;
      }
      case "mode":
        q.shared = val === "shared";
        break;
    }
  }
  for (const h of q.holders) h.shared = q.shared;
  for (const w of f.slice(extra)) {
    const eq = w.indexOf("=");
    const name = w.slice(0, eq);
    const val = w.slice(eq + 1);
    const c = val.indexOf(",");
    if (c < 0) continue;
    const which = val.slice(0, c);
    const id = val.slice(c + 1);
    if (name === "id" || name === "set" || name === "place" || name === "value") {
      const token = parseToken(which);
      const h = q.holders.find((h) => h.token === token);
      if (!h) continue;
      if (name === "id") h.id = id;
      else if (name === "set") h.setId = parseToken(id);
      else if (name === "place" && /^[0-9]{1,9}$/.test(id)) h.place = Number(id);
      else if (name === "value") h.value = id === "" ? undefined : decodeValue(id);
    } else if (name === "wid" || name === "wmode" || name === "wset") {
      const i = Number(which);
      if (!Number.isInteger(i) || i < 1 || i > q.waiters.length) continue;
      const wt = q.waiters[i - 1];
      if (name === "wid") wt.id = id;
      else if (name === "wmode") wt.shared = id === "shared";
      else wt.setKeys = id.split("+").map(decodeValue);
    }
  }
  return q;
}

/** A node's status (its S answer), typed. */
export interface Status {
  self: string;
  /** active, standby, joining or handoff. */
  role: string;
  /** The active node's address, "" when none is known. */
  active: string;
  /** The highest token the node knows of: its high-water mark. */
  token: bigint;
  /** Replication position: state changes applied. */
  seq: bigint;
  /** Since the process started, in milliseconds. */
  uptime: number;
  /** Keys held or waited on. */
  keys: number;
  /** Waiters queued. */
  waiters: number;
  /** The node gave the role up by command and will not take it back by priority. */
  sticky: boolean;
  /** sync or async; "" from an older node. */
  replication: string;
  /** On a sync-mode active: no standby is in sync, answers do not wait. */
  degraded: boolean;
  /** memory, or disk:MODE with a data directory; "" from an older node. */
  durability: string;
  /** Every node of --peers, in priority order, this one included. */
  peers: PeerStatus[];
  /** Every key=value word of the answer as text (peer= words space-separated), fields this client does not know included. */
  fields: Record<string, string>;
}

/** One node of --peers as the node answering S sees it. */
export interface PeerStatus {
  addr: string;
  role: string;
  /** The answering node hears it. */
  up: boolean;
  /** Its replication position, as last reported. */
  seq: bigint;
  /** Changes it is behind the active (0 when caught up or unknown). */
  lag: bigint;
  /** Its token high-water mark. */
  token: bigint;
}

/** Reads the key=value words of an S answer; a string says what was wrong. */
export function parseStatus(f: string[]): Status | string {
  const st: Status = {
    self: "",
    role: "",
    active: "",
    token: 0n,
    seq: 0n,
    uptime: 0,
    keys: 0,
    waiters: 0,
    sticky: false,
    replication: "",
    degraded: false,
    durability: "",
    peers: [],
    fields: {},
  };
  const u64 = (v: string) => (/^[0-9]+$/.test(v) ? parseToken(v) : undefined);
  const count = (v: string) => (/^[0-9]{1,15}$/.test(v) ? Number(v) : undefined);
  for (const w of f) {
    const eq = w.indexOf("=");
    if (eq <= 0) continue;
    const k = w.slice(0, eq);
    const v = w.slice(eq + 1);
    // peer= repeats, one per node: keep them all, space-separated.
    st.fields[k] = k in st.fields ? st.fields[k] + " " + v : v;
    let ok = true;
    switch (k) {
      case "self":
      case "role":
      case "replication":
      case "durability":
        st[k] = v;
        break;
      case "active":
        st.active = v === "-" ? "" : v;
        break;
      case "token":
      case "seq": {
        const n = u64(v);
        if (n === undefined) ok = false;
        else st[k] = n;
        break;
      }
      case "keys":
      case "waiters": {
        const n = count(v);
        if (n === undefined) ok = false;
        else st[k] = n;
        break;
      }
      case "uptime": {
        const s = parseSeconds(v);
        if (Number.isNaN(s)) ok = false;
        else st.uptime = s;
        break;
      }
      case "sticky":
      case "degraded":
        st[k] = v === "true";
        break;
      case "peer": {
        const p = v.split(",");
        const [seq, lag, token] = [u64(p[3] ?? ""), u64(p[4] ?? ""), u64(p[5] ?? "")];
        if (p.length !== 6 || seq === undefined || lag === undefined || token === undefined) ok = false;
        else st.peers.push({ addr: p[0], role: p[1], up: p[2] === "up", seq, lag, token });
        break;
      }
    }
    if (!ok) return `status field ${JSON.stringify(w)}, which this client cannot read`;
  }
  return st;
}
