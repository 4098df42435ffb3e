package proto

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The peer messages: heartbeats (P), the subscription to a replication
// stream (Y), its records (record.go), the successor's confirmation (O),
// acknowledgements (V) and the settling of a handoff (C), as doc.go
// spells them. Parse reads the requests among them into a PeerMessage,
// as its table of ops (ops.go) says. The Append functions write one line
// ending in '\n'; they trust their caller to pass words the grammar
// allows (addresses and roles without spaces or control characters), as
// the other Append functions do. The Parse functions trust nothing: each
// refusal names the field that was wrong, so that a node that meets a
// peer of another version, or a person typing at nc, learns what it sent
// rather than reading a silent 0.

// The words of heartbeat flags and of the H record.
const (
	flagSticky  = "sticky"
	flagSynced  = "synced"
	flagFresh   = "fresh"
	flagRestore = "restored"
	flagPinned  = "pinned"  // pinned:MS in a heartbeat; the last word of a pinned H record
	flagBase    = "base"    // base:TOKEN in an active's heartbeat
	flagBaseSeq = "bseq"    // bseq:SEQ in an active's heartbeat
	flagPaused  = "paused"  // a node that did not run for a while, not yet heard its peers
	flagPrev    = "prev"    // prev:ADDR, the node an active took the role from
	flagTop     = "top"     // top:TOKEN in a heartbeat
	flagRound   = "round"   // round:N in a heartbeat, echoed in its answer
	flagVersion = "v"       // v:N, the peer messages a node speaks
	flagInSync  = "isr"     // isr:ADDR+ADDR, the standbys an active waits for
	wordSynced  = "synced"  // the first field of the Y record
	wordExpired = "expired" // the last field of an F record whose lease ran out
)

// maxPinnedMS is the largest pinned:MS that fits a time.Duration.
const maxPinnedMS = uint64(1<<63-1) / uint64(time.Millisecond)

// BeatFlags are the flags of a heartbeat.
type BeatFlags struct {
	Sticky bool // gave the role up by command
	Synced bool // has applied a snapshot
	Fresh  bool // active that started empty and has fed no standby yet
	// Restored: the node started from the state of its data directory
	// and has neither synced from an active nor been one since.
	Restored bool
	Pinned   bool // active by a handoff asked for by command
	// PinnedAge, with Pinned, is how long ago the role was pinned. It is a
	// duration rather than a time because the peers' clocks differ; it
	// travels in whole milliseconds.
	PinnedAge time.Duration
	// Base, on an active, is the newest token of the state it began
	// serving from (base:TOKEN on the wire): two actives that meet compare
	// it with each other's newest token to tell which state is newer.
	Base uint64
	// BaseSeq, on an active, is the replication position of the state it
	// began serving from (bseq:SEQ): with Base, it tells whether the
	// other active's renewals and releases, not only its grants, came
	// after that state (PeerVersion 4).
	BaseSeq uint64
	// Top is the newest token of the node's lock state: granted there, or
	// applied from replication (top:TOKEN).
	Top uint64
	// Paused: the node did not run for a failure timeout (stopped, a VM
	// paused) and has not heard its peers since: what it says of its
	// role is as of before, and another may have taken over meanwhile.
	Paused bool
	// Prev, on an active, is the node whose state it began serving from:
	// the active it followed when it took the role (prev:ADDR).
	Prev string
	// Round numbers a heartbeat (round:N), and an answer echoes the round
	// of the heartbeat it answers, so the sender knows how fresh it is.
	Round uint64
	// Version is the peer messages the node speaks (v:N; none is 1).
	Version int
	// InSync, on an active with synchronous replication, lists the
	// standbys whose acknowledgements it waits for (isr:ADDR+ADDR): the
	// ones to promote first if it fails.
	InSync []string
}

// Beat is a heartbeat P, request or answer.
type Beat struct {
	From   string // request: the sender; answer: the request's FROM, echoed
	Self   string // answer only: the answering node
	Role   string // one word: no '=', ',' or control character
	Token  uint64 // the node's token high-water mark
	Seq    uint64 // the node's replication position
	Active string // answer only: the active the node knows of, "" when none (written "-")
	Flags  BeatFlags
}

// AppendBeat writes the heartbeat request "P FROM ROLE TOKEN SEQ FLAGS".
func AppendBeat(b []byte, bt Beat) []byte {
	b = append(b, byte(OpBeat), ' ')
	b = append(b, bt.From...)
	b = append(b, ' ')
	b = append(b, bt.Role...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, bt.Token, 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, bt.Seq, 10)
	b = append(b, ' ')
	b = appendFlags(b, bt.Flags)
	return append(b, '\n')
}

// AppendBeatAnswer writes the heartbeat answer
// "P FROM SELF ROLE TOKEN SEQ ACTIVE FLAGS".
func AppendBeatAnswer(b []byte, bt Beat) []byte {
	b = append(b, byte(OpBeat), ' ')
	b = append(b, bt.From...)
	b = append(b, ' ')
	b = append(b, bt.Self...)
	b = append(b, ' ')
	b = append(b, bt.Role...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, bt.Token, 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, bt.Seq, 10)
	b = append(b, ' ')
	if bt.Active == "" {
		b = append(b, WordNone...)
	} else {
		b = append(b, bt.Active...)
	}
	b = append(b, ' ')
	b = appendFlags(b, bt.Flags)
	return append(b, '\n')
}

// appendFlags writes f as "-" or a comma list, always in the order
// sticky, synced, fresh, restored, paused, pinned:MS, base:TOKEN,
// bseq:SEQ, top:TOKEN, prev:ADDR, round:N, v:N, isr:ADDR+ADDR.
func appendFlags(b []byte, f BeatFlags) []byte {
	start := len(b)
	flag := func(name string) {
		if len(b) > start {
			b = append(b, ',')
		}
		b = append(b, name...)
	}
	if f.Sticky {
		flag(flagSticky)
	}
	if f.Synced {
		flag(flagSynced)
	}
	if f.Fresh {
		flag(flagFresh)
	}
	if f.Restored {
		flag(flagRestore)
	}
	if f.Paused {
		flag(flagPaused)
	}
	if f.Pinned {
		flag(flagPinned)
		b = append(b, ':')
		// A clock stepping back cannot make the role pinned in the future.
		b = strconv.AppendInt(b, max(int64(f.PinnedAge/time.Millisecond), 0), 10)
	}
	if f.Base != 0 {
		flag(flagBase)
		b = append(b, ':')
		b = strconv.AppendUint(b, f.Base, 10)
	}
	if f.BaseSeq != 0 {
		flag(flagBaseSeq)
		b = append(b, ':')
		b = strconv.AppendUint(b, f.BaseSeq, 10)
	}
	if f.Top != 0 {
		flag(flagTop)
		b = append(b, ':')
		b = strconv.AppendUint(b, f.Top, 10)
	}
	if f.Prev != "" {
		flag(flagPrev)
		b = append(b, ':')
		b = append(b, f.Prev...)
	}
	if f.Round != 0 {
		flag(flagRound)
		b = append(b, ':')
		b = strconv.AppendUint(b, f.Round, 10)
	}
	if f.Version > 1 {
		flag(flagVersion)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(f.Version), 10)
	}
	if len(f.InSync) > 0 {
		flag(flagInSync)
		b = append(b, ':')
		for i, a := range f.InSync {
			if i > 0 {
				b = append(b, '+')
			}
			b = append(b, a...)
		}
	}
	if len(b) == start {
		b = append(b, WordNone...)
	}
	return b
}

// parseFlags reads the FLAGS word of a heartbeat. A flag it does not know
// is skipped, so that older nodes read newer ones; a known flag written
// wrong is refused, as is an empty item.
func parseFlags(s string) (BeatFlags, string) {
	var f BeatFlags
	if s == WordNone {
		return f, ""
	}
	if hasControl([]byte(s)) {
		return f, fmt.Sprintf("%q has a tab or control character", clipString(s))
	}
	for rest := s; ; {
		item, more, found := strings.Cut(rest, ",")
		if item == "" {
			return BeatFlags{}, fmt.Sprintf("%q has an empty flag (want - or a comma list like sticky,synced)", clipString(s))
		}
		if msg := parseFlag(&f, item); msg != "" {
			return BeatFlags{}, fmt.Sprintf("%q: %s", clipString(s), msg)
		}
		if !found {
			return f, ""
		}
		rest = more
	}
}

// parseFlag reads one item of a heartbeat's flags, NAME or NAME:ARG,
// into f, or says why it cannot.
func parseFlag(f *BeatFlags, item string) string {
	name, arg, hasArg := strings.Cut(item, ":")
	if p := boolFlag(f, name); p != nil {
		// With an argument it is a later version's flag of that name,
		// which this version does not know.
		*p = *p || !hasArg
		return ""
	}
	if p := numberFlag(f, name); p != nil {
		n, msg := parseToken([]byte(arg))
		if !hasArg || msg != "" {
			return name + " wants a number, " + name + ":N"
		}
		*p = n
		return ""
	}
	switch name {
	case flagPinned:
		if !hasArg {
			return "pinned wants its age, pinned:MS"
		}
		ms, msg := parseToken([]byte(arg))
		if msg == "" && ms > maxPinnedMS {
			msg = fmt.Sprintf("%q is more milliseconds than a duration holds", clipString(arg))
		}
		if msg != "" {
			return "the MS of pinned:MS " + msg
		}
		f.Pinned, f.PinnedAge = true, time.Duration(ms)*time.Millisecond
	case flagVersion:
		v, err := strconv.Atoi(arg)
		if !hasArg || err != nil || v < 1 {
			return "v wants a version, v:N"
		}
		f.Version = v
	case flagPrev:
		if arg == "" {
			return "prev wants an address, prev:ADDR"
		}
		f.Prev = arg
	case flagInSync:
		if !hasArg {
			return "isr wants addresses, isr:ADDR+ADDR"
		}
		for _, a := range strings.Split(arg, "+") {
			if a == "" {
				return "isr has an empty address"
			}
			f.InSync = append(f.InSync, a)
		}
	}
	return ""
}

// boolFlag is the field of the flag name that is set by its presence
// alone, nil when name is no such flag.
func boolFlag(f *BeatFlags, name string) *bool {
	switch name {
	case flagSticky:
		return &f.Sticky
	case flagSynced:
		return &f.Synced
	case flagFresh:
		return &f.Fresh
	case flagRestore:
		return &f.Restored
	case flagPaused:
		return &f.Paused
	}
	return nil
}

// numberFlag is the field of the flag name that carries a number,
// name:N, nil when name is no such flag.
func numberFlag(f *BeatFlags, name string) *uint64 {
	switch name {
	case flagBase:
		return &f.Base
	case flagBaseSeq:
		return &f.BaseSeq
	case flagTop:
		return &f.Top
	case flagRound:
		return &f.Round
	}
	return nil
}

// PeerMessage is a message one lockd node sends another (doc.go, "Peer
// messages"), as Parse reads it. Only the fields of its op are set.
type PeerMessage struct {
	From  string        // the sender's address as written in --peers: the line's key
	Beat  Beat          // P: the heartbeat (From is From)
	Token uint64        // Y, O: the sender's token high-water mark; C: the handoff's token
	Seq   uint64        // V: every record of the stream up to Seq is applied
	Age   time.Duration // C: how long ago the handoff began, 0 when not said (before PeerVersion 4)
}

// ParseBeatAnswer reads a heartbeat answer
// "P FROM SELF ROLE TOKEN SEQ ACTIVE FLAGS". Fields after FLAGS are
// tolerated, for later versions. An E answer (the node does not count
// the sender among its peers) is an error carrying the node's words.
func ParseBeatAnswer(a Answer) (Beat, error) {
	fail := func(msg string) (Beat, error) { return Beat{}, errors.New("heartbeat answer " + msg) }
	switch a.Kind {
	case OpBeat:
	case KindError:
		return fail("refused: " + a.ErrorText())
	default:
		return fail("of kind " + a.Kind.String() + ", want P")
	}
	if _, msg := checkAddr(a.Key); msg != "" {
		return fail("from " + msg)
	}
	f := a.Fields
	if len(f) < 6 {
		return fail("wants P FROM SELF ROLE TOKEN SEQ ACTIVE FLAGS, got " + strconv.Itoa(len(f)) + " field(s) after FROM")
	}
	bt := Beat{From: a.Key}
	var msg string
	if bt.Self, msg = checkAddr(f[0]); msg != "" {
		return fail("self " + msg)
	}
	if bt.Role, msg = checkRole(f[1]); msg != "" {
		return fail("role " + msg)
	}
	if bt.Token, msg = parseToken([]byte(f[2])); msg != "" {
		return fail("token " + msg)
	}
	if bt.Seq, msg = parseToken([]byte(f[3])); msg != "" {
		return fail("seq " + msg)
	}
	if f[4] != WordNone {
		if bt.Active, msg = checkAddr(f[4]); msg != "" {
			return fail("active " + msg)
		}
	}
	if bt.Flags, msg = parseFlags(f[5]); msg != "" {
		return fail("flags " + msg)
	}
	return bt, nil
}

// checkRole returns s when it can be a role, or why not. A role is one
// word that also travels inside S answers, in role=ROLE and in the comma
// list of a peer= field, so it holds neither '=' nor ','.
func checkRole(s string) (string, string) {
	switch {
	case s == "":
		return "", "is empty"
	case len(s) > MaxKeyLen:
		return "", fmt.Sprintf("%q is longer than %d bytes", clipString(s), MaxKeyLen)
	case strings.ContainsAny(s, " =,") || hasControl([]byte(s)):
		return "", fmt.Sprintf("%q is not one word without '=', ',' or control characters", clipString(s))
	}
	return s, ""
}

// checkAddr returns s when it can be a node's address, which the grammar
// carries like a key, or why not.
func checkAddr(s string) (string, string) {
	if msg := CheckKey([]byte(s)); msg != "" {
		return "", fmt.Sprintf("%q %s", clipString(s), strings.TrimPrefix(msg, "key "))
	}
	return s, ""
}

// AppendSync writes the Y request a standby sends to subscribe to the
// active's state: "Y FROM TOKEN".
func AppendSync(b []byte, from string, token uint64) []byte {
	b = append(b, byte(OpSync), ' ')
	b = append(b, from...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, token, 10)
	return append(b, '\n')
}

// AppendTakeover writes the O line the successor sends on its stream
// once it serves as the active: "O FROM TOKEN".
func AppendTakeover(b []byte, from string, token uint64) []byte {
	b = append(b, byte(OpTakeover), ' ')
	b = append(b, from...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, token, 10)
	return append(b, '\n')
}

// ParseHandoffAnswer reads the answer to H, "H label ok NEWACTIVE", and
// returns NEWACTIVE. An E answer is an error carrying the node's words;
// an M answer is an error naming the address of the active, where the
// request should have gone.
func ParseHandoffAnswer(a Answer) (newActive string, err error) {
	switch a.Kind {
	case OpHandoff:
	case KindError:
		return "", errors.New("handoff refused: " + a.ErrorText())
	case KindMoved:
		if len(a.Fields) != 1 {
			return "", errors.New("handoff answered M without one address: " + strconv.Quote(clipString(strings.Join(a.Fields, " "))))
		}
		return "", errors.New("handoff sent to a node that is not active: the active is at " + a.Fields[0])
	default:
		return "", errors.New("handoff answered with kind " + a.Kind.String() + ", want H, M or E")
	}
	if len(a.Fields) != 2 || a.Fields[0] != WordOK {
		return "", errors.New("handoff answer wants H LABEL ok NEWACTIVE, got " + strconv.Quote(clipString(strings.Join(a.Fields, " "))) + " after the label")
	}
	addr, msg := checkAddr(a.Fields[1])
	if msg != "" {
		return "", errors.New("handoff answer new active " + msg)
	}
	return addr, nil
}

func clipString(s string) string {
	if len(s) > 32 {
		return clip([]byte(s[:33]))
	}
	return clip([]byte(s))
}

// AppendApplied writes a standby's acknowledgement "V FROM SEQ": every
// record of its stream up to SEQ is applied.
func AppendApplied(b []byte, from string, seq uint64) []byte {
	b = append(b, byte(OpApplied), ' ')
	b = append(b, from...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, seq, 10)
	return append(b, '\n')
}
