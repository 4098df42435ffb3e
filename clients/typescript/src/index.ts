// lockd's client for Node.js: locks with fencing tokens, semaphores,
// held locks that renew themselves, leader election and watches, over
// lockd's line protocol, with the official clients' connection rules.

export {
  Client,
  Watch,
  MAX_NAME_LEN,
  type ClientOptions,
  type TLSOptions,
  Lock,
  LockSet,
  type LockRef,
  type AcquireOptions,
  type TryAcquireOptions,
  type AcquireAllOptions,
  type TryAcquireAllOptions,
  type CallOptions,
  type Status,
  type PeerStatus,
} from "./client.js";
export { Hold, HoldSet, Election, Observation, type HoldOptions, type HoldAllOptions, type Leader } from "./hold.js";
export {
  LockdError,
  TimeoutError,
  NotHeldError,
  UnavailableError,
  RefusedError,
  LimitMismatchError,
  AuthError,
  AbortError,
  ClosedError,
  InvalidArgumentError,
  DisagreeError,
  ProtocolError,
  HoldLostError,
  type LostReason,
} from "./errors.js";
export type { QueueState, Holder, Waiter } from "./wire.js";
export type { Role } from "./auth.js";
