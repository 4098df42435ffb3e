// The errors every call may reject with: one class per thing that can
// go wrong, each with a code to test without instanceof (as Node.js's
// own errors have), all of them LockdError.

/** Every error of this library. `code` says which kind it is. */
export class LockdError extends Error {
  readonly code: string;
  constructor(message: string, code = "ELOCKD", options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** The acquire's wait elapsed without a grant: another client holds the key. */
export class TimeoutError extends LockdError {
  constructor(message: string) {
    super(message, "ETIMEOUT");
  }
}

/** The token does not hold the key (any more): released, expired, or never held it. */
export class NotHeldError extends LockdError {
  constructor(message: string) {
    super(message, "ENOTHELD");
  }
}

/** Every connection was tried and none could serve the call. */
export class UnavailableError extends LockdError {
  constructor(message: string, cause?: unknown) {
    super(message, "EUNAVAILABLE", { cause });
  }
}

/** The node refused the request (an E answer); `words` are its reason. */
export class RefusedError extends LockdError {
  readonly op: string;
  readonly key: string;
  readonly words: string;
  constructor(op: string, key: string, words: string, code = "EREFUSED") {
    super(`lockd refused ${opName(op)} ${key}: ${words}`, code);
    this.op = op;
    this.key = key;
    this.words = words;
  }
}

/** The key exists with another limit: use the limit its other holders use (queue() tells it). */
export class LimitMismatchError extends RefusedError {
  constructor(key: string, words: string) {
    super("A", key, words, "ELIMIT");
  }
}

/**
 * The node wants a secret or certificate this client does not have, or
 * refused the one it has (TLS failed, wrong secret, a role it lacks).
 */
export class AuthError extends LockdError {
  constructor(message: string, cause?: unknown) {
    super(message, "EAUTH", { cause });
  }
}

/** The caller's AbortSignal aborted the call; `cause` is the signal's reason. */
export class AbortError extends LockdError {
  constructor(message: string, cause?: unknown) {
    super(message, "ABORT_ERR", { cause });
  }
}

/** The client was closed. */
export class ClosedError extends LockdError {
  constructor(message = "the lockd client is closed; create a new Client to go on") {
    super(message, "ECLOSED");
  }
}

/** The arguments were refused before anything was sent (a bad key, lease, wait, limit). */
export class InvalidArgumentError extends LockdError {
  constructor(message: string) {
    super(message, "EINVALID");
  }
}

/**
 * The nodes disagree on which one is active: redirected from node to
 * node for longer than three failure timeouts (and more than 10 times)
 * in a row, or an acquire's wait ran out while its request was
 * redirected so. A retry a moment later usually finds it settled.
 */
export class DisagreeError extends LockdError {
  constructor(message: string) {
    super(message, "EDISAGREE");
  }
}

/** A node answered something this client cannot read: check that client and server versions match. */
export class ProtocolError extends LockdError {
  constructor(message: string) {
    super(message, "EPROTO");
  }
}

/** Why a held lock is lost: HoldLostError.reason. */
export type LostReason = "notheld" | "expired" | "released" | "max" | "closed";

/**
 * The reason of a Hold's signal when it aborts: the lock is no longer
 * (provably) held. `reason` says why.
 */
export class HoldLostError extends LockdError {
  readonly reason: LostReason;
  constructor(reason: LostReason, message: string, cause?: unknown) {
    super(message, "ELOST", { cause });
    this.reason = reason;
  }
}

export function opName(op: string): string {
  switch (op) {
    case "A":
      return "acquire";
    case "R":
      return "release";
    case "N":
      return "renew";
    case "Q":
      return "queue";
    case "K":
      return "keys";
    case "S":
      return "status";
    case "X":
      return "withdraw";
    case "L":
      return "watch";
    case "U":
      return "unwatch";
  }
  return "request " + op;
}
