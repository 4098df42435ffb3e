package proto

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Record is one line of a replication stream (doc.go, "Peer
// replication"). Only the fields of its Kind are set.
type Record struct {
	Kind  RecordKind
	Limit int    // G: the key's limit (0 when not given: 1)
	ID    string // G: the acquire's id, "" when none; J, D: the waiter's
	Key   string // G, F, J, D: the key
	// Expired, on F, says the holder's lease ran out; a plain F is a
	// release (PeerVersion 4; older versions wrote F for both).
	Expired bool
	Token   uint64        // G, F: the holder's token; W, Y-synced, H: the high-water mark
	Lease   time.Duration // G: lease left; J: the waiter's lease
	Wait    time.Duration // J: the wait it has left, 0 forever
	Seq     uint64        // W, Y-synced, H: the active's replication position
	// Top (Y-synced, top=T) is the newest token of the active's state,
	// granted or freed since it began (PeerVersion 5): the snapshot's
	// holders alone may be older. 0 when not given.
	Top    uint64
	From   string // Y-synced, H: the standby's address (the line's key); M: see Addr
	Pinned bool   // H: the handoff was asked for by command
	// Addr, for M, is where the role went. The active ends a stream it
	// stops feeding with "M - addr" (From ""); a node that is not active
	// answers the Y request itself with "M FROM addr" (From set), on the
	// same connection, so a standby reads both as records.
	Addr string
	// Shared (G, J): the key is held, or asked, by readers (mode=shared).
	Shared bool
	// Set (G) is the id of the set the holder was granted with, 0 for a
	// key taken alone. Batch, on the G records of a set's grant, counts
	// them: the set's Batch records come in a row, and are one change,
	// applied together once all have come (set=SET,N); 0 on any other.
	Set   uint64
	Batch int
	// Place (G) is the holder's place of a semaphore, 0 for none.
	Place int
	// Value (G) is the holder's value, "" for none.
	Value string
	// Keys (J) are the other keys of a set that waits, after the line's,
	// as AppendKeys writes them; "" for a waiter of one key.
	Keys string
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
		if r.Shared || r.Set != 0 || r.Place != 0 || r.Value != "" {
			b = appendHeldModes(b, &r)
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

// appendHeldModes writes the words of G for readers, sets, places and
// values.
func appendHeldModes(b []byte, r *Record) []byte {
	if r.Shared {
		b = append(b, " mode=shared"...)
	}
	if r.Set != 0 {
		b = append(b, " set="...)
		b = strconv.AppendUint(b, r.Set, 10)
		if r.Batch > 1 {
			b = append(b, ',')
			b = strconv.AppendInt(b, int64(r.Batch), 10)
		}
	}
	if r.Place > 0 {
		b = append(b, " place="...)
		b = strconv.AppendInt(b, int64(r.Place), 10)
	}
	if r.Value != "" {
		b = append(b, " value="...)
		b = AppendValue(b, r.Value)
	}
	return b
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
		if r.Shared {
			b = append(b, " mode=shared"...)
		}
		if r.Keys != "" {
			b = append(b, " keys="...)
			b = append(b, r.Keys...)
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
		if r.Top != 0 {
			b = append(b, " top="...)
			b = strconv.AppendUint(b, r.Top, 10)
		}
	case RecHandoff:
		b = append(b, byte(RecHandoff), ' ')
		b = append(b, r.From...)
		b = appendTokenSeq(b, r.Token, r.Seq)
		if r.Pinned {
			b = append(b, ' ')
			b = append(b, flagPinned...)
		}
	case RecMoved:
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

// recordForm is the grammar of one kind of record: how it is spelt, for
// the refusals, and how many fields may follow its key.
type recordForm struct {
	kind     RecordKind
	form     string
	min, max int
}

// recordForms are the records, in the order refusals list them. A kind
// is a row here and a parser in parseRecordFields.
var recordForms = [...]recordForm{
	{RecHeld, "G KEY TOKEN LEASELEFT [limit=N] [id=ID] [mode=shared] [set=SET[,N]] [place=P] [value=V]", 2, 8},
	{RecFree, "F KEY TOKEN [expired]", 1, 2},
	{RecJoined, "J KEY ID LEASE WAITLEFT [limit=N] [mode=shared] [keys=KEY+KEY...]", 3, 6},
	{RecLeft, "D KEY ID", 1, 1},
	{RecMark, "W - TOKEN SEQ", 2, 2},
	{RecSynced, "Y FROM synced TOKEN SEQ [top=T]", 3, 4},
	{RecHandoff, "H FROM TOKEN SEQ [pinned]", 2, 3},
	{RecMoved, "M - ADDR", 1, 1},
}

// recordFormOf is the form of kind k, nil for a kind that is no record.
func recordFormOf(k RecordKind) *recordForm {
	for i := range recordForms {
		if recordForms[i].kind == k {
			return &recordForms[i]
		}
	}
	return nil
}

// misfit is what a record parser says when the fields, counted right,
// still do not fit its form: ParseRecord words it as a wrong count.
const misfit = "\x00misfit"

// recordKinds lists the kinds of recordForms for the refusal of another.
var recordKinds = func() string {
	var s strings.Builder
	for i, r := range recordForms {
		switch {
		case i == len(recordForms)-1:
			s.WriteString(" or ")
		case i > 0:
			s.WriteString(", ")
		}
		s.WriteString(r.kind.String())
	}
	return s.String()
}()

// ParseRecord reads one line of a replication stream, as ParseAnswer made
// it. It is strict: a wrong number of fields, a bad number, a key or an
// address that is not one, or a kind that is no record is an error naming
// what was wrong. An E line (the node refused the stream) is an error
// carrying the node's words.
func ParseRecord(a Answer) (Record, error) {
	if a.Kind == KindError {
		return Record{}, errors.New("stream refused: " + a.ErrorText())
	}
	rf := recordFormOf(RecordKind(a.Kind))
	if rf == nil {
		return Record{}, errors.New("unknown record kind " + strconv.Quote(a.Kind.String()) + " (want " + recordKinds + ")")
	}
	r := Record{Kind: rf.kind}
	msg := misfit
	if n := len(a.Fields); n >= rf.min && n <= rf.max {
		msg = parseRecordFields(&r, a.Key, a.Fields)
	}
	switch msg {
	case "":
		return r, nil
	case misfit:
		msg = "wants " + rf.form + ", got " + strconv.Itoa(len(a.Fields)) + " field(s) after " + strconv.Quote(clipString(a.Key))
	}
	return Record{}, errors.New(rf.kind.String() + " record " + msg)
}

// parseRecordFields reads the key and the fields of r's kind into r, or
// says why it cannot. The calls are direct, not through a field of
// recordForms: a parser called through a function value would move r
// to the heap.
func parseRecordFields(r *Record, key string, f []string) string {
	switch r.Kind {
	case RecHeld:
		return parseHeld(r, key, f)
	case RecFree:
		return parseFree(r, key, f)
	case RecJoined:
		return parseJoined(r, key, f)
	case RecLeft:
		return parseLeft(r, key, f)
	case RecMark:
		return parseMark(r, key, f)
	case RecSynced:
		return parseSynced(r, key, f)
	case RecHandoff:
		return parseHandoffRecord(r, key, f)
	case RecMoved:
		return parseMovedRecord(r, key, f)
	}
	return "has no parser" // a row of recordForms without its case here
}

// The record parsers. Each gets the line's key and as many fields as
// its kind's form allows.

// parseRecordKey reads the key of a lock's or a waiter's record.
func parseRecordKey(r *Record, key string) string {
	if msg := CheckKey([]byte(key)); msg != "" {
		return msg
	}
	r.Key = key
	return ""
}

// parseTokenSeq reads the TOKEN SEQ of W, Y-synced and H.
func parseTokenSeq(r *Record, token, seq string) string {
	if msg := parseTokenInto(&r.Token, "token", []byte(token)); msg != "" {
		return msg
	}
	return parseTokenInto(&r.Seq, "seq", []byte(seq))
}

func parseHeld(r *Record, key string, f []string) string {
	for _, w := range f[2:] {
		if msg := parseHeldWord(r, w); msg != "" {
			return msg
		}
	}
	if msg := parseRecordKey(r, key); msg != "" {
		return msg
	}
	if msg := parseTokenInto(&r.Token, "token", []byte(f[0])); msg != "" {
		return msg
	}
	return parseSeconds(&r.Lease, "lease", []byte(f[1]))
}

// parseHeldWord reads one optional word of G, each at most once, in the
// order AppendRecord writes them (a record has one canonical form).
func parseHeldWord(r *Record, w string) string {
	name, val, _ := strings.Cut(w, "=")
	order := heldWordOrder(name)
	if order == 0 {
		return fmt.Sprintf("%q: want limit=N, id=ID, mode=shared, set=SET[,N], place=P or value=V", clipString(w))
	}
	if order <= r.heldWords() {
		return fmt.Sprintf("%q: out of order, or given twice", clipString(w))
	}
	switch name {
	case "limit", "id":
		var opt Request
		if msg := parseAcquireOption(&opt, []byte(w)); msg != "" {
			return msg
		}
		if name == "limit" {
			r.Limit = recordLimit(opt.Limit)
		} else {
			r.ID = opt.ID
		}
	case "mode":
		if val != "shared" {
			return fmt.Sprintf("mode %q: want shared", clipString(val))
		}
		r.Shared = true
	case "set":
		set, n, _ := strings.Cut(val, ",")
		if msg := parseTokenInto(&r.Set, "set", []byte(set)); msg != "" || r.Set == 0 {
			return "set " + strconv.Quote(clipString(val)) + ": want a token, and the count of its records"
		}
		if n != "" {
			b, err := strconv.Atoi(n)
			if err != nil || b < 2 || b > MaxSetKeys || n[0] == '+' {
				return "set " + strconv.Quote(clipString(val)) + ": want 2 to " + strconv.Itoa(MaxSetKeys) + " records"
			}
			r.Batch = b
		}
	case "place":
		p, err := strconv.Atoi(val)
		if err != nil || p < 1 || p > MaxLimit || val[0] == '+' {
			return fmt.Sprintf("place %q: want 1 to %d", clipString(val), MaxLimit)
		}
		r.Place = p
	case "value":
		v, msg := DecodeValue(val)
		if msg != "" || v == "" {
			return "value " + msg
		}
		r.Value = v
	}
	return ""
}

// heldWordOrder is where a word named name stands among G's optional
// words, 0 for none of them.
func heldWordOrder(name string) int {
	switch name {
	case "limit":
		return 1
	case "id":
		return 2
	case "mode":
		return 3
	case "set":
		return 4
	case "place":
		return 5
	case "value":
		return 6
	}
	return 0
}

// heldWords is the order of the last optional word of a G read so far.
func (r *Record) heldWords() int {
	switch {
	case r.Value != "":
		return 6
	case r.Place != 0:
		return 5
	case r.Set != 0:
		return 4
	case r.Shared:
		return 3
	case r.ID != "":
		return 2
	case r.Limit != 0:
		return 1
	}
	return 0
}

func parseFree(r *Record, key string, f []string) string {
	if len(f) == 2 {
		if f[1] != wordExpired {
			return misfit
		}
		r.Expired = true
	}
	if msg := parseRecordKey(r, key); msg != "" {
		return msg
	}
	return parseTokenInto(&r.Token, "token", []byte(f[0]))
}

// parseLeft reads D KEY ID, and the key and id of J.
func parseLeft(r *Record, key string, f []string) string {
	if msg := parseRecordKey(r, key); msg != "" {
		return msg
	}
	if msg := CheckID(f[0]); msg != "" {
		return "id " + msg
	}
	r.ID = f[0]
	return ""
}

func parseJoined(r *Record, key string, f []string) string {
	if msg := parseLeft(r, key, f); msg != "" {
		return msg
	}
	if msg := parseLease(&r.Lease, []byte(f[1])); msg != "" {
		return msg
	}
	if msg := parseSeconds(&r.Wait, "wait", []byte(f[2])); msg != "" {
		return msg
	}
	for _, w := range f[3:] {
		if msg := parseJoinedWord(r, w); msg != "" {
			return msg
		}
	}
	return ""
}

// parseJoinedWord reads one optional word of J: limit=N, mode=shared,
// keys=KEY+KEY..., each at most once and in that order.
func parseJoinedWord(r *Record, w string) string {
	name, val, _ := strings.Cut(w, "=")
	switch {
	case name == "limit" && r.Limit == 0 && !r.Shared && r.Keys == "":
		var opt Request
		if msg := parseAcquireOption(&opt, []byte(w)); msg != "" {
			return msg
		}
		r.Limit = recordLimit(opt.Limit)
	case name == "mode" && val == "shared" && !r.Shared && r.Keys == "":
		r.Shared = true
	case name == "keys" && r.Keys == "":
		keys, ok := SplitKeys(val)
		if !ok || len(keys) >= MaxSetKeys || string(AppendKeys(nil, keys)) != val {
			return fmt.Sprintf("keys %q: want 1 to %d percent-encoded keys joined by +", clipString(val), MaxSetKeys-1)
		}
		r.Keys = val
	default:
		return fmt.Sprintf("%q: want limit=N, mode=shared or keys=KEY+KEY..., in that order", clipString(w))
	}
	return ""
}

// recordLimit is a record's limit=N as Record holds it: limit=1 is a
// lock, which AppendRecord writes without the word, and which Record
// holds as 0, as it does a record without it.
func recordLimit(n int) int {
	if n == 1 {
		return 0
	}
	return n
}

func parseMark(r *Record, key string, f []string) string {
	if key != WordNone {
		return fmt.Sprintf("key %q: want - (W - TOKEN SEQ)", clipString(key))
	}
	return parseTokenSeq(r, f[0], f[1])
}

func parseSynced(r *Record, key string, f []string) string {
	if f[0] != wordSynced {
		return fmt.Sprintf("word %q: want Y FROM synced TOKEN SEQ", clipString(f[0]))
	}
	var msg string
	if r.From, msg = checkAddr(key); msg != "" {
		return "from " + msg
	}
	if msg = parseTokenSeq(r, f[1], f[2]); msg != "" || len(f) == 3 {
		return msg
	}
	top, ok := strings.CutPrefix(f[3], "top=")
	if !ok {
		return fmt.Sprintf("word %q: want top=T or nothing after SEQ", clipString(f[3]))
	}
	return parseTokenInto(&r.Top, "top", []byte(top))
}

func parseHandoffRecord(r *Record, key string, f []string) string {
	var msg string
	if r.From, msg = checkAddr(key); msg != "" {
		return "from " + msg
	}
	if msg = parseTokenSeq(r, f[0], f[1]); msg != "" {
		return msg
	}
	if len(f) == 3 {
		if f[2] != flagPinned {
			return fmt.Sprintf("word %q: want pinned or nothing after SEQ", clipString(f[2]))
		}
		r.Pinned = true
	}
	return ""
}

func parseMovedRecord(r *Record, key string, f []string) string {
	var msg string
	if key != WordNone {
		if r.From, msg = checkAddr(key); msg != "" {
			return "from " + msg
		}
	}
	if r.Addr, msg = checkAddr(f[0]); msg != "" {
		return "addr " + msg
	}
	return ""
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
	if v < 5 {
		// Readers and sets it would hold as writers and keys alone; a
		// place and a value it can do without.
		if r.Shared || r.Set != 0 || r.Keys != "" {
			return r, false
		}
		r.Place, r.Value, r.Top = 0, "", 0
	}
	return r, true
}
