package proto

import (
	"fmt"
	"time"
)

// arg is a kind of word a request takes after its key: a row of opTable
// lists the kinds its op takes, in order, and readArgs reads each word
// by its kind. Kinds, not ops, are what its switch dispatches on, so the
// ops are listed once, in the table; and no parser is called through a
// function value, which would move the request to the heap: Parse
// allocates nothing for an acquire but its key (and its id= if any).
type arg uint8

const (
	argLease         arg = iota // A, N: seconds, more than 0: Lease
	argWait                     // A: seconds, or - (never queue): Wait, Try
	argAcquireOption            // A: limit=N, id=ID, key=KEY, mode=M, value=V or ref=R
	argRenewOption              // N: value=V
	argToken                    // R, N: the holder's token: Token
	argID                       // X: the acquire's id: ID
	argAddr                     // H: where to hand off to: Addr
	argSecret                   // I: a word of the handshake, never echoed: Args
	argBeatRole                 // P: the sender's role (Peer.Beat)
	argBeatToken                // P: its token high-water mark
	argBeatSeq                  // P: its replication position
	argBeatFlags                // P: its flags
	argLater                    // P: a word of a later version, skipped
	argPeerToken                // Y, O, C: Peer.Token
	argAge                      // C: seconds: Peer.Age
	argSeq                      // V: Peer.Seq
)

// readArgs reads args, the words of line after a request's key, into
// req by the kinds of its row, the last kind reading every word after it
// too; or says why it cannot, naming the field.
func readArgs(row *opRow, req *Request, line []byte, args []span) string {
	takes := row.takes
	for i, s := range args {
		w := s.of(line)
		k := takes[len(takes)-1]
		if i < len(takes) {
			k = takes[i]
		}
		var msg string
		switch k {
		case argLease:
			msg = parseLease(&req.Lease, w)
		case argWait:
			if len(w) == 1 && w[0] == '-' {
				req.Try = true
			} else {
				msg = parseSeconds(&req.Wait, "wait", w)
			}
		case argAcquireOption:
			msg = parseAcquireOption(req, w)
		case argRenewOption:
			if len(w) < 6 || string(w[:6]) != "value=" {
				msg = fmt.Sprintf("%q: want value=V after the lease", clip(w))
			} else {
				msg = parseValueInto(req, string(w[6:]))
			}
		case argToken:
			msg = parseTokenInto(&req.Token, "token", w)
		case argID:
			if msg = CheckID(string(w)); msg != "" {
				msg = fmt.Sprintf("id %q: %s", clip(w), msg)
			} else {
				req.ID = string(w)
			}
		case argAddr:
			if hasControl(w) {
				return fmt.Sprintf("addr %q has a tab or control character", clip(w))
			}
			req.Addr = string(w)
		case argSecret:
			if hasControl(w) {
				// Not echoed: the word may be a secret.
				return "a word after the role has a tab or control character"
			}
			req.Args = append(req.Args, string(w))
		default:
			msg = parsePeerArg(k, req.Peer, w)
		}
		if msg != "" {
			return msg
		}
	}
	return ""
}

// parsePeerArg reads a word of a peer message into m.
func parsePeerArg(k arg, m *PeerMessage, w []byte) string {
	var msg string
	switch k {
	case argBeatRole:
		// The role opens a heartbeat, which is from the message's sender.
		m.Beat.From = m.From
		if m.Beat.Role, msg = checkRole(string(w)); msg != "" {
			return "role " + msg
		}
	case argBeatToken:
		return parseTokenInto(&m.Beat.Token, "token", w)
	case argBeatSeq:
		return parseTokenInto(&m.Beat.Seq, "seq", w)
	case argBeatFlags:
		if m.Beat.Flags, msg = parseFlags(string(w)); msg != "" {
			return "flags " + msg
		}
	case argLater:
		if hasControl(w) {
			return fmt.Sprintf("%q has a tab or control character", clip(w))
		}
	case argPeerToken:
		return parseTokenInto(&m.Token, "token", w)
	case argAge:
		return parseSeconds(&m.Age, "age", w)
	case argSeq:
		return parseTokenInto(&m.Seq, "seq", w)
	}
	return ""
}

// parseLease reads a lease, which must be more than 0.
func parseLease(d *time.Duration, w []byte) string {
	if msg := parseSeconds(d, "lease", w); msg != "" || *d > 0 {
		return msg
	}
	return errLeaseNotPositive
}

const errLeaseNotPositive = "lease must be greater than 0 seconds"

// parseSeconds reads a duration into d, or says why not naming it.
func parseSeconds(d *time.Duration, name string, w []byte) string {
	var msg string
	if *d, msg = ParseSeconds(w); msg != "" {
		return name + " " + msg
	}
	return ""
}

// parseTokenInto reads a u64 into v, or says why not naming it.
func parseTokenInto(v *uint64, name string, w []byte) string {
	var msg string
	if *v, msg = parseToken(w); msg != "" {
		return name + " " + msg
	}
	return ""
}
