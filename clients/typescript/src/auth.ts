// The I handshake: a secret proven by challenge and response, never
// sent, and the node's proof that it knows the secret too (package
// proto/auth has the same strings).

import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

export type Role = "client" | "admin" | "peer";

const roleRank: Record<string, number> = { client: 1, admin: 2, peer: 3 };

/** A nonce: 16 random bytes in lower-case hex. */
export function newNonce(): string {
  return randomBytes(16).toString("hex");
}

/** HMAC-SHA256(secret, "lockd-v1 SIDE|ROLE|TARGET|A|B"). */
export function proof(secret: Buffer, side: "client" | "server", role: Role, target: string, a: string, b: string): Buffer {
  return createHmac("sha256", secret).update(`lockd-v1 ${side}|${role}|${target}|${a}|${b}`).digest();
}

function validNonce(s: string): boolean {
  return /^[0-9a-f]{32}$/.test(s);
}

/**
 * One step of the client side of the handshake, fed each answer line in
 * turn. start() gives the first line to send; step() the next line to
 * send, or "" once the role is proven. It throws when the node refuses
 * or fails to prove the secret.
 */
export class Handshake {
  private readonly cnonce = newNonce();
  private snonce = "";
  constructor(
    private readonly secret: Buffer,
    private readonly role: Role,
    private readonly target: string,
  ) {}

  start(): string {
    return `I ${this.role} hello ${this.cnonce} ${this.target}\n`;
  }

  /** Reads one answer; returns the next line to send, or "" when done. */
  step(line: string): string {
    const w = line.split(" ").filter((x) => x !== "");
    if (w[0] === "E") {
      let msg = w.slice(2).join(" ");
      if (msg.startsWith("I: ")) msg = msg.slice(3);
      throw new HandshakeError(`the node refused the secret: ${msg}`);
    }
    if (w[0] !== "I" || w[1] !== this.role) throw new HandshakeError(`unexpected answer to I ${this.role}: ${clip(line)}`);
    const f = w.slice(2);
    if (this.snonce === "") {
      if (f[0] === "ok") {
        throw new HandshakeError(
          "the node asked for no proof and gave none of its own: it does not hold this secret (is it started without the matching --*-secret-file?)",
        );
      }
      if (f.length !== 2 || f[0] !== "challenge" || !validNonce(f[1])) {
        throw new HandshakeError(`unexpected answer to I ${this.role} hello: ${clip(line)}`);
      }
      this.snonce = f[1];
      const cp = proof(this.secret, "client", this.role, this.target, this.snonce, this.cnonce).toString("hex");
      return `I ${this.role} proof ${cp}\n`;
    }
    if (f.length !== 3 || f[0] !== "ok") throw new HandshakeError(`unexpected answer to I ${this.role} proof: ${clip(line)}`);
    if (!(roleRank[f[1]] >= roleRank[this.role])) throw new HandshakeError(`the node granted ${clip(f[1])} for role ${this.role}`);
    const want = proof(this.secret, "server", this.role, this.target, this.cnonce, this.snonce);
    const got = /^[0-9a-f]{64}$/.test(f[2]) ? Buffer.from(f[2], "hex") : Buffer.alloc(0);
    if (got.length !== want.length || !timingSafeEqual(got, want)) {
      throw new HandshakeError("the node's proof does not match this secret: its secret differs, or it is not the lockd it claims to be");
    }
    return "";
  }
}

export class HandshakeError extends Error {}

function clip(s: string): string {
  return JSON.stringify(s.length > 60 ? s.slice(0, 60) + "..." : s);
}
