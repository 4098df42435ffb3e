package proto

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Limits of the grammar. They are part of the contract: a server refuses
// what exceeds them, and a client never sends it.
const (
	// MaxKeyLen is the longest key, in bytes.
	MaxKeyLen = 255
	// MaxLineLen is the longest request line a server reads, in bytes,
	// without its line ending. A longer line closes the connection: it
	// cannot be a request of this grammar, so the stream is not trusted.
	MaxLineLen = 4096
	// MaxArgs is the most space-separated words a request may have after
	// its key: an acquire of MaxSetKeys keys with every option fits.
	MaxArgs = 24
	// MaxSeconds is the largest number of seconds a duration may carry on
	// the wire (ten years); servers set tighter limits of their own.
	MaxSeconds = 10 * 365 * 24 * 3600
	// MaxListKeys is the most keys one K answer lists.
	MaxListKeys = 1000
)

// Op names a request. Answers reuse the request's letter, except T
// (timeout), M (moved) and E (error).
type Op byte

// Client requests.
const (
	OpAcquire Op = 'A' // A key lease wait
	OpRelease Op = 'R' // R key token
	OpRenew   Op = 'N' // N key token lease
	OpQueue   Op = 'Q' // Q key
	OpKeys    Op = 'K' // K pattern
	OpStatus  Op = 'S' // S label
	OpHandoff Op = 'H' // H label [addr]
	OpAuth    Op = 'I' // I role secret | I role hello nonce | I role proof proof
	// OpWithdraw takes a waiting acquire out of its queue: X key id.
	OpWithdraw Op = 'X'
	// OpWatch subscribes the connection to a key's holders and waiters:
	// L key. Its answers, now and after every change, are L key BODY.
	OpWatch Op = 'L'
	// OpUnwatch ends a watch: U key.
	OpUnwatch Op = 'U'
)

// Peer requests, sent by one lockd node to another over the client port.
const (
	OpBeat Op = 'P' // P from role token seq flags
	OpSync Op = 'Y' // Y from token
	// OpResolve asks the successor of a handoff that may have failed
	// whether it took the role: C from token [age], age how long ago the
	// handoff began.
	OpResolve Op = 'C'
	// OpTakeover is sent back on a replication stream by the successor
	// of a handoff once it serves: O from token.
	OpTakeover Op = 'O'
	// OpApplied is a standby's acknowledgement on its replication stream:
	// V from seq, every record up to seq is applied.
	OpApplied Op = 'V'
)

// PeerVersion is the version of the peer messages this package writes.
// 2 added acknowledgements (V), semaphores and acquire ids in records,
// and the heartbeat flags top, base, round and v; 3 the waiters' records
// J and D; 4 the word expired on an F record whose lease ran out (a
// plain F is a release, which the standby remembers: engine.WasReleased);
// 5 readers, sets, places and values on G and J.
// A node learns each peer's from the v:N flag of its heartbeats (none: 1)
// and writes to it only what it reads.
const PeerVersion = 5

// Answer kinds that no request shares.
const (
	KindTimeout Op = 'T' // T key: the wait elapsed, nothing was granted
	KindMoved   Op = 'M' // M key addr: this node is not active
	KindError   Op = 'E' // E key OP: words
)

// RecordKind names a line of a replication stream. Its letters are a
// namespace of their own: Y and H mean one thing as a request and
// another as a record.
type RecordKind byte

// Replication stream records, written by the active on a connection that
// asked for them with Y. See doc.go for their grammar.
const (
	RecHeld    RecordKind = 'G' // G key token lease-remaining
	RecFree    RecordKind = 'F' // F key token [expired]
	RecMark    RecordKind = 'W' // W - token seq: high-water mark and stream position
	RecSynced  RecordKind = 'Y' // Y from synced token seq: the snapshot is complete
	RecHandoff RecordKind = 'H' // H from token seq: the role is yours once applied
	// RecJoined and RecLeft replicate the waiters whose acquire carried
	// an id (PeerVersion 3): J key id lease wait-left [limit=N] when one
	// joins the tail of key's queue, D key id when it leaves it without
	// a grant.
	RecJoined RecordKind = 'J'
	RecLeft   RecordKind = 'D'
	// RecMoved ends a stream: M - addr, the role went to addr; or
	// answers Y at a node that is not active: M from addr.
	RecMoved RecordKind = 'M'
)

func (k RecordKind) String() string { return Op(k).String() }

// Words of fixed answers.
const (
	WordOK      = "ok"
	WordNotHeld = "notheld"
	WordNone    = "-"
)

func (o Op) String() string {
	if o >= 'A' && o <= 'Z' {
		return string(rune(o))
	}
	return "?"
}

// Request is one parsed line a node reads: a client's request, or a
// message from another node (Peer). Only the fields of its Op are set.
type Request struct {
	Op Op
	// Try (A, wait "-"): never queue; Wait is 0 and means nothing then.
	// (Op, Try and Ref come first, where they share a word's padding.)
	Try bool
	// Ref (A): the client's handle for matching the answers, zero when
	// not given. Every answer to the acquire carries it back.
	Ref Ref
	// Key is the line's KEY, which every answer echoes: a client
	// request's key, pattern or label; a peer message's sender, whose
	// message is read from Peer.
	Key   string
	Lease time.Duration // A, N
	Wait  time.Duration // A
	Limit int           // A: how many may hold the key at once; 0 when not given (1)
	ID    string        // A: the client's name for this acquire, "" when not given; X: the acquire to withdraw
	Token uint64        // R, N: the holder's token
	// Mode (A) is how the keys are asked, 0 when the acquire names
	// none (a writer).
	Mode Mode
	// HasValue (A, N) says the request carried value=V; Value is V
	// decoded. A renewal without it keeps the holder's value.
	HasValue bool
	Value    string
	// Keys (A) are the keys named by key=KEY after the line's key, in
	// their order; nil for an acquire of one key.
	Keys []string
	Addr string   // H (optional target)
	Args []string // I: the words after the role
	// Peer is the message of a peer op (P, Y, C, O, V), nil for a
	// client's request.
	Peer *PeerMessage
}

// Limits of the optional words of A.
const (
	// MaxLimit is the largest limit=N an A may carry; servers set a
	// tighter one of their own (--max-limit).
	MaxLimit = 65535
	// MaxIDLen is the longest id=ID an A may carry, in bytes.
	MaxIDLen = 64
	// MaxRefLen is the longest ref=R an A may carry, in bytes of
	// [0-9A-Za-z].
	MaxRefLen = 16
	// MaxSetKeys is the most keys one A may take, the line's key and
	// its key=KEY words together.
	MaxSetKeys = 16
	// MaxValueLen is the longest value=V an A or N may carry, in bytes
	// once decoded.
	MaxValueLen = 1024
)

// Mode is how an acquire asks for its keys: mode=exclusive (a writer)
// or mode=shared (a reader). The zero Mode is an acquire that names
// none, a writer.
type Mode uint8

const (
	ModeExclusive Mode = iota + 1
	ModeShared
)

func (m Mode) String() string {
	if m == ModeShared {
		return "shared"
	}
	return "exclusive"
}

// Ref is an acquire's ref=R, held in place so that reading it allocates
// nothing. The zero Ref is "no ref".
type Ref struct {
	n uint8
	b [MaxRefLen]byte
}

// MakeRef returns s as a Ref, or false when s is not 1 to MaxRefLen
// bytes of [0-9A-Za-z].
func MakeRef(s string) (Ref, bool) { return refOf([]byte(s)) }

func refOf(b []byte) (Ref, bool) {
	var r Ref
	if len(b) == 0 || len(b) > MaxRefLen {
		return r, false
	}
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return r, false
		}
	}
	r.n = uint8(copy(r.b[:], b))
	return r, true
}

// IsZero reports whether the acquire carried no ref.
func (r Ref) IsZero() bool { return r.n == 0 }

// String is the ref as written on the wire ("" for none).
func (r Ref) String() string { return string(r.b[:r.n]) }

// AppendRef writes " ref=R", or nothing for the zero Ref.
func AppendRef(b []byte, r Ref) []byte {
	if r.n == 0 {
		return b
	}
	b = append(b, " ref="...)
	return append(b, r.b[:r.n]...)
}

// ParseError says why a line is not a request. Op and Key are what could
// be read of the line, so that the E answer echoes them.
type ParseError struct {
	Op  Op
	Key string
	Msg string
	// Ref is the ref=R of a refused acquire when it could be read, so
	// that the refusal carries it back (AppendErrorRef).
	Ref Ref
}

func (e *ParseError) Error() string { return e.Msg }

// ErrLineTooLong is returned by readers of this grammar when a line exceeds
// MaxLineLen.
var ErrLineTooLong = errors.New("line longer than " + strconv.Itoa(MaxLineLen) + " bytes")

// Parse reads one request line, with or without its line ending. It never
// panics; every refusal is a *ParseError naming the field that was wrong.
// The words after the key are read as the row of its op says (ops.go).
func Parse(line []byte) (Request, error) {
	line = trimEOL(line)
	var req Request
	if len(line) == 0 {
		return req, &ParseError{Key: WordNone, Msg: "empty line: send OP KEY [ARG]..., for example: A deploy 30 10"}
	}
	if len(line) > MaxLineLen {
		return req, &ParseError{Key: WordNone, Msg: ErrLineTooLong.Error()}
	}
	var words [2 + MaxArgs]span
	n, ok := split(line, words[:])
	if !ok {
		op, key := guessOpKey(line, words[:n])
		return req, &ParseError{Op: op, Key: key, Msg: "too many words: at most " + strconv.Itoa(MaxArgs) + " after the key"}
	}
	if n == 0 {
		return req, &ParseError{Key: WordNone, Msg: "blank line: send OP KEY [ARG]..."}
	}
	opw := words[0].of(line)
	if len(opw) != 1 || opw[0] < 'A' || opw[0] > 'Z' {
		_, key := guessOpKey(line, words[:n])
		return req, &ParseError{Key: key, Msg: fmt.Sprintf("op %q is not one upper-case letter (%s)", clip(opw), opList)}
	}
	req.Op = Op(opw[0])
	if n < 2 {
		return req, &ParseError{Op: req.Op, Key: WordNone, Msg: "missing key after the op"}
	}
	key := words[1].of(line)
	if msg := CheckKey(key); msg != "" {
		return req, &ParseError{Op: req.Op, Key: WordNone, Msg: msg}
	}
	req.Key = string(key)
	args := words[2:n]
	row := rowOf(req.Op)
	var msg string
	switch {
	case row == nil:
		msg = "unknown op " + req.Op.String() + " (" + opList + ")"
	case len(args) < row.min || len(args) > row.max:
		msg = "want " + row.form + ", got " + strconv.Itoa(len(args)) + " argument(s)"
	default:
		if row.class == ClassPeer {
			req.Peer = &PeerMessage{From: req.Key}
		}
		if msg = readArgs(row, &req, line, args); msg == "" {
			return req, nil
		}
	}
	pe := &ParseError{Op: req.Op, Key: req.Key, Msg: msg}
	if row != nil && row.refs {
		pe.Ref = lastRef(line, args)
	}
	return Request{}, pe
}

// lastRef is the ref=R a refused request carried, so that its refusal
// carries it back: the last ref= word, zero when that one is no ref.
func lastRef(line []byte, args []span) Ref {
	var ref Ref
	for _, s := range args {
		if a := s.of(line); len(a) > 4 && string(a[:4]) == "ref=" {
			ref, _ = refOf(a[4:])
		}
	}
	return ref
}

// parseAcquireOption reads one optional word of A, limit=N, id=ID or
// ref=R, into req, or says why it cannot.
func parseAcquireOption(req *Request, w []byte) string {
	if len(w) > 4 && string(w[:4]) == "ref=" {
		// Read in place: the hot path of a pipelining client.
		if !req.Ref.IsZero() {
			return "ref given twice"
		}
		r, ok := refOf(w[4:])
		if !ok {
			return fmt.Sprintf("ref %q: want 1 to %d letters or digits", clip(w[4:]), MaxRefLen)
		}
		req.Ref = r
		return ""
	}
	name, val, ok := strings.Cut(string(w), "=")
	switch {
	case !ok:
		return fmt.Sprintf("%q: want limit=N, id=ID, key=KEY, mode=M, value=V or ref=R after the wait", clip(w))
	case name == "limit":
		if req.Limit != 0 {
			return "limit given twice"
		}
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 || n > MaxLimit || val[0] == '+' {
			return fmt.Sprintf("limit %q: want a whole number from 1 to %d (how many may hold the key at once)", clip([]byte(val)), MaxLimit)
		}
		req.Limit = n
	case name == "id":
		if req.ID != "" {
			return "id given twice"
		}
		if msg := CheckID(val); msg != "" {
			return fmt.Sprintf("id %q: %s", clip([]byte(val)), msg)
		}
		req.ID = val
	default:
		return parseSetOption(req, name, val, w)
	}
	return ""
}

// parseSetOption reads key=KEY, mode=M and value=V, the words of A for
// readers, sets and values.
func parseSetOption(req *Request, name, val string, w []byte) string {
	switch name {
	case "key":
		if msg := CheckKey([]byte(val)); msg != "" {
			return "key= " + msg
		}
		if len(req.Keys)+1 >= MaxSetKeys {
			return "more than " + strconv.Itoa(MaxSetKeys) + " keys: an acquire takes 1 to " + strconv.Itoa(MaxSetKeys) + " keys at once"
		}
		if val == req.Key || slices.Contains(req.Keys, val) {
			return fmt.Sprintf("key %q named twice; name each key of a set once", clip([]byte(val)))
		}
		if req.Keys == nil {
			req.Keys = make([]string, 0, 4)
		}
		req.Keys = append(req.Keys, val)
	case "mode":
		if req.Mode != 0 {
			return "mode given twice"
		}
		switch val {
		case "shared":
			req.Mode = ModeShared
		case "exclusive":
			req.Mode = ModeExclusive
		default:
			return fmt.Sprintf("mode %q: want shared or exclusive", clip([]byte(val)))
		}
	case "value":
		return parseValueInto(req, val)
	default:
		return fmt.Sprintf("%q: want limit=N, id=ID, key=KEY, mode=M, value=V or ref=R after the wait", clip(w))
	}
	return ""
}

// parseValueInto reads value=V into req.
func parseValueInto(req *Request, val string) string {
	if req.HasValue {
		return "value given twice"
	}
	v, msg := DecodeValue(val)
	if msg != "" {
		return "value " + msg
	}
	req.Value, req.HasValue = v, true
	return ""
}

// CheckID returns "" when id may be an acquire's id=ID, or why not.
func CheckID(id string) string {
	if id == "" || len(id) > MaxIDLen || hasControl([]byte(id)) {
		return "want 1 to " + strconv.Itoa(MaxIDLen) + " bytes, no control characters"
	}
	return ""
}

// IDSep parts the two halves of an acquire id written as NAME#SUFFIX: the
// name, for people, says who acquired (lockctl --name, the Go client's
// Options.Name); the suffix makes the id unique.
const IDSep = '#'

// IDName is the name part of an acquire id: what comes before its last
// IDSep, or the whole id when it has none (an id picked by hand).
func IDName(id string) string {
	if i := strings.LastIndexByte(id, IDSep); i >= 0 {
		return id[:i]
	}
	return id
}

// AppendAcquire writes the request "A key lease wait [limit=N] [id=ID]".
// A negative wait writes "-", the try-lock.
func AppendAcquire(b []byte, key string, lease, wait time.Duration, limit int, id string) []byte {
	b = append(b, 'A', ' ')
	b = append(b, key...)
	b = append(b, ' ')
	b = AppendSeconds(b, lease)
	b = append(b, ' ')
	if wait < 0 {
		b = append(b, '-')
	} else {
		b = AppendSeconds(b, wait)
	}
	if limit > 1 {
		b = append(b, " limit="...)
		b = strconv.AppendInt(b, int64(limit), 10)
	}
	if id != "" {
		b = append(b, " id="...)
		b = append(b, id...)
	}
	return append(b, '\n')
}

// CheckKey returns "" when k is a valid key, or why it is not.
func CheckKey(k []byte) string {
	if len(k) == 0 {
		return "key is empty"
	}
	if len(k) > MaxKeyLen {
		return "key is " + strconv.Itoa(len(k)) + " bytes, longer than " + strconv.Itoa(MaxKeyLen)
	}
	for _, c := range k {
		if c <= ' ' || c == 0x7f {
			return "key has a space, tab or control character"
		}
	}
	return ""
}

// hasControl reports whether a word holds a tab or another control
// character, which no word of the grammar may: a free-form word (an
// address, a role) would otherwise carry a stray CR or an escape sequence
// into logs and answers.
func hasControl(b []byte) bool {
	for _, c := range b {
		if c < ' ' || c == 0x7f {
			return true
		}
	}
	return false
}

// ParseSeconds reads a wire duration: decimal seconds with at most three
// digits after the point ("30", "0.5", "2.25"). It returns why it failed
// as words, or "".
func ParseSeconds(b []byte) (time.Duration, string) {
	if len(b) == 0 {
		return 0, "is empty"
	}
	var whole, frac int64
	i := 0
	for ; i < len(b); i++ {
		d := b[i] - '0' // wraps for a byte below '0'
		if d > 9 {
			break
		}
		whole = whole*10 + int64(d)
		if whole > MaxSeconds {
			return 0, fmt.Sprintf("%q is more than %d seconds", clip(b), MaxSeconds)
		}
	}
	if i == 0 {
		return 0, fmt.Sprintf("%q is not a number of seconds (like 30 or 2.5)", clip(b))
	}
	if i < len(b) {
		if b[i] != '.' || i == len(b)-1 {
			return 0, fmt.Sprintf("%q is not a number of seconds (like 30 or 2.5)", clip(b))
		}
		digits := b[i+1:]
		if len(digits) > 3 {
			return 0, fmt.Sprintf("%q has more than millisecond precision (at most 3 digits after the point)", clip(b))
		}
		scale := int64(100)
		for _, c := range digits {
			if c < '0' || c > '9' {
				return 0, fmt.Sprintf("%q is not a number of seconds (like 30 or 2.5)", clip(b))
			}
			frac += int64(c-'0') * scale
			scale /= 10
		}
		if whole == MaxSeconds && frac > 0 {
			return 0, fmt.Sprintf("%q is more than %d seconds", clip(b), MaxSeconds)
		}
	}
	return time.Duration(whole)*time.Second + time.Duration(frac)*time.Millisecond, ""
}

func parseToken(b []byte) (uint64, string) {
	if len(b) == 0 || len(b) > 20 {
		return 0, fmt.Sprintf("%q is not an unsigned 64-bit integer", clip(b))
	}
	var v uint64
	for i, c := range b {
		d := uint64(c - '0') // wraps for a byte below '0'
		if d > 9 {
			return 0, fmt.Sprintf("%q is not an unsigned 64-bit integer", clip(b))
		}
		// Only a twentieth digit can overflow: 19 digits stay below
		// 10^19, less than 2^64.
		if i == 19 && v > (^uint64(0)-d)/10 {
			return 0, fmt.Sprintf("%q is larger than 2^64-1", clip(b))
		}
		v = v*10 + d
	}
	return v, ""
}

// ParseToken reads a decimal u64 token.
func ParseToken(s string) (uint64, error) {
	v, msg := parseToken([]byte(s))
	if msg != "" {
		return 0, errors.New("token " + msg)
	}
	return v, nil
}

// FormatSeconds writes d as wire seconds, dropping what is below a
// millisecond and any trailing zeros.
func FormatSeconds(d time.Duration) string {
	return string(AppendSeconds(nil, d))
}

// AppendSeconds appends d as wire seconds to b.
func AppendSeconds(b []byte, d time.Duration) []byte {
	if d < 0 {
		d = 0
	}
	ms := int64(d / time.Millisecond)
	b = strconv.AppendInt(b, ms/1000, 10)
	if f := ms % 1000; f != 0 {
		b = append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
		for b[len(b)-1] == '0' {
			b = b[:len(b)-1]
		}
	}
	return b
}

func trimEOL(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
	}
	return line
}

// span is where a word of a line begins and ends. Parse cuts a line
// into spans rather than slices: they hold no pointer, so storing one
// needs no write barrier, and they are a sixth of a slice's size.
type span struct{ from, to uint16 }

// of is the word s spans in line.
func (s span) of(line []byte) []byte { return line[s.from:s.to] }

// split cuts line, at most MaxLineLen bytes, into words separated by
// single spaces (runs of spaces are tolerated, since people type them
// with nc). It reports false when there are more words than dst holds.
func split(line []byte, dst []span) (int, bool) {
	n, i := 0, 0
	for {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		if i == len(line) {
			return n, true
		}
		from := i
		for i < len(line) && line[i] != ' ' {
			i++
		}
		if n == len(dst) {
			return n, false
		}
		dst[n] = span{uint16(from), uint16(i)}
		n++
	}
}

func guessOpKey(line []byte, words []span) (Op, string) {
	var op Op
	key := WordNone
	if len(words) > 0 {
		if w := words[0].of(line); len(w) == 1 && w[0] >= 'A' && w[0] <= 'Z' {
			op = Op(w[0])
		}
	}
	if len(words) > 1 {
		if w := words[1].of(line); CheckKey(w) == "" {
			key = string(w)
		}
	}
	return op, key
}

// clip keeps error messages short when a client sends a long word.
func clip(b []byte) string {
	const max = 32
	if len(b) > max {
		return strings.ToValidUTF8(string(b[:max]), "?") + "..."
	}
	return strings.ToValidUTF8(string(b), "?")
}
