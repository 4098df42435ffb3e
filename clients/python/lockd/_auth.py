"""Connection set-up: TLS, the secret handshake (I) and the first
keep-alive, done on a fresh blocking socket before the I/O thread takes it."""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import ssl
from typing import Generator, List, Optional, Tuple

from ._errors import AuthError, Error


class NoAnswer(Error):
    """A node took the connection but answered nothing in time."""


def nonce() -> str:
    return os.urandom(16).hex()


def proof(secret: bytes, side: str, role: str, target: str, a: str, b: str) -> str:
    msg = f"lockd-v1 {side}|{role}|{target}|{a}|{b}".encode()
    return hmac.new(secret, msg, hashlib.sha256).hexdigest()


def check_secret(b: bytes) -> bytes:
    b = b.strip()
    if not b:
        raise ValueError("lockd: the secret is empty; write one with: head -c 32 /dev/urandom | base64 > FILE")
    if len(b) < 16:
        raise ValueError(f"lockd: the secret is {len(b)} bytes, shorter than 16; make a longer one with: head -c 32 /dev/urandom | base64 > FILE")
    if len(b) > 1024:
        raise ValueError(f"lockd: the secret is {len(b)} bytes, longer than 1024")
    if any(c <= 0x20 or c >= 0x7F for c in b):
        raise ValueError("lockd: the secret holds a space, a control character or a non-ASCII byte; use printable ASCII, for example base64")
    return b


class LineReader:
    """Reads lines from a blocking socket, keeping what follows them."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    def line(self) -> bytes:
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                out = bytes(self.buf[: i + 1])
                del self.buf[: i + 1]
                return out
            if len(self.buf) > 1 << 20:
                raise Error("the node sent a line longer than 1 MiB; check that a lockd node, not another service, listens there")
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the node closed the connection")
            self.buf += chunk


def handshake(role: str, secret: bytes, addr: str) -> Generator[bytes, bytes, None]:
    """The secret handshake (I) without I/O: it yields each line to send
    and is sent each line read back; it returns once both sides proved
    the secret, and raises AuthError when they did not."""
    cn = nonce()
    f = _i_words((yield f"I {role} hello {cn} {addr}\n".encode()), role, addr)
    if len(f) >= 2 and f[0] == "ok":
        raise AuthError(
            f"{addr} asked for no proof of the secret and gave none of its own: it does not hold this secret "
            "(is it started without the matching --secret-file?)"
        )
    if len(f) != 2 or f[0] != "challenge":
        raise AuthError(f"{addr} answered {' '.join(f)!r} to the secret handshake; check that client and server versions match")
    sn = f[1]
    f = _i_words((yield f"I {role} proof {proof(secret, 'client', role, addr, sn, cn)}\n".encode()), role, addr)
    if len(f) != 3 or f[0] != "ok":
        raise AuthError(f"{addr} answered {' '.join(f)!r} to the proof of the secret")
    if not hmac.compare_digest(f[2], proof(secret, "server", role, addr, cn, sn)):
        raise AuthError(f"{addr}'s proof does not match this secret: its secret differs, or it is not the lockd it claims to be")


def _handshake(sock: socket.socket, r: LineReader, role: str, secret: bytes, addr: str) -> None:
    steps = handshake(role, secret, addr)
    out = next(steps)
    while True:
        sock.sendall(out)
        try:
            out = steps.send(r.line())
        except StopIteration:
            return


def _i_words(line: bytes, role: str, addr: str) -> List[str]:
    w = line.decode("utf-8", "replace").split()
    if len(w) >= 2 and w[0] == "I" and w[1] == role:
        return w[2:]
    if len(w) >= 2 and w[0] == "E":
        words = " ".join(w[3:] if len(w) > 2 and w[2] == "I:" else w[2:])
        raise AuthError(f"{addr} refused the secret for role {role}: {words}; pass the secret file the node was started with")
    raise AuthError(f"{addr} answered {' '.join(w)[:64]!r} to the secret handshake")


def silent_hello(addr: str, failure_timeout: float, plain: bool) -> str:
    """The words for a node that took the connection and did not answer
    the first status request; plain: the connection is not TLS, and a
    node that speaks TLS waits for the rest of a record in silence."""
    msg = f"{addr} took the connection but did not answer a status request within {failure_timeout:g}s (the failure timeout)"
    if plain:
        msg += "; a frozen node does that, and so does one that speaks TLS to a client without TLS (pass tls_ca= or tls=True)"
    return msg


def open_conn(
    addr: str,
    dial_timeout: float,
    failure_timeout: float,
    tls: Optional[ssl.SSLContext],
    server_name: Optional[str],
    secret: Optional[bytes],
    role: str,
) -> Tuple[socket.socket, bytes]:
    """Dials addr and makes the connection ready for requests: TLS, the
    secret, then a keep-alive (S -) answered within the failure timeout.
    Returns the socket and any bytes read past the keep-alive's answer."""
    host, _, port = addr.rpartition(":")
    h = host[1:-1] if host.startswith("[") else host
    sock = socket.create_connection((h, int(port)), timeout=dial_timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            try:
                sock = tls.wrap_socket(sock, server_hostname=server_name or h)
            except ssl.SSLError as e:
                raise AuthError(f"{addr}: TLS failed: {e}; check --tls-ca, the certificates and the server name") from None
            except socket.timeout:
                raise NoAnswer(f"{addr} took the connection but did not finish the TLS handshake within {dial_timeout:g}s") from None
        r = LineReader(sock)
        if secret is not None:
            try:
                _handshake(sock, r, role, secret, addr)
            except socket.timeout:
                raise NoAnswer(f"{addr} took the connection but did not answer the authentication within {dial_timeout:g}s") from None
        sock.settimeout(failure_timeout)
        sock.sendall(b"S -\n")
        try:
            line = r.line()
        except socket.timeout:
            raise NoAnswer(silent_hello(addr, failure_timeout, tls is None)) from None
        if not (line.startswith(b"S ") or line.startswith(b"E ")):
            raise Error(f"{addr} answered {line[:64]!r} to a status request; check that a lockd node, not another service, listens there")
        return sock, bytes(r.buf)
    except BaseException:
        sock.close()
        raise
