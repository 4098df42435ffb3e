"""The line grammar of lockd's protocol, as the client needs it: formatting
requests and reading answers. No sockets here, so it is tested alone."""

from __future__ import annotations

import datetime
import math
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, TypedDict, Union

Seconds = Union[float, int, datetime.timedelta]

MAX_KEY_LEN = 255
MAX_ID_LEN = 64
MAX_SECONDS = 315360000
MAX_LIMIT = 65535
MAX_ANSWER_LEN = 1 << 20
MAX_VALUE_LEN = 1024
MAX_SET_KEYS = 16
# The longest request line a node reads, its line ending aside; a node
# closes a connection that sends a longer one.
MAX_LINE_LEN = 4096
# The longest ref=R either client writes on an acquire.
MAX_REF_LEN = 16
ID_SUFFIX_LEN = 1 + 16 + 1 + 13
MAX_NAME_LEN = MAX_ID_LEN - ID_SUFFIX_LEN
_REF_RE = re.compile(r"^[0-9A-Za-z]{1,16}$")
LIMIT_MISMATCH = "limit mismatch:"
AUTH_FIRST = "authenticate first"


def seconds(d: Optional[Seconds], what: str) -> Optional[float]:
    """A duration given as seconds or a timedelta, as float seconds."""
    if d is None:
        return None
    if isinstance(d, datetime.timedelta):
        return d.total_seconds()
    if isinstance(d, bool) or not isinstance(d, (int, float)):
        raise TypeError(f"{what} must be seconds (int or float) or a datetime.timedelta, not {type(d).__name__}")
    if math.isnan(d) or math.isinf(d):
        raise ValueError(f"{what} {d!r} is not a finite number of seconds")
    return float(d)


def millis(sec: float, ceil: bool) -> int:
    """Seconds as whole milliseconds, the wire's precision. A wait is rounded
    up, so that a positive wait never becomes 0 (forever)."""
    ms = sec * 1000.0
    return int(math.ceil(ms - 1e-9)) if ceil else int(round(ms))


def format_ms(ms: int) -> str:
    """Milliseconds as the wire writes durations: 30, 0.5, 2.25."""
    whole, frac = divmod(ms, 1000)
    if frac == 0:
        return str(whole)
    return f"{whole}.{frac:03d}".rstrip("0")


def check_key(op: str, key: str) -> bytes:
    """The key as bytes, or ValueError saying why it cannot be one."""
    if not isinstance(key, str):
        raise TypeError(f"{op}: the key must be a str, not {type(key).__name__}")
    b = key.encode("utf-8")
    if 0 < len(b) <= MAX_KEY_LEN and key.isprintable() and " " not in key:
        # No control character and no space: the loop below would pass it.
        return b
    if not b:
        raise ValueError(f"{op}: the key is empty; a key is 1 to {MAX_KEY_LEN} bytes without space, tab or control character")
    if len(b) > MAX_KEY_LEN:
        raise ValueError(f"{op} {key[:40]!r}...: the key is {len(b)} bytes, more than {MAX_KEY_LEN}")
    for c in b:
        if c <= 0x20 or c == 0x7F:
            raise ValueError(f"{op} {key!r}: the key holds a space, tab or control character; a key is 1 to {MAX_KEY_LEN} bytes without them")
    return b


def clean_name(name: str) -> str:
    """A name made fit to lead an acquire id: no space or control character,
    at most MAX_NAME_LEN bytes, not cut inside a UTF-8 sequence."""
    out = "".join("_" if (ord(ch) <= 0x20 or ord(ch) == 0x7F) else ch for ch in name)
    b = out.encode("utf-8")
    if len(b) > MAX_NAME_LEN:
        out = b[:MAX_NAME_LEN].decode("utf-8", errors="ignore")
    return out


def base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    if n == 0:
        return "0"
    s = []
    while n:
        n, r = divmod(n, 36)
        s.append(digits[r])
    return "".join(reversed(s))


def check_keys(op: str, keys: Sequence[str]) -> List[str]:
    """The keys of a set as a list: 1 to MAX_SET_KEYS distinct keys, or
    ValueError (TypeError) saying why not."""
    if isinstance(keys, (str, bytes)) or not isinstance(keys, (list, tuple)):
        raise TypeError(f"{op}: keys must be a list (or tuple) of str keys, not {type(keys).__name__}")
    out: List[str] = list(keys)
    if not out or len(out) > MAX_SET_KEYS:
        raise ValueError(f"{op}: {len(out)} keys given; a set is 1 to {MAX_SET_KEYS} keys")
    for k in out:
        check_key(op, k)
    seen: Dict[str, int] = {}
    for i, k in enumerate(out):
        if k in seen:
            raise ValueError(f"{op}: key {k!r} is given twice (keys {seen[k] + 1} and {i + 1}); name each key once")
        seen[k] = i
    return out


def check_limit(op: str, key: str, limit: Optional[int], shared: bool) -> int:
    """The limit to send (1: a lock), or ValueError: out of range, or
    shared=True beside a semaphore's limit."""
    if limit is None:
        limit = 1
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1 or limit > MAX_LIMIT:
        raise ValueError(f"{op} {key}: limit {limit!r} is out of range; a key allows 1 (a lock) to {MAX_LIMIT} holders at once")
    if not isinstance(shared, bool):
        raise TypeError(f"{op} {key}: shared must be True or False, not {shared!r}")
    if shared and limit > 1:
        raise ValueError(
            f"{op} {key}: shared=True and limit={limit} cannot go together: a semaphore's places are all alike, "
            f"so none is shared; pass shared=True for a reader of a lock, or limit for a semaphore"
        )
    return limit


def encode_value(op: str, value: str) -> str:
    """value percent-encoded for the wire (every byte but A-Z a-z 0-9 - .
    _ ~ written %XX), or ValueError (TypeError) when it is not 1 to
    MAX_VALUE_LEN bytes of UTF-8 text."""
    if not isinstance(value, str):
        raise TypeError(f"{op}: the value must be a str, not {type(value).__name__}")
    try:
        b = value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{op}: the value is not UTF-8 text (it holds a lone surrogate)") from None
    if not b:
        raise ValueError(f"{op}: the value is empty; a value is 1 to {MAX_VALUE_LEN} bytes of UTF-8 text, spaces allowed")
    if len(b) > MAX_VALUE_LEN:
        raise ValueError(f"{op}: the value is {len(b)} bytes of UTF-8, more than {MAX_VALUE_LEN}")
    return urllib.parse.quote_from_bytes(b, safe="")


def decode_value(v: str) -> str:
    """A value= word's value as text (bytes that are not UTF-8 replaced).
    Also one key of a wset= word, split on '+' first."""
    return urllib.parse.unquote(v, errors="replace")


def check_line(op: str, label: str, line: bytes) -> None:
    """ValueError when line, its ending aside, is longer than a node reads
    (MAX_LINE_LEN): a set's keys, an id and a value percent-encoded add
    up, and a node closes the connection on such a line."""
    n = len(line) - (1 if line.endswith(b"\n") else 0)
    if n > MAX_LINE_LEN:
        raise ValueError(
            f"{op} {label}: the request line would be {n} bytes, longer than the {MAX_LINE_LEN} a lockd request line may hold "
            f"(keys, id and value, a value percent-encoded up to 3 bytes a byte): use fewer or shorter keys, or a shorter value"
        )


def check_acquire_line(
    keys: Sequence[str], lease_ms: int, wait: Optional[float], limit: int, id_: str, shared: bool, value: str
) -> None:
    """check_line for an acquire, measured as its longest send can be: the
    whole wait (None: the try-lock) and the longest ref."""
    wait_ms = None if wait is None else (millis(wait, True) if wait > 0 else 0)
    line = acquire_line(keys[0], lease_ms, wait_ms, limit, id_, "z" * MAX_REF_LEN, keys[1:], shared, value)
    check_line("acquire", "+".join(keys), line)


def acquire_tail(more: Sequence[str], shared: bool, limit: int, id_: str, value: str) -> str:
    """The words of an acquire after its wait, ref= aside: [key=KEY]...
    [mode=shared] [limit=N] [id=ID] [value=V], each with a space before it;
    value is already encoded."""
    parts = [f" key={k}" for k in more]
    if shared:
        parts.append(" mode=shared")
    if limit > 1:
        parts.append(f" limit={limit}")
    if id_:
        parts.append(f" id={id_}")
    if value:
        parts.append(f" value={value}")
    return "".join(parts)


def acquire_line(
    key: str,
    lease_ms: int,
    wait: Optional[int],
    limit: int,
    id_: str,
    ref: Optional[str],
    more: Sequence[str] = (),
    shared: bool = False,
    value: str = "",
) -> bytes:
    """A key lease wait [key=KEY]... [mode=shared] [limit=N] [id=ID]
    [value=V] [ref=R]; wait None is the try-lock's '-'."""
    line = f"A {key} {format_ms(lease_ms)} {'-' if wait is None else format_ms(wait)}" + acquire_tail(more, shared, limit, id_, value)
    if ref:
        line += f" ref={ref}"
    return (line + "\n").encode("utf-8")


class Grant(NamedTuple):
    """What an A answer grants: a token per key asked, in order, and the
    semaphore place (None when the answer names none)."""

    tokens: List[int]
    place: Optional[int]


def parse_grant(fields: List[str], nkeys: int) -> Optional[Grant]:
    """Reads the words of an A answer after its key (ref= taken off):
    nkeys tokens, then name=value words (place=P read, others skipped).
    None when it is not that."""
    tokens: List[int] = []
    place: Optional[int] = None
    for f in fields:
        name, eq, val = f.partition("=")
        if not eq:
            if place is not None or not f.isdigit():
                return None
            tokens.append(int(f))
        elif name == "place" and val.isdigit():
            place = int(val)
    if len(tokens) != nkeys:
        return None
    return Grant(tokens, place)


class Answer:
    """One answer line: its kind, key and the words after the key, and the
    ref= an answer to a ref'd acquire carries. One is made for every line
    read: a plain class with slots costs less than a dataclass."""

    __slots__ = ("kind", "key", "fields", "ref")

    def __init__(self, kind: str, key: str, fields: List[str], ref: Optional[str] = None) -> None:
        self.kind = kind
        self.key = key
        self.fields = fields
        self.ref = ref

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Answer):
            return NotImplemented
        return (self.kind, self.key, self.fields, self.ref) == (other.kind, other.key, other.fields, other.ref)

    def __repr__(self) -> str:
        return f"Answer(kind={self.kind!r}, key={self.key!r}, fields={self.fields!r}, ref={self.ref!r})"

    def req_op(self) -> str:
        """The op of the request this answer belongs to ('' for M: any op)."""
        if self.kind == "T":
            return "A"
        if self.kind == "E":
            if self.fields and len(self.fields[0]) == 2 and self.fields[0].endswith(":"):
                return self.fields[0][0]
            return ""
        if self.kind == "M":
            return ""
        return self.kind

    def error_text(self) -> str:
        """The words of an E answer after its op (and its ref)."""
        words = self.fields[1:] if self.fields and self.fields[0].endswith(":") else self.fields
        return " ".join(words)


class BadLine(Exception):
    pass


def parse_answer(line: bytes) -> Answer:
    """Reads one answer line (without or with its line ending)."""
    text = line.decode("utf-8", errors="replace").rstrip("\r\n")
    words = text.split()
    if len(words) < 2 or len(words[0]) != 1 or not ("A" <= words[0] <= "Z"):
        raise BadLine(f"not an answer of lockd's grammar: {text[:64]!r}")
    a = Answer(words[0], words[1], words[2:])
    if a.kind in ("A", "T", "M"):
        if a.fields and a.fields[-1].startswith("ref="):
            a.ref = a.fields.pop()[4:]
    elif a.kind == "E" and len(a.fields) >= 2 and a.fields[0] == "A:" and a.fields[1].startswith("ref="):
        a.ref = a.fields[1][4:]
        del a.fields[1]
    return a


def valid_ref(r: str) -> bool:
    return bool(_REF_RE.match(r))


@dataclass
class Holder:
    """One holder of a key. shared: a reader (the key is held shared);
    set_id: it was granted as one key of a set, whose id is the token of
    the set's first key (None when alone); place: the semaphore place it
    holds (None when the answer names none); value: its value (an
    election's leader's), None when it has none."""

    token: int
    lease_left: float
    id: str = ""
    shared: bool = False
    set_id: Optional[int] = None
    place: Optional[int] = None
    value: Optional[str] = None


@dataclass
class Waiter:
    """One waiter of a key, in queue order. shared: it waits as a reader;
    set_keys: the keys of the set it waits for, in order (empty when it
    waits for this key alone)."""

    waited: float
    addr: str
    id: str = ""
    shared: bool = False
    set_keys: List[str] = field(default_factory=list)


@dataclass
class Queue:
    """A key's holders and waiters, as Q (and L) answer them. shared: the
    key is held by readers."""

    key: str
    holders: List[Holder] = field(default_factory=list)
    nwaiters: int = 0
    waiters: List[Waiter] = field(default_factory=list)
    limit: int = 1
    # stale, from a Watch: the watch had lost the cluster, and this, the
    # last state it read, may be out of date.
    stale: bool = False
    shared: bool = False

    @property
    def token(self) -> Optional[int]:
        """The first holder's token, None when nobody holds the key."""
        return self.holders[0].token if self.holders else None


def _secs(w: str) -> float:
    return float(w)


def parse_queue(key: str, body: List[str]) -> Queue:
    """Reads the words of a Q (or L) answer after its key; name=value
    words it does not know are skipped."""
    if len(body) < 3:
        raise BadLine(f"a queue answer wants TOKEN LEASELEFT NWAITERS, got {' '.join(body)!r}")
    q = Queue(key)
    # Words about one holder (by token) or one waiter (by its place from 1).
    by_token: Dict[str, Dict[int, str]] = {"id": {}, "set": {}, "place": {}, "value": {}}
    by_waiter: Dict[str, Dict[int, str]] = {"wid": {}, "wmode": {}, "wset": {}}
    try:
        if body[0] != "-":
            q.holders.append(Holder(int(body[0]), _secs(body[1]) if body[1] != "-" else 0.0))
        q.nwaiters = int(body[2])
        for w in body[3:]:
            name, eq, val = w.partition("=")
            if eq:
                if name == "limit":
                    q.limit = int(val)
                elif name == "holder":
                    t, _, left = val.partition(",")
                    q.holders.append(Holder(int(t), _secs(left)))
                elif name == "mode":
                    q.shared = val == "shared"
                elif name in by_token:
                    t, _, i = val.partition(",")
                    by_token[name][int(t)] = i
                elif name in by_waiter:
                    n, _, i = val.partition(",")
                    by_waiter[name][int(n)] = i
                continue
            waited, _, addr = w.partition(",")
            q.waiters.append(Waiter(_secs(waited), addr))
        for h in q.holders:
            h.id = by_token["id"].get(h.token, "")
            h.shared = q.shared
            s = by_token["set"].get(h.token)
            h.set_id = int(s) if s else None
            p = by_token["place"].get(h.token)
            h.place = int(p) if p else None
            v = by_token["value"].get(h.token)
            h.value = decode_value(v) if v else None
    except ValueError as e:
        raise BadLine(f"a queue answer this client cannot read ({e}): {' '.join(body)[:80]!r}") from None
    for i, wt in enumerate(q.waiters, 1):
        wt.id = by_waiter["wid"].get(i, "")
        wt.shared = by_waiter["wmode"].get(i) == "shared"
        ks = by_waiter["wset"].get(i)
        wt.set_keys = [decode_value(k) for k in ks.split("+")] if ks else []
    return q


class Peer(TypedDict):
    """One node of --peers as the node answering S sees it."""

    addr: str
    role: str
    up: bool
    seq: int  # its replication position, as last reported
    lag: int  # changes it is behind the active (0 when caught up or unknown)
    token: int  # its token high-water mark


class _StatusPeers(TypedDict):
    peers: List[Peer]


class Status(_StatusPeers, total=False):
    """A node's status (its S answer), typed; a field this client does not
    know stays the text it was sent as. peers is always there (empty when
    the node has none)."""

    self: str
    role: str  # active, standby, joining or handoff
    active: str  # the active's address, "" when none is known
    token: int
    seq: int
    uptime: float  # seconds
    keys: int
    waiters: int
    sticky: bool
    replication: str  # sync or async
    degraded: bool
    durability: str  # memory, or disk:MODE


_STATUS_INT = ("token", "seq", "keys", "waiters")
_STATUS_BOOL = ("sticky", "degraded")


def parse_status(fields: List[str]) -> Status:
    """Reads the key=value words of an S answer into a Status."""
    out: Dict[str, Any] = {"peers": []}
    for word in fields:
        k, eq, v = word.partition("=")
        if not eq:
            continue
        try:
            if k in _STATUS_INT:
                out[k] = int(v)
            elif k in _STATUS_BOOL:
                out[k] = v == "true"
            elif k == "uptime":
                out[k] = float(v)
            elif k == "active":
                out[k] = "" if v == "-" else v
            elif k == "peer":
                p = v.split(",")
                if len(p) != 6:
                    raise ValueError("want ADDR,ROLE,up|down,SEQ,LAG,TOKEN")
                out["peers"].append(Peer(addr=p[0], role=p[1], up=p[2] == "up", seq=int(p[3]), lag=int(p[4]), token=int(p[5])))
            else:
                out[k] = out[k] + " " + v if k in out else v
        except ValueError as e:
            raise BadLine(f"status field {word!r}: {e}") from None
    return out  # type: ignore[return-value]


def id_name(id_: str) -> str:
    """The part of an id before its last '#', for people; the id without one."""
    i = id_.rfind("#")
    return id_[:i] if i >= 0 else id_


def split_addrs(addrs: Union[str, List[str], Tuple[str, ...]]) -> List[str]:
    if isinstance(addrs, str):
        items = addrs.split(",")
    else:
        items = list(addrs)
    if not items:
        raise ValueError("lockd: no address given; pass at least one HOST:PORT of a lockd node (or set LOCKD_ADDR)")
    out: List[str] = []
    for i, a in enumerate(items):
        a = a.strip()
        if not a:
            raise ValueError(f"lockd: address {i + 1} of {len(items)} is blank; pass HOST:PORT for every node")
        host, sep, port = a.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"lockd: address {a!r} is not HOST:PORT; write it like 127.0.0.1:7070")
        if a not in out:
            out.append(a)
    return out


def host_port(addr: str) -> Tuple[str, int]:
    host, _, port = addr.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)
