package proto

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The peer messages: heartbeats (P), the replication stream (Y, G, F, W,
// H, M) and the successor's confirmation (O), as doc.go spells them. The
// Append functions write one line ending in '\n'; they trust their caller
// to pass words the grammar allows (addresses and roles without spaces or
// control characters), as the other Append functions do. The Parse
// functions trust nothing: each refusal names the field that was wrong,
// so that a node that meets a peer of another version, or a person typing
// at nc, learns what it sent rather than reading a silent 0.

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
		name, arg, hasArg := strings.Cut(item, ":")
		switch {
		case item == "":
			return BeatFlags{}, fmt.Sprintf("%q has an empty flag (want - or a comma list like sticky,synced)", clipString(s))
		case name == flagPinned:
			if !hasArg {
				return BeatFlags{}, fmt.Sprintf("%q: pinned wants its age, pinned:MS", clipString(s))
			}
			ms, msg := parseToken([]byte(arg))
			if msg == "" && ms > maxPinnedMS {
				msg = fmt.Sprintf("%q is more milliseconds than a duration holds", clipString(arg))
			}
			if msg != "" {
				return BeatFlags{}, fmt.Sprintf("%q: the MS of pinned:MS %s", clipString(s), msg)
			}
			f.Pinned, f.PinnedAge = true, time.Duration(ms)*time.Millisecond
		case name == flagBase || name == flagTop || name == flagRound || name == flagBaseSeq:
			tok, msg := parseToken([]byte(arg))
			if !hasArg || msg != "" {
				return BeatFlags{}, fmt.Sprintf("%q: %s wants a number, %s:N", clipString(s), name, name)
			}
			switch name {
			case flagBase:
				f.Base = tok
			case flagBaseSeq:
				f.BaseSeq = tok
			case flagTop:
				f.Top = tok
			default:
				f.Round = tok
			}
		case name == flagVersion:
			v, err := strconv.Atoi(arg)
			if !hasArg || err != nil || v < 1 {
				return BeatFlags{}, fmt.Sprintf("%q: v wants a version, v:N", clipString(s))
			}
			f.Version = v
		case name == flagPrev:
			if !hasArg || arg == "" {
				return BeatFlags{}, fmt.Sprintf("%q: prev wants an address, prev:ADDR", clipString(s))
			}
			f.Prev = arg
		case name == flagInSync:
			if !hasArg {
				return BeatFlags{}, fmt.Sprintf("%q: isr wants addresses, isr:ADDR+ADDR", clipString(s))
			}
			for _, a := range strings.Split(arg, "+") {
				if a == "" {
					return BeatFlags{}, fmt.Sprintf("%q: isr has an empty address", clipString(s))
				}
				f.InSync = append(f.InSync, a)
			}
		case hasArg:
			// Only pinned takes an argument; a later version may give
			// one to another flag, which this version does not know.
		case name == flagSticky:
			f.Sticky = true
		case name == flagSynced:
			f.Synced = true
		case name == flagFresh:
			f.Fresh = true
		case name == flagRestore:
			f.Restored = true
		case name == flagPaused:
			f.Paused = true
		}
		if !found {
			return f, ""
		}
		rest = more
	}
}

// ParseBeat reads a heartbeat request from what Parse made of its line
// (req.Key is FROM, req.Args the words after it). Words after FLAGS are
// tolerated, for later versions. A refusal is a *ParseError, so that a
// node can answer it with E like any other.
func ParseBeat(req Request) (Beat, error) {
	fail := func(msg string) (Beat, error) {
		return Beat{}, &ParseError{Op: OpBeat, Key: keyOrNone(req.Key), Msg: msg}
	}
	if req.Op != OpBeat {
		return fail("not a heartbeat: op " + req.Op.String())
	}
	if _, msg := checkAddr(req.Key); msg != "" {
		return fail("from " + msg)
	}
	if len(req.Args) < 4 {
		return fail("want P FROM ROLE TOKEN SEQ FLAGS, got " + strconv.Itoa(len(req.Args)) + " word(s) after FROM")
	}
	bt := Beat{From: req.Key}
	var msg string
	if bt.Role, msg = checkRole(req.Args[0]); msg != "" {
		return fail("role " + msg)
	}
	if bt.Token, msg = parseToken([]byte(req.Args[1])); msg != "" {
		return fail("token " + msg)
	}
	if bt.Seq, msg = parseToken([]byte(req.Args[2])); msg != "" {
		return fail("seq " + msg)
	}
	if bt.Flags, msg = parseFlags(req.Args[3]); msg != "" {
		return fail("flags " + msg)
	}
	return bt, nil
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

// Record is one line of a replication stream (doc.go, "Peer
// replication"). Only the fields of its Kind are set.
type Record struct {
	Kind  Op     // RecHeld, RecFree, RecMark, RecSynced, RecHandoff, KindMoved
	Limit int    // G: the key's limit (0 when not given: 1)
	ID    string // G: the acquire's id, "" when none; J, D: the waiter's
	Key   string // G, F: the key
	// Expired, on F, says the holder's lease ran out; a plain F is a
	// release (PeerVersion 4; older versions wrote F for both).
	Expired bool
	Token   uint64        // G, F: the holder's token; W, Y-synced, H: the high-water mark
	Lease   time.Duration // G: lease left; J: the waiter's lease
	Wait    time.Duration // J: the wait it has left, 0 forever
	Seq     uint64        // W, Y-synced, H: the active's replication position
	From    string        // Y-synced, H: the standby's address (the line's key); M: see Addr
	Pinned  bool          // H: the handoff was asked for by command
	// Addr, for M, is where the role went. The active ends a stream it
	// stops feeding with "M - addr" (From ""); a node that is not active
	// answers the Y request itself with "M FROM addr" (From set), on the
	// same connection, so a standby reads both as records.
	Addr string
}

// AppendRecord writes r as one stream line. G and F, the records of the
// hot path, are written in place without allocating; the others, a few a
// second, by appendControlRecord. It panics on a Kind that is not a
// record: that is a bug of the caller, and a line of another kind would
// corrupt the standby's stream.
func AppendRecord(b []byte, r Record) []byte {
	switch r.Kind {
	case RecHeld:
		b = append(b, byte(RecHeld), ' ')
		b = append(b, r.Key...)
		b = append(b, ' ')
		b = strconv.AppendUint(b, r.Token, 10)
		b = append(b, ' ')
		// Rounded up to the millisecond the line carries: a standby must
		// never see a lease end before the active would, or a node that
		// takes over could grant a place its holder still has.
		b = AppendSeconds(b, (r.Lease + time.Millisecond - 1).Truncate(time.Millisecond))
		if r.Limit > 1 {
			b = append(b, " limit="...)
			b = strconv.AppendInt(b, int64(r.Limit), 10)
		}
		if r.ID != "" {
			b = append(b, " id="...)
			b = append(b, r.ID...)
		}
		return append(b, '\n')
	case RecFree:
		b = append(b, byte(RecFree), ' ')
		b = append(b, r.Key...)
		b = append(b, ' ')
		b = strconv.AppendUint(b, r.Token, 10)
		if r.Expired {
			b = append(b, " "+wordExpired...)
		}
		return append(b, '\n')
	}
	return appendControlRecord(b, &r)
}

// appendControlRecord writes the records that are not a lock's: W, Y, H
// and M, and the waiters' J and D.
func appendControlRecord(b []byte, r *Record) []byte {
	switch r.Kind {
	case RecJoined:
		b = append(b, byte(RecJoined), ' ')
		b = append(b, r.Key...)
		b = append(b, ' ')
		b = append(b, r.ID...)
		b = append(b, ' ')
		b = AppendSeconds(b, (r.Lease + time.Millisecond - 1).Truncate(time.Millisecond))
		b = append(b, ' ')
		// Rounded up, so that a wait with something left never reads as
		// 0, forever.
		b = AppendSeconds(b, (r.Wait + time.Millisecond - 1).Truncate(time.Millisecond))
		if r.Limit > 1 {
			b = append(b, " limit="...)
			b = strconv.AppendInt(b, int64(r.Limit), 10)
		}
	case RecLeft:
		b = append(b, byte(RecLeft), ' ')
		b = append(b, r.Key...)
		b = append(b, ' ')
		b = append(b, r.ID...)
	case RecMark:
		b = append(b, byte(RecMark), ' ')
		b = append(b, WordNone...)
		b = appendTokenSeq(b, r.Token, r.Seq)
	case RecSynced:
		b = append(b, byte(RecSynced), ' ')
		b = append(b, r.From...)
		b = append(b, ' ')
		b = append(b, wordSynced...)
		b = appendTokenSeq(b, r.Token, r.Seq)
	case RecHandoff:
		b = append(b, byte(RecHandoff), ' ')
		b = append(b, r.From...)
		b = appendTokenSeq(b, r.Token, r.Seq)
		if r.Pinned {
			b = append(b, ' ')
			b = append(b, flagPinned...)
		}
	case KindMoved:
		from := r.From
		if from == "" {
			from = WordNone
		}
		return AppendMoved(b, from, r.Addr)
	default:
		panic("proto: AppendRecord of kind " + strconv.Quote(string(rune(r.Kind))) + ", which is not a replication record")
	}
	return append(b, '\n')
}

func appendTokenSeq(b []byte, token, seq uint64) []byte {
	b = append(b, ' ')
	b = strconv.AppendUint(b, token, 10)
	b = append(b, ' ')
	return strconv.AppendUint(b, seq, 10)
}

// ParseRecord reads one line of a replication stream, as ParseAnswer made
// it. It is strict: a wrong number of fields, a bad number, a key or an
// address that is not one, or a kind that is no record is an error naming
// what was wrong. An E line (the node refused the stream) is an error
// carrying the node's words.
func ParseRecord(a Answer) (Record, error) {
	r := Record{Kind: a.Kind}
	f := a.Fields
	fail := func(msg string) (Record, error) {
		return Record{}, errors.New(a.Kind.String() + " record " + msg)
	}
	want := func(form string) (Record, error) {
		return fail("wants " + form + ", got " + strconv.Itoa(len(f)) + " field(s) after " + strconv.Quote(clipString(a.Key)))
	}
	var msg string
	switch a.Kind {
	case RecHeld:
		if len(f) < 2 || len(f) > 4 {
			return want("G KEY TOKEN LEASELEFT [limit=N] [id=ID]")
		}
		var opt Request
		for _, w := range f[2:] {
			if msg := parseAcquireOption(&opt, []byte(w)); msg != "" {
				return fail(msg)
			}
		}
		if !opt.Ref.IsZero() {
			return fail("a record carries no ref=")
		}
		r.Limit, r.ID = opt.Limit, opt.ID
		if msg = CheckKey([]byte(a.Key)); msg != "" {
			return fail(msg)
		}
		r.Key = a.Key
		if r.Token, msg = parseToken([]byte(f[0])); msg != "" {
			return fail("token " + msg)
		}
		if r.Lease, msg = ParseSeconds([]byte(f[1])); msg != "" {
			return fail("lease " + msg)
		}
	case RecJoined, RecLeft:
		form := "J KEY ID LEASE WAITLEFT [limit=N]"
		if a.Kind == RecLeft {
			form = "D KEY ID"
		}
		if (a.Kind == RecLeft && len(f) != 1) || (a.Kind == RecJoined && (len(f) < 3 || len(f) > 4)) {
			return want(form)
		}
		if msg = CheckKey([]byte(a.Key)); msg != "" {
			return fail(msg)
		}
		r.Key = a.Key
		if msg = CheckID(f[0]); msg != "" {
			return fail("id " + msg)
		}
		r.ID = f[0]
		if a.Kind == RecLeft {
			break
		}
		if r.Lease, msg = ParseSeconds([]byte(f[1])); msg != "" {
			return fail("lease " + msg)
		}
		if r.Lease <= 0 {
			return fail("lease must be more than 0")
		}
		if r.Wait, msg = ParseSeconds([]byte(f[2])); msg != "" {
			return fail("wait " + msg)
		}
		if len(f) == 4 {
			var opt Request
			if msg := parseAcquireOption(&opt, []byte(f[3])); msg != "" || opt.Limit == 0 {
				if msg == "" {
					msg = fmt.Sprintf("%q: want limit=N", clipString(f[3]))
				}
				return fail(msg)
			}
			r.Limit = opt.Limit
		}
	case RecFree:
		if len(f) == 2 && f[1] == wordExpired {
			r.Expired = true
			f = f[:1]
		}
		if len(f) != 1 {
			return want("F KEY TOKEN [expired]")
		}
		if msg = CheckKey([]byte(a.Key)); msg != "" {
			return fail(msg)
		}
		r.Key = a.Key
		if r.Token, msg = parseToken([]byte(f[0])); msg != "" {
			return fail("token " + msg)
		}
	case RecMark:
		if a.Key != WordNone {
			return fail(fmt.Sprintf("key %q: want - (W - TOKEN SEQ)", clipString(a.Key)))
		}
		if len(f) != 2 {
			return want("W - TOKEN SEQ")
		}
		if r.Token, msg = parseToken([]byte(f[0])); msg != "" {
			return fail("token " + msg)
		}
		if r.Seq, msg = parseToken([]byte(f[1])); msg != "" {
			return fail("seq " + msg)
		}
	case RecSynced:
		if len(f) != 3 || f[0] != wordSynced {
			if len(f) == 3 {
				return fail(fmt.Sprintf("word %q: want Y FROM synced TOKEN SEQ", clipString(f[0])))
			}
			return want("Y FROM synced TOKEN SEQ")
		}
		if r.From, msg = checkAddr(a.Key); msg != "" {
			return fail("from " + msg)
		}
		if r.Token, msg = parseToken([]byte(f[1])); msg != "" {
			return fail("token " + msg)
		}
		if r.Seq, msg = parseToken([]byte(f[2])); msg != "" {
			return fail("seq " + msg)
		}
	case RecHandoff:
		if len(f) != 2 && len(f) != 3 {
			return want("H FROM TOKEN SEQ [pinned]")
		}
		if r.From, msg = checkAddr(a.Key); msg != "" {
			return fail("from " + msg)
		}
		if r.Token, msg = parseToken([]byte(f[0])); msg != "" {
			return fail("token " + msg)
		}
		if r.Seq, msg = parseToken([]byte(f[1])); msg != "" {
			return fail("seq " + msg)
		}
		if len(f) == 3 {
			if f[2] != flagPinned {
				return fail(fmt.Sprintf("word %q: want pinned or nothing after SEQ", clipString(f[2])))
			}
			r.Pinned = true
		}
	case KindMoved:
		if len(f) != 1 {
			return want("M - ADDR")
		}
		if a.Key != WordNone {
			if r.From, msg = checkAddr(a.Key); msg != "" {
				return fail("from " + msg)
			}
		}
		if r.Addr, msg = checkAddr(f[0]); msg != "" {
			return fail("addr " + msg)
		}
	case KindError:
		return Record{}, errors.New("stream refused: " + a.ErrorText())
	default:
		return Record{}, errors.New("unknown record kind " + strconv.Quote(a.Kind.String()) + " (want G, F, J, D, W, Y, H or M)")
	}
	return r, nil
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
	b = append(b, byte(RecTakeover), ' ')
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

func keyOrNone(k string) string {
	if CheckKey([]byte(k)) != "" {
		return WordNone
	}
	return k
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

// RecordFor returns r as a node that speaks peer messages of version v
// reads it, without the words later versions added; false when such a
// node cannot hold what r says at all (a semaphore, before version 2).
func RecordFor(v int, r Record) (Record, bool) {
	if v < 2 {
		if r.Limit > 1 {
			return r, false
		}
		r.Limit, r.ID = 0, ""
	}
	if v < 4 {
		r.Expired = false
	}
	return r, true
}
