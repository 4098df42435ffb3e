package proto

import (
	"bytes"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The Append functions write one answer line, ending in '\n', to b and
// return the extended slice, so a server can batch many answers into one
// buffer and one write.

// AppendGranted writes "A key token".
func AppendGranted(b []byte, key string, token uint64) []byte {
	b = append(b, 'A', ' ')
	b = append(b, key...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, token, 10)
	return append(b, '\n')
}

// AppendGrantedSet writes "A key TOKEN [TOKEN]... [place=P] [ref=R]":
// the grant of an acquire of one key or of a set, tokens in the order
// its keys were asked; place 0 writes no place=.
func AppendGrantedSet(b []byte, key string, tokens []uint64, place int, ref Ref) []byte {
	b = append(b, 'A', ' ')
	b = append(b, key...)
	for _, t := range tokens {
		b = append(b, ' ')
		b = strconv.AppendUint(b, t, 10)
	}
	if place > 0 {
		b = append(b, " place="...)
		b = strconv.AppendInt(b, int64(place), 10)
	}
	b = AppendRef(b, ref)
	return append(b, '\n')
}

// AppendTimeout writes "T key".
func AppendTimeout(b []byte, key string) []byte {
	b = append(b, 'T', ' ')
	b = append(b, key...)
	return append(b, '\n')
}

// AppendMoved writes "M key addr".
func AppendMoved(b []byte, key, addr string) []byte {
	b = append(b, 'M', ' ')
	b = append(b, key...)
	b = append(b, ' ')
	b = append(b, addr...)
	return append(b, '\n')
}

// AppendGrantedRef writes "A key token [ref=R]".
func AppendGrantedRef(b []byte, key string, token uint64, ref Ref) []byte {
	b = AppendGranted(b, key, token)
	return appendRefEOL(b, ref)
}

// AppendTimeoutRef writes "T key [ref=R]".
func AppendTimeoutRef(b []byte, key string, ref Ref) []byte {
	return appendRefEOL(AppendTimeout(b, key), ref)
}

// AppendMovedRef writes "M key addr [ref=R]".
func AppendMovedRef(b []byte, key, addr string, ref Ref) []byte {
	return appendRefEOL(AppendMoved(b, key, addr), ref)
}

// AppendErrorRef writes "E key OP: [ref=R] msg": the ref is the first
// word after the op, so that the refusal of a ref'd acquire finds it.
func AppendErrorRef(b []byte, key string, op Op, ref Ref, msg string) []byte {
	if ref.IsZero() {
		return AppendError(b, key, op, msg)
	}
	if key == "" {
		key = WordNone
	}
	b = append(b, 'E', ' ')
	b = append(b, key...)
	b = append(b, ' ')
	b = append(b, op.String()...)
	b = append(b, ':')
	b = AppendRef(b, ref)
	b = append(b, ' ')
	return appendFlat(b, msg)
}

// appendRefEOL puts " ref=R" before the line ending b ends in.
func appendRefEOL(b []byte, ref Ref) []byte {
	if ref.IsZero() {
		return b
	}
	b = AppendRef(b[:len(b)-1], ref)
	return append(b, '\n')
}

// AppendWord writes "OP key word", the answer of R and N ("ok", "notheld").
func AppendWord(b []byte, op Op, key, word string) []byte {
	b = append(b, byte(op), ' ')
	b = append(b, key...)
	b = append(b, ' ')
	b = append(b, word...)
	return append(b, '\n')
}

// AppendError writes "E key OP: msg". The op names which request failed so
// a pipelining client can match the answer by (op, key); it is '?' when the
// line had no op. Line breaks in msg are flattened.
func AppendError(b []byte, key string, op Op, msg string) []byte {
	if key == "" {
		key = WordNone
	}
	b = append(b, 'E', ' ')
	b = append(b, key...)
	b = append(b, ' ')
	b = append(b, op.String()...)
	b = append(b, ':', ' ')
	return appendFlat(b, msg)
}

// appendFlat writes msg with its line breaks flattened, and the line end.
func appendFlat(b []byte, msg string) []byte {
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '\n' || c == '\r' {
			c = ' '
		}
		b = append(b, c)
	}
	return append(b, '\n')
}

// AppendFields writes "OP key f1 f2 ...", the shape of every other answer
// and of the replication records.
func AppendFields(b []byte, op Op, key string, fields ...string) []byte {
	b = append(b, byte(op), ' ')
	b = append(b, key...)
	for _, f := range fields {
		b = append(b, ' ')
		b = append(b, f...)
	}
	return append(b, '\n')
}

// Answer is one parsed answer (or replication record) line.
type Answer struct {
	Kind   Op
	Key    string
	Fields []string
}

// ReqOp is the op of the request this answer belongs to: T answers A; M
// and E carry no op of their own and return 0 and the failed op
// respectively.
func (a Answer) ReqOp() Op {
	switch a.Kind {
	case KindTimeout:
		return OpAcquire
	case KindMoved:
		return 0
	case KindError:
		if len(a.Fields) > 0 && len(a.Fields[0]) == 2 && a.Fields[0][1] == ':' {
			return Op(a.Fields[0][0])
		}
		return 0
	}
	return a.Kind
}

// ErrorText is the words of an E answer, without its op and ref.
func (a Answer) ErrorText() string {
	f := a.Fields
	if len(f) > 0 && len(f[0]) == 2 && f[0][1] == ':' {
		f = f[1:]
		if a.ReqOp() == OpAcquire && len(f) > 0 && strings.HasPrefix(f[0], "ref=") {
			f = f[1:]
		}
	}
	return strings.Join(f, " ")
}

// Ref is the ref=R an answer to an acquire carries (A, T, M, and E of
// A), "" when it carries none.
func (a Answer) Ref() string {
	f := a.Fields
	switch a.Kind {
	case OpAcquire, KindTimeout, KindMoved:
		if n := len(f); n > 0 && strings.HasPrefix(f[n-1], "ref=") {
			return f[n-1][4:]
		}
	case KindError:
		if len(f) > 1 && f[0] == "A:" && strings.HasPrefix(f[1], "ref=") {
			return f[1][4:]
		}
	}
	return ""
}

// WithoutRef is a with its ref word taken out, so that code that reads
// the answers of acquires without ref= reads it unchanged.
func (a Answer) WithoutRef() Answer {
	f := a.Fields
	switch a.Kind {
	case OpAcquire, KindTimeout, KindMoved:
		if n := len(f); n > 0 && strings.HasPrefix(f[n-1], "ref=") {
			a.Fields = f[:n-1]
			if n == 1 {
				a.Fields = nil // as ParseAnswer leaves a line of no fields
			}
		}
	case KindError:
		if len(f) > 1 && f[0] == "A:" && strings.HasPrefix(f[1], "ref=") {
			a.Fields = append([]string{f[0]}, f[2:]...)
		}
	}
	return a
}

// ParseAnswer reads one answer line.
func ParseAnswer(line []byte) (Answer, error) {
	line = trimEOL(line)
	sp := bytes.IndexByte(line, ' ')
	if sp != 1 || line[0] < 'A' || line[0] > 'Z' {
		return Answer{}, errors.New("malformed answer " + strconv.Quote(clip(line)))
	}
	rest := string(line[2:]) // one copy: the key and the fields share it
	var a Answer
	a.Kind = Op(line[0])
	if i := strings.IndexByte(rest, ' '); i >= 0 {
		a.Key = rest[:i]
		a.Fields = splitSpaces(rest[i+1:])
	} else {
		a.Key = rest
	}
	if a.Key == "" {
		return Answer{}, errors.New("answer without a key: " + strconv.Quote(clip(line)))
	}
	return a, nil
}

// splitSpaces splits s at runs of spaces, as strings.Fields would at
// white space: only spaces separate words, as a key may hold any other
// byte above 0x20, including what Unicode calls white space (U+00A0,
// U+3000). It returns nil when s holds no word.
func splitSpaces(s string) []string {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] != ' ' && (i == 0 || s[i-1] == ' ') {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for len(s) > 0 {
		for len(s) > 0 && s[0] == ' ' {
			s = s[1:]
		}
		if s == "" {
			break
		}
		end := strings.IndexByte(s, ' ')
		if end < 0 {
			end = len(s)
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

// Status is the answer to S: one node's view of itself and of the cluster.
// On the wire it is "S label k=v k=v ... peer=... peer=...".
type Status struct {
	Self    string        // this node's address as written in --peers
	Role    string        // active, standby, joining, handoff
	Active  string        // the active's address, "" when none is known
	Token   uint64        // the highest token this node knows of
	Seq     uint64        // replication position: changes applied
	Uptime  time.Duration // since the process started
	Keys    int           // keys held or waited on
	Waiters int           // waiters queued
	Sticky  bool          // gave the role up by command and will not take it back by priority
	Peers   []PeerStatus  // every node of --peers, in priority order, this one included
	// Replication is sync or async ("" from an older node); Degraded, on
	// an active in sync mode, says no standby acknowledges: answers do
	// not wait, and a crash may lose them.
	Replication string
	Degraded    bool
	// Durability is what the node keeps across a restart: "memory", or
	// "disk:MODE" with a data directory, MODE its --fsync mode ("" from
	// an older node).
	Durability string
	// Changes are the last times this node took the role, oldest first
	// (none from an older node): every move of the role has a node
	// that took it, so the changes of all nodes together are the
	// cluster's.
	Changes []RoleChange
}

// RoleChange is a move of the active role: when, from which node (""
// when none was known), to which, and why. On the wire, a field
// "change=UNIXMS,FROM,TO,REASON" of S, FROM "-" when none and REASON
// query-escaped (no spaces or commas).
type RoleChange struct {
	At       time.Time
	From, To string
	Reason   string
}

// PeerStatus is one node as seen by the node that answers S.
type PeerStatus struct {
	Addr      string
	Role      string
	Reachable bool
	Seq       uint64 // the peer's replication position, as last reported
	Lag       uint64 // changes the peer is behind the active (0 when unknown or caught up)
	Token     uint64 // the peer's token high-water mark, as last reported
}

// AppendStatus writes the S answer for st.
func AppendStatus(b []byte, label string, st Status) []byte {
	b = append(b, 'S', ' ')
	b = append(b, label...)
	kv := func(k, v string) {
		b = append(b, ' ')
		b = append(b, k...)
		b = append(b, '=')
		b = append(b, v...)
	}
	active := st.Active
	if active == "" {
		active = WordNone
	}
	kv("self", st.Self)
	kv("role", st.Role)
	kv("active", active)
	kv("token", strconv.FormatUint(st.Token, 10))
	kv("seq", strconv.FormatUint(st.Seq, 10))
	kv("uptime", FormatSeconds(st.Uptime))
	kv("keys", strconv.Itoa(st.Keys))
	kv("waiters", strconv.Itoa(st.Waiters))
	kv("sticky", strconv.FormatBool(st.Sticky))
	if st.Replication != "" {
		kv("replication", st.Replication)
		kv("degraded", strconv.FormatBool(st.Degraded))
	}
	if st.Durability != "" {
		kv("durability", st.Durability)
	}
	for _, c := range st.Changes {
		from := c.From
		if from == "" {
			from = WordNone
		}
		kv("change", strconv.FormatInt(c.At.UnixMilli(), 10)+","+from+","+c.To+","+url.QueryEscape(c.Reason))
	}
	for _, p := range st.Peers {
		up := "down"
		if p.Reachable {
			up = "up"
		}
		kv("peer", p.Addr+","+p.Role+","+up+","+strconv.FormatUint(p.Seq, 10)+","+strconv.FormatUint(p.Lag, 10)+","+strconv.FormatUint(p.Token, 10))
	}
	return append(b, '\n')
}

// ParseStatus reads the fields of an S answer.
func ParseStatus(a Answer) (Status, error) {
	var st Status
	if a.Kind != OpStatus {
		return st, errors.New("not a status answer: " + a.Kind.String())
	}
	for _, f := range a.Fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return st, errors.New("status field without '=': " + strconv.Quote(f))
		}
		var err error
		switch k {
		case "self":
			st.Self = v
		case "role":
			st.Role = v
		case "active":
			if v != WordNone {
				st.Active = v
			}
		case "token":
			st.Token, err = strconv.ParseUint(v, 10, 64)
		case "seq":
			st.Seq, err = strconv.ParseUint(v, 10, 64)
		case "uptime":
			var msg string
			st.Uptime, msg = ParseSeconds([]byte(v))
			if msg != "" {
				err = errors.New("uptime " + msg)
			}
		case "keys":
			st.Keys, err = strconv.Atoi(v)
		case "waiters":
			st.Waiters, err = strconv.Atoi(v)
		case "sticky":
			st.Sticky = v == "true"
		case "replication":
			st.Replication = v
		case "degraded":
			st.Degraded = v == "true"
		case "durability":
			st.Durability = v
		case "change":
			parts := strings.Split(v, ",")
			if len(parts) != 4 {
				return st, errors.New("change field wants unixms,from,to,reason: " + strconv.Quote(v))
			}
			var ms int64
			var reason string
			if ms, err = strconv.ParseInt(parts[0], 10, 64); err == nil {
				reason, err = url.QueryUnescape(parts[3])
			}
			c := RoleChange{At: time.UnixMilli(ms), From: parts[1], To: parts[2], Reason: reason}
			if c.From == WordNone {
				c.From = ""
			}
			st.Changes = append(st.Changes, c)
		case "peer":
			parts := strings.Split(v, ",")
			if len(parts) != 6 {
				return st, errors.New("peer field wants addr,role,up|down,seq,lag,token: " + strconv.Quote(v))
			}
			p := PeerStatus{Addr: parts[0], Role: parts[1], Reachable: parts[2] == "up"}
			if p.Seq, err = strconv.ParseUint(parts[3], 10, 64); err == nil {
				if p.Lag, err = strconv.ParseUint(parts[4], 10, 64); err == nil {
					p.Token, err = strconv.ParseUint(parts[5], 10, 64)
				}
			}
			st.Peers = append(st.Peers, p)
		}
		// Unknown fields are skipped so that older clients read newer servers.
		if err != nil {
			return st, errors.New("status field " + k + ": " + err.Error())
		}
	}
	return st, nil
}

// Queue is the answer to Q: a key's holders and its waiters in queue
// order. On the wire: "Q key TOKEN|- LEASE-LEFT|- N WAITED,ADDR ...", where
// TOKEN and LEASE-LEFT are the oldest holder's and N counts every waiter,
// the list holding the first MaxListKeys of them; a key that more than
// one may hold adds "limit=N" and one "holder=TOKEN,LEASE-LEFT" word per
// other holder; then "id=TOKEN,ID" for each holder, and "wid=I,ID" for
// each listed waiter (I counts from 1), whose acquire carried an id.
type Queue struct {
	Key       string
	Held      bool
	Token     uint64        // the oldest holder's token
	LeaseLeft time.Duration // and its lease left
	// Limit is how many may hold the key at once (0 or 1: a lock), and
	// Holders every holder, oldest first (Holders[0] is Token/LeaseLeft).
	Limit   int
	Holders []QueueHolder
	// Shared: the key is held by readers (mode=shared), every one of
	// them listed in Holders.
	Shared bool
	// Waiting counts the waiters; Waiters lists the first of them in
	// queue order. AppendQueue writes the larger of Waiting and
	// len(Waiters) as N.
	Waiting int
	Waiters []QueueWaiter
}

// QueueHolder is one holder of a Q answer.
type QueueHolder struct {
	Token     uint64
	LeaseLeft time.Duration
	ID        string // the id its acquire carried, "" when none
	// Set is the id of the set it was granted with (the token of the
	// set's first key), 0 for a key taken alone.
	Set uint64
	// Place is its place (1..N) of a semaphore, 0 for none.
	Place int
	// Value is its value (value=V of its acquire or renewal), "" when
	// none.
	Value string
}

// Name is who holds: the name its acquire's id leads with (IDName), as
// lockctl --name or the Go client's Options.Name gave it; "" when the
// acquire carried no id.
func (h QueueHolder) Name() string { return IDName(h.ID) }

// QueueWaiter is one waiter of a Q answer.
type QueueWaiter struct {
	Waited time.Duration // how long it has waited so far
	Addr   string        // the remote address of its connection
	ID     string        // the id its acquire carried, "" when none
	Shared bool          // it asks for the key as a reader
	// Set is, for an acquire of several keys, all of them in the order
	// asked; nil for one key.
	Set []string
}

// Name is who waits: the name its acquire's id leads with (IDName); ""
// when the acquire carried no id.
func (w QueueWaiter) Name() string { return IDName(w.ID) }

// AppendQueue writes the Q answer for q.
func AppendQueue(b []byte, q Queue) []byte { return appendQueue(b, OpQueue, q) }

// AppendWatch writes "L key BODY", a watch's view of q: BODY is the words
// of q's Q answer after its key, which ParseQueue reads.
func AppendWatch(b []byte, q Queue) []byte { return appendQueue(b, OpWatch, q) }

func appendQueue(b []byte, op Op, q Queue) []byte {
	b = append(b, byte(op), ' ')
	b = append(b, q.Key...)
	if q.Held {
		b = append(b, ' ')
		b = strconv.AppendUint(b, q.Token, 10)
		b = append(b, ' ')
		b = AppendSeconds(b, q.LeaseLeft)
	} else {
		b = append(b, " - -"...)
	}
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(max(q.Waiting, len(q.Waiters))), 10)
	for _, w := range q.Waiters {
		b = append(b, ' ')
		b = AppendSeconds(b, w.Waited)
		b = append(b, ',')
		if w.Addr == "" {
			b = append(b, WordNone...)
		} else {
			b = append(b, w.Addr...)
		}
	}
	// The holders written: the first alone for a lock held by a writer.
	holders := q.Holders
	if !q.Held {
		holders = nil
	} else if q.Limit <= 1 && !q.Shared && len(holders) > 1 {
		holders = holders[:1]
	}
	if q.Limit > 1 {
		b = append(b, " limit="...)
		b = strconv.AppendInt(b, int64(q.Limit), 10)
	}
	if q.Limit > 1 || q.Shared {
		for i, h := range holders {
			if i == 0 {
				continue // it is TOKEN and LEASE-LEFT
			}
			b = append(b, " holder="...)
			b = strconv.AppendUint(b, h.Token, 10)
			b = append(b, ',')
			b = AppendSeconds(b, h.LeaseLeft)
		}
	}
	for _, h := range holders {
		if h.ID != "" {
			b = append(b, " id="...)
			b = strconv.AppendUint(b, h.Token, 10)
			b = append(b, ',')
			b = append(b, h.ID...)
		}
	}
	for i, w := range q.Waiters {
		if w.ID != "" {
			b = append(b, " wid="...)
			b = strconv.AppendInt(b, int64(i+1), 10)
			b = append(b, ',')
			b = append(b, w.ID...)
		}
	}
	return append(appendQueueModes(b, q, holders), '\n')
}

// appendQueueModes writes the words of readers, sets, places and
// values: mode=, wmode=, set=, wset=, place=, value=.
func appendQueueModes(b []byte, q Queue, holders []QueueHolder) []byte {
	if q.Shared && q.Held {
		b = append(b, " mode=shared"...)
	}
	for i, w := range q.Waiters {
		if w.Shared {
			b = append(b, " wmode="...)
			b = strconv.AppendInt(b, int64(i+1), 10)
			b = append(b, ",shared"...)
		}
	}
	for _, h := range holders {
		if h.Set != 0 {
			b = append(b, " set="...)
			b = strconv.AppendUint(b, h.Token, 10)
			b = append(b, ',')
			b = strconv.AppendUint(b, h.Set, 10)
		}
	}
	for i, w := range q.Waiters {
		if len(w.Set) > 0 {
			b = append(b, " wset="...)
			b = strconv.AppendInt(b, int64(i+1), 10)
			b = append(b, ',')
			b = AppendKeys(b, w.Set)
		}
	}
	for _, h := range holders {
		if h.Place > 0 {
			b = append(b, " place="...)
			b = strconv.AppendUint(b, h.Token, 10)
			b = append(b, ',')
			b = strconv.AppendInt(b, int64(h.Place), 10)
		}
	}
	for _, h := range holders {
		if h.Value != "" {
			b = append(b, " value="...)
			b = strconv.AppendUint(b, h.Token, 10)
			b = append(b, ',')
			b = AppendValue(b, h.Value)
		}
	}
	return b
}

// ParseQueue reads the fields of a Q answer, or of an L answer (a
// watch's, whose body is a Q answer's).
func ParseQueue(a Answer) (Queue, error) {
	q := Queue{Key: a.Key}
	if (a.Kind != OpQueue && a.Kind != OpWatch) || len(a.Fields) < 3 {
		return q, errors.New("malformed queue answer")
	}
	f := a.Fields
	// The name=value words come last: limit=N, holder=TOKEN,LEASE,
	// id=TOKEN,ID, wid=I,ID.
	extra := len(f)
	for extra > 3 && strings.Contains(f[extra-1], "=") {
		extra--
	}
	if err := q.readHead(f[:extra]); err != nil {
		return q, err
	}
	if err := q.readHolders(f[extra:]); err != nil {
		return q, err
	}
	if err := q.readIDs(f[extra:]); err != nil {
		return q, err
	}
	return q, q.readModes(f[extra:])
}

// readHead reads "TOKEN|- LEASELEFT|- N WAITED,ADDR ...", the fields of
// a queue answer before its name=value words.
func (q *Queue) readHead(f []string) error {
	if f[0] != WordNone {
		q.Held = true
		var err error
		if q.Token, err = strconv.ParseUint(f[0], 10, 64); err != nil {
			return errors.New("queue answer token: " + err.Error())
		}
		var msg string
		if q.LeaseLeft, msg = ParseSeconds([]byte(f[1])); msg != "" {
			return errors.New("queue answer lease " + msg)
		}
		q.Holders = append(q.Holders, QueueHolder{Token: q.Token, LeaseLeft: q.LeaseLeft})
	}
	n, err := strconv.Atoi(f[2])
	listed := len(f) - 3
	if err != nil || n < listed || (n > listed && listed < MaxListKeys) {
		return errors.New("queue answer waiter count does not match its list")
	}
	q.Waiting = n
	for _, w := range f[3:] {
		waited, addr, _ := strings.Cut(w, ",")
		d, msg := ParseSeconds([]byte(waited))
		if msg != "" {
			return errors.New("queue answer waiter " + msg)
		}
		if addr == WordNone {
			addr = ""
		}
		q.Waiters = append(q.Waiters, QueueWaiter{Waited: d, Addr: addr})
	}
	return nil
}

// readHolders reads the limit=N and holder=TOKEN,LEASE words of a
// semaphore among words.
func (q *Queue) readHolders(words []string) error {
	for _, w := range words {
		name, val, _ := strings.Cut(w, "=")
		switch name {
		case "limit":
			l, err := strconv.Atoi(val)
			if err != nil || l < 1 {
				return errors.New("queue answer limit " + strconv.Quote(val))
			}
			if l > 1 {
				// limit=1 is a lock, which AppendQueue writes without it.
				q.Limit = l
			}
		case "mode":
			if val != "shared" {
				return errors.New("queue answer mode " + strconv.Quote(val))
			}
			q.Shared = q.Held
		case "holder":
			tok, lease, _ := strings.Cut(val, ",")
			t, err := strconv.ParseUint(tok, 10, 64)
			d, msg := ParseSeconds([]byte(lease))
			if err != nil || msg != "" {
				return errors.New("queue answer holder " + strconv.Quote(val))
			}
			q.Holders = append(q.Holders, QueueHolder{Token: t, LeaseLeft: d})
		}
		// Other words are for later versions.
	}
	most := max(q.Limit, 1)
	if q.Shared && q.Limit <= 1 {
		most = MaxLimit
	}
	if len(q.Holders) > most || (!q.Held && len(q.Holders) > 0) {
		return errors.New("queue answer lists more holders than its limit allows, or holders of a key nobody holds")
	}
	return nil
}

// readIDs gives the holders and waiters read before the ids that words
// name them by, id=TOKEN,ID and wid=I,ID, wherever those stand.
func (q *Queue) readIDs(words []string) error {
	for _, w := range words {
		name, val, _ := strings.Cut(w, "=")
		if name != "id" && name != "wid" {
			continue
		}
		which, id, _ := strings.Cut(val, ",")
		if CheckID(id) != "" {
			return errors.New("queue answer " + name + " " + strconv.Quote(val) + ": " + CheckID(id))
		}
		slot := q.idSlot(name, which)
		if slot == nil {
			return errors.New("queue answer " + name + " " + strconv.Quote(val) + " names no holder or waiter of the answer")
		}
		if *slot != "" {
			return errors.New("queue answer " + name + " " + strconv.Quote(val) + ": a second id for the same place")
		}
		*slot = id
	}
	return nil
}

// readModes reads the words of readers, sets, places and values that
// name the holders and waiters read before them: wmode=I,shared,
// set=TOKEN,SET, wset=I,KEYS, place=TOKEN,P and value=TOKEN,V.
func (q *Queue) readModes(words []string) error {
	for _, w := range words {
		name, val, _ := strings.Cut(w, "=")
		which, v, _ := strings.Cut(val, ",")
		bad := func() error {
			return errors.New("queue answer " + name + " " + strconv.Quote(clipString(val)))
		}
		switch name {
		case "wmode", "wset":
			i, err := strconv.Atoi(which)
			if err != nil || i < 1 || i > len(q.Waiters) || which[0] == '+' {
				return bad()
			}
			wt := &q.Waiters[i-1]
			if name == "wmode" {
				if v != "shared" || wt.Shared {
					return bad()
				}
				wt.Shared = true
				continue
			}
			keys, ok := SplitKeys(v)
			if !ok || wt.Set != nil || len(keys) < 2 {
				return bad()
			}
			wt.Set = keys
		case "set", "place", "value":
			h := q.holderOf(which)
			if h == nil {
				return bad()
			}
			if err := h.readMode(name, v); err != nil {
				return bad()
			}
		}
	}
	return nil
}

// holderOf is the holder of q whose token is which, nil for none.
func (q *Queue) holderOf(which string) *QueueHolder {
	t, err := strconv.ParseUint(which, 10, 64)
	if err != nil {
		return nil
	}
	for i := range q.Holders {
		if q.Holders[i].Token == t {
			return &q.Holders[i]
		}
	}
	return nil
}

// readMode reads one set=, place= or value= of h.
func (h *QueueHolder) readMode(name, v string) error {
	switch name {
	case "set":
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil || s == 0 || h.Set != 0 {
			return errors.New("bad set")
		}
		h.Set = s
	case "place":
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > MaxLimit || v[0] == '+' || h.Place != 0 {
			return errors.New("bad place")
		}
		h.Place = p
	case "value":
		val, msg := DecodeValue(v)
		if msg != "" || val == "" || h.Value != "" {
			return errors.New("bad value")
		}
		h.Value = val
	}
	return nil
}

// idSlot is where the id of an id= word (a holder, by its token) or of
// a wid= word (a waiter, by its place from 1) goes; nil when it names
// none of q's.
func (q *Queue) idSlot(name, which string) *string {
	if name == "id" {
		t, err := strconv.ParseUint(which, 10, 64)
		var slot *string
		for i := range q.Holders {
			if err == nil && q.Holders[i].Token == t {
				slot = &q.Holders[i].ID
			}
		}
		return slot
	}
	if i, err := strconv.Atoi(which); err == nil && i >= 1 && i <= len(q.Waiters) && which[0] != '+' {
		return &q.Waiters[i-1].ID
	}
	return nil
}

// MatchKeys reports whether key is selected by a K pattern: "*" selects
// every key, "pre*" every key starting with "pre", anything else itself.
func MatchKeys(pattern, key string) bool {
	if strings.HasSuffix(pattern, "*") {
		return strings.HasPrefix(key, pattern[:len(pattern)-1])
	}
	return key == pattern
}
