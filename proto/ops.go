package proto

import (
	"strings"

	"github.com/lockd-io/lockd/proto/auth"
)

// Class says what kind of line an op begins.
type Class uint8

const (
	// ClassNone: no line a node reads begins with this letter (the
	// answers' T, M and E, the records, the letters no op has).
	ClassNone Class = iota
	// ClassClient: a client's request, answered to clients and counted
	// as one.
	ClassClient
	// ClassPeer: a message one lockd node sends another (Request.Peer).
	// A node serves it only from the nodes of its --peers.
	ClassPeer
)

// LabelTakeback is the label of a handoff request a peer sends to take
// its role back by priority (doc.go, "Peer heartbeat"): "H takeback
// ADDR" is a peer's message, where any other H is an admin's command.
const LabelTakeback = "takeback"

// opRow is what lockd knows of one op: the server, the Go client and
// the metrics read these facts here rather than listing letters of
// their own.
type opRow struct {
	op   Op
	name string // in words, as errors, logs and metrics name it
	// help names it in the list of ops a refusal gives, when name does
	// not say it well enough for a person at nc.
	help  string
	class Class
	// needs is the role a connection must have proven to send it; one
	// whose key is peerLabel is a peer's and needs auth.Peer.
	needs     auth.Role
	peerLabel string
	// activeOnly: only the active serves it. Another node answers M; an
	// active handing off holds it until the handoff is settled.
	activeOnly bool
	// redirected: a node may answer it M (every client request but S,
	// which every node answers, and I, which is the connection's).
	redirected bool
	// refs: it may carry ref=R, and every answer to it carries it back,
	// a refusal too.
	refs bool
	// form spells it for refusals; min and max count the words it takes
	// after the key, and takes says what each is, the last kind taking
	// every word after it too.
	form     string
	min, max int
	takes    []arg
}

// opTable is every op a node reads, clients' first, in the order a
// refusal lists them. Adding an op is adding its row, and the kinds of
// words it takes if they are new (args.go).
var opTable = [...]opRow{
	{op: OpAcquire, name: "acquire", class: ClassClient, needs: auth.Client, activeOnly: true, redirected: true, refs: true,
		form: "A KEY LEASE WAIT [key=KEY]... [mode=shared] [limit=N] [id=ID] [value=V] [ref=R] (seconds; wait 0 = forever, - = never queue)", min: 2, max: MaxArgs,
		takes: []arg{argLease, argWait, argAcquireOption}},
	{op: OpRelease, name: "release", class: ClassClient, needs: auth.Client, activeOnly: true, redirected: true,
		form: "R KEY TOKEN", min: 1, max: 1, takes: []arg{argToken}},
	{op: OpRenew, name: "renew", class: ClassClient, needs: auth.Client, activeOnly: true, redirected: true,
		form: "N KEY TOKEN LEASE [value=V]", min: 2, max: 3, takes: []arg{argToken, argLease, argRenewOption}},
	{op: OpWithdraw, name: "withdraw", class: ClassClient, needs: auth.Client, activeOnly: true, redirected: true,
		form: "X KEY ID (the id= of the acquire to withdraw)", min: 1, max: 1, takes: []arg{argID}},
	{op: OpQueue, name: "queue", class: ClassClient, needs: auth.Client, activeOnly: true, redirected: true,
		form: "Q KEY with nothing after it"},
	{op: OpWatch, name: "watch", class: ClassClient, needs: auth.Client, activeOnly: true, redirected: true,
		form: "L KEY with nothing after it"},
	{op: OpUnwatch, name: "unwatch", class: ClassClient, needs: auth.Client, redirected: true,
		form: "U KEY with nothing after it"},
	{op: OpKeys, name: "keys", class: ClassClient, needs: auth.Client, activeOnly: true, redirected: true,
		form: "K KEY with nothing after it"},
	{op: OpStatus, name: "status", class: ClassClient, needs: auth.Client,
		form: "S KEY with nothing after it"},
	{op: OpHandoff, name: "handoff", class: ClassClient, needs: auth.Admin, peerLabel: LabelTakeback, redirected: true,
		form: "H LABEL [ADDR]", max: 1, takes: []arg{argAddr}},
	{op: OpAuth, name: "auth", help: "authenticate", class: ClassClient, needs: auth.None,
		form: "I ROLE SECRET, I ROLE hello NONCE [ADDR] or I ROLE proof PROOF", min: 1, max: 3, takes: []arg{argSecret}},

	{op: OpBeat, name: "heartbeat", class: ClassPeer, needs: auth.Peer,
		form: "P FROM ROLE TOKEN SEQ FLAGS", min: 4, max: MaxArgs,
		takes: []arg{argBeatRole, argBeatToken, argBeatSeq, argBeatFlags, argLater}},
	{op: OpSync, name: "subscribe", class: ClassPeer, needs: auth.Peer,
		form: "Y FROM TOKEN", min: 1, max: 1, takes: []arg{argPeerToken}},
	{op: OpResolve, name: "resolve", class: ClassPeer, needs: auth.Peer,
		form: "C FROM TOKEN [AGE]", min: 1, max: 2, takes: []arg{argPeerToken, argAge}},
	{op: OpTakeover, name: "takeover", class: ClassPeer, needs: auth.Peer,
		form: "O FROM TOKEN", min: 1, max: 1, takes: []arg{argPeerToken}},
	{op: OpApplied, name: "applied", class: ClassPeer, needs: auth.Peer,
		form: "V FROM SEQ", min: 1, max: 1, takes: []arg{argSeq}},
}

// opAt finds an op's row by its letter.
var opAt = func() (at ['Z' - 'A' + 1]*opRow) {
	for i := range opTable {
		at[opTable[i].op-'A'] = &opTable[i]
	}
	return at
}()

// rowOf is o's row, nil for a letter no line a node reads begins with.
func rowOf(o Op) *opRow {
	if o < 'A' || o > 'Z' {
		return nil
	}
	return opAt[o-'A']
}

// opList names the ops a client may send, for the refusals that list
// them.
var opList = func() string {
	var s strings.Builder
	for _, r := range opTable {
		if r.class != ClassClient {
			continue
		}
		if s.Len() > 0 {
			s.WriteString(", ")
		}
		name := r.name
		if r.help != "" {
			name = r.help
		}
		s.WriteString(r.op.String() + " " + name)
	}
	return s.String()
}()

// Ops lists every op a node reads, in the order of the table: clients'
// requests first, then peer messages.
func Ops() []Op {
	ops := make([]Op, len(opTable))
	for i, r := range opTable {
		ops[i] = r.op
	}
	return ops
}

// Name is the op in words ("acquire", "release", ...), as errors, logs
// and metrics name it; "" for a letter no request begins with.
func (o Op) Name() string {
	if r := rowOf(o); r != nil {
		return r.name
	}
	return ""
}

// Class says whether o begins a client's request or a peer message.
func (o Op) Class() Class {
	if r := rowOf(o); r != nil {
		return r.class
	}
	return ClassNone
}

// ActiveOnly reports whether only the active node serves o: another
// node answers it M, and an active handing off holds it until the
// handoff is settled.
func (o Op) ActiveOnly() bool {
	r := rowOf(o)
	return r != nil && r.activeOnly
}

// Redirected reports whether a node may answer o with M: every client
// request but S, which each node answers for itself, and I.
func (o Op) Redirected() bool {
	r := rowOf(o)
	return r != nil && r.redirected
}

// Needs is the role a connection must have proven to send r (package
// auth): none for I, the admin's for a handoff by command, the peer's
// for a peer message and for a take-back, a client's for the rest.
func (r *Request) Needs() auth.Role {
	row := rowOf(r.Op)
	switch {
	case row == nil:
		return auth.Client
	case row.peerLabel != "" && r.Key == row.peerLabel:
		return auth.Peer
	}
	return row.needs
}
