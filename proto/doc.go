// Package proto is lockd's wire protocol: the grammar of the lines that
// clients, lockctl and lockd nodes exchange, its limits, a parser for
// requests (Parse) and formatters for answers (AppendGranted and the other
// Append functions). This comment is the protocol document; the server
// (package cluster), the Go client (package proto/client), lockctl and the
// tests all follow it.
//
// The package owns how a request and an answer are written, and nothing
// else. It knows no engine rule (who is granted a key, when a lease ends,
// the order of a queue) and no role (which node is active, who follows
// whom): it only spells their outcomes. Where this document says what a
// server does (grants in FIFO order, redirects), it states lockd's promise
// so that a client can rely on it; the code that keeps it lives elsewhere.
//
// # Talking to lockd
//
// lockd listens on plain TCP, by default on 127.0.0.1:7070; clients and
// peers use the same port. Every request and every answer is one line, so
// a person can drive a server by hand:
//
//	$ nc 127.0.0.1 7070
//	A deploy 30 10
//	A deploy 7360982537641984001
//	R deploy 7360982537641984001
//	R deploy ok
//
// In every session of this document, the lines typed into nc and the lines
// the server writes back appear in the order they show on the terminal.
// Lines starting with # are commentary, neither sent nor received.
//
// # Line grammar
//
//	request = OP SP KEY *(SP ARG) [CR] LF
//	answer  = KIND SP KEY *(SP FIELD) LF
//
// where:
//
//   - OP and KIND are one upper-case ASCII letter. An answer's KIND is the
//     OP of its request, except T (timeout), M (moved) and E (error).
//   - Words are separated by a space (0x20). A server tolerates runs of
//     spaces, and spaces before the first word or after the last, because
//     people type them. Nothing else separates words, and no word holds a
//     tab or another control character (0x00 to 0x1F, 0x7F).
//   - A request ends in LF; CR LF is accepted. Answers end in LF alone.
//   - KEY is 1 to 255 bytes, none of them a space, a tab or another control
//     character (0x00 to 0x20, 0x7F). Every other byte is allowed, UTF-8
//     included. Keys are case-sensitive. Every answer echoes its request's
//     key byte for byte.
//   - A duration is decimal seconds with at most three digits after the
//     point: 30, 0.5, 2.25, 0.001. There is no sign, no exponent, and no
//     point without digits on both sides (".5" and "5." are refused).
//     Answers write durations the same way, cut to the millisecond and
//     without trailing zeros (FormatSeconds).
//   - A token is an unsigned 64-bit integer in decimal. lockd makes it
//     epoch<<22 | counter<<4 | node, the epoch being wall-clock
//     milliseconds and node the issuing node's position in --peers, so
//     tokens are large numbers like 7360982537641984001 that grow with
//     every grant, across restarts and failovers, and no two nodes ever
//     issue the same one. Compare tokens as numbers: the larger is the
//     newer.
//
// # Limits
//
//	MaxLineLen   4096 bytes in a request line, without its line ending
//	MaxKeyLen     255 bytes in a key
//	MaxArgs        24 words after the key
//	MaxSetKeys     16 keys in one acquire (its key and its key=KEY words)
//	MaxValueLen  1024 bytes in a value=V, decoded
//	MaxListKeys  1000 keys listed in one K answer, waiters in one Q answer
//	MaxSeconds   315360000 seconds (ten years) in one duration
//	precision    0.001 seconds: three digits after the point at most
//	tokens       0 to 18446744073709551615
//
// A line longer than MaxLineLen closes the connection: it cannot be a
// request of this grammar, so the server stops trusting the stream.
// Anything else a server cannot serve is answered E and the connection
// stays usable. lockd adds limits of its own configuration (--max-keys,
// --max-waiters, --max-total-waiters, --max-lease, --max-wait); what they
// refuse is answered E like any other refusal.
//
// A client must read its answers. lockd stops reading a connection that
// has more than 1 MiB of answers unread, until it has read most of them
// (a client may pipeline as much as it likes while it reads); a
// connection with more than --max-conn-output (8 MiB) unread, from grants
// to its waiters, is closed. Other limits close a connection with a last
// line "E - ?: words" saying which: a connection over --max-conns or
// --max-conns-per-ip, one that has not authenticated within
// --auth-timeout where the node requires it, and a line begun and not
// finished within --line-timeout.
//
// # Answers at a glance
//
//	request               answers
//	A key lease wait ...  A key token... [place=P] | T key | M key addr | E key A: words (each with ref=R when the A had one)
//	R key token           R key ok | R key notheld | M key addr | E key R: words
//	N key token lease ... N key ok | N key notheld | M key addr | E key N: words
//	X key id              X key ok | X key none | M key addr | E key X: words
//	Q key                 Q key TOKEN|- LEASELEFT|- NWAITERS WAITED,ADDR ... [name=value ...] | M | E
//	L key                 L key BODY, now and after every change | M | E
//	U key                 U key ok | E
//	K pattern             K pattern TOTAL KEY ... | M | E
//	S label               S label self=ADDR role=ROLE ... peer=... | E
//	H label [addr]        H label ok NEWACTIVE | M label addr | E label H: words
//
// M key addr says this node is not active and the active is at addr; the
// client sends the request there. Any client request but S and I may be
// answered M. addr is written as in --peers. While a failover is under
// way and no active is known yet, addr names the node expected to become
// active, which may be the answering node itself: a client retries there
// after a short pause. A node that has just started (role joining) and
// does not know yet who is active answers a lock request only once it
// does: M to the active it found, or the answer itself if it took the
// role; so does a node handing its role off, or paused.
//
// # Pipelining and matching answers
//
// A client may send its next request without waiting for the answer to the
// one before. Answers to different keys come back in any order, and a
// waiting A never delays the answers to later requests on the same
// connection. A client matches each answer to a request it sent and has
// not seen answered (Answer.ReqOp gives the op an answer belongs to):
//
//   - An answer matches the oldest outstanding request with the same
//     (op, key). The op of an answer is its KIND, except that:
//   - T answers A.
//   - E names the op it answers: "E deploy R: ..." answers "R deploy ...".
//   - M answers the oldest outstanding request on its key, whatever its op.
//
// The server answers requests with the same (op, key) in the order they
// were sent on the connection, which makes the rule exact.
//
// Acquires that carry ref=R are the exception, and are matched by their
// ref instead: every answer to such an acquire carries it back (A key
// token ref=R, T key ref=R, M key addr ref=R, E key A: ref=R words), and
// is written as soon as it is known, not held back behind an older
// acquire of the same key on the connection. So one connection can carry
// a long wait and a try-lock of the same key, and the try-lock's answer
// comes at once. A client that puts ref= on every acquire (the official
// clients do) matches A, T, M and E-of-A answers that carry a ref by ref
// alone; answers without a ref go by the (op, key) rule. An L line, and
// an M that matches no outstanding request, belong to a watch (see L). An E whose key
// is - or whose op is ? answers a line the server could not read that far;
// a client that sends only well-formed lines never meets one.
//
// # Locks, waiters and connections
//
// A lock is not tied to the connection that acquired it: the token alone
// identifies the holder. R and N may come on any connection: after a
// reconnect, or to the node that became active after a failover. A waiter,
// on the other hand, belongs to its connection: when that connection
// closes, the waiter leaves the queue. A lock whose holder died is taken
// back when its lease runs out, and passed to the next waiter.
//
// # A: acquire
//
//	A key lease wait [key=KEY]... [mode=shared] [limit=N] [id=ID] [value=V] [ref=R]
//
// Asks for the lock on key. lease is how long the lock is held unless it
// is renewed or released; it must be more than 0. wait is the longest the
// request stays in the key's queue; 0 waits forever, and - never queues:
// the try-lock, answered at once with A key token (granted) or T key
// (held by others). Waiters are served in
// FIFO order: when the holder releases or its lease runs out, the key
// passes at once to the head of the queue, with a new token.
//
// limit=N makes key a semaphore: up to N may hold it at once, each with a
// token and a lease of its own; the N+1th waits, FIFO as for a lock, and
// each release or expiry grants the head of the queue. A key gets its
// limit from the acquire that creates it; while it is held or waited on,
// an acquire asking another limit is refused (E key A: limit mismatch:
// ...). No limit is limit=1, a lock. Every token is still larger than
// every earlier one: each holder's token is unique. The words of this
// refusal start with "limit mismatch:", which a client may test for to
// tell it from other refusals; the rest is for a person.
//
// id=ID (1 to 64 bytes) names this acquire, for re-sending it safely: an
// acquire carrying the id of a grant that still holds key answers that
// grant again (same token, lease renewed) instead of queueing behind it,
// and one carrying the id of a waiter of key takes that waiter's place in
// the queue (the earlier request on a connection that closed is answered
// no more). A client that lost the answer to an acquire (a dropped
// connection, a failover) re-sends it with the same id. Ids travel with
// the grant to the standbys, and Q shows them. A client picks ids that no
// other client uses, for example 16 random bytes in hex. An id written
// NAME#SUFFIX also says who acquired: NAME is for people (lockctl's
// --name, user@host:pid by default), SUFFIX makes the id unique; tools
// show the part before the last # (IDName; a Q answer's holders and
// waiters read it with their Name method), or a whole id without one.
//
// ref=R (1 to 16 letters or digits, [0-9A-Za-z]) is the client's handle
// for the answer: every answer to the acquire ends with ref=R (for E, it
// is the first word after "A:"), and is not held back behind older
// acquires of the key (see Pipelining). A ref need only be unique among
// the client's outstanding acquires on one connection.
//
// Waiters whose acquire carried an id keep their place across a failover
// or a handoff: the active replicates each such waiter (key, id, place in
// the queue, wait left) to its standbys, and a node that takes the role
// keeps those places for a grace period (at most the failure timeout,
// and never more than 5 seconds). A re-sent acquire with the same id
// takes its place back, with the wait it had left, instead of joining the
// tail; a place nobody claims within the grace is dropped. While an
// unclaimed place is at the head of a key that frees, the key stays free
// for its waiter, for what is left of the grace at most; then the next
// waiter is granted. A try-lock never takes such a place. The grace is
// short because a client re-sends as soon as it finds the new active,
// within a failure timeout of the old one's end.
//
//	A key token     granted: token is the fencing token, larger than every earlier one
//	T key           the wait elapsed without a grant: nothing is held
//	M key addr      this node is not active: ask addr
//	E key A: words  refused
//
//	$ nc 127.0.0.1 7070
//	A deploy 30 10
//	A deploy 7360982537641984001
//	A deploy 30 2
//	# deploy is held (a lock is not its connection's: this one queues too)
//	# and two seconds later:
//	T deploy
//	A deploy 30 0
//	# waiting without a limit; the connection stays usable meanwhile:
//	R deploy 7360982537641984001
//	R deploy ok
//	# the head of the queue, the A sent above, is granted at once:
//	A deploy 7360982537641984002
//	A deploy 0 10
//	E deploy A: lease must be greater than 0 seconds
//
//	$ nc 127.0.0.1 7070    # a semaphore: at most two builds at once
//	A builds 60 0 limit=2
//	A builds 7360982537641984003
//	A builds 60 0 limit=2
//	A builds 7360982537641984004
//	A builds 60 0 limit=3
//	E builds A: limit mismatch: key "builds" allows 2 holders; this acquire asked for 3: every acquire of it must ask for that limit
//
//	$ nc 127.0.0.1 7071
//	A deploy 30 10
//	M deploy 127.0.0.1:7070
//
//	$ nc 127.0.0.1 7070    # try-locks, and refs that let answers overtake
//	A report 30 0 ref=1
//	A report 7360982537641984006 ref=1
//	A report 30 - ref=2
//	T report ref=2
//	A report 30 60 id=bob#7 ref=3
//	# waiting; a try-lock sent behind it is answered at once all the same:
//	A report 30 - ref=4
//	T report ref=4
//	A report 30 - limit=2 ref=5
//	E report A: ref=5 limit mismatch: key "report" allows 1 holder; this acquire asked for 2: every acquire of it must ask for that limit
//
// # Readers, sets of keys, values and places
//
// mode=shared takes key as a reader: any number of readers hold a lock
// at once (at most the server's --max-limit, 1024 by default), never
// beside a writer. Without it, or with mode=exclusive, the acquire is a
// writer, as it always was. The queue stays FIFO: a reader never passes
// a writer queued before it, and when a writer releases, the run of
// readers queued behind it is granted together. Every reader has a token
// of its own, released and renewed alone. mode=shared with limit=N, N
// more than 1, is refused: a semaphore's places are all alike.
//
// key=KEY, repeated, adds keys to the acquire: up to 16 keys in all,
// the line's key first, each named once. All or none: the acquire is
// granted when every key admits it, and waits in every key's queue
// meanwhile, holding none of them; mode= and limit= apply to every key.
// Its grant is one line with one token per key, in the order the keys
// were asked; from then on each key is held on its own (R, N and its
// lease, by its token). A wait that ends, an X that names any of its
// keys, or its connection closing, takes the whole set out of every
// queue, answered once (T on the line's key). Two sets over the same
// keys never deadlock, whatever the order of their keys: the server
// queues a set on all its keys at once, so two sets stand in the same
// order in every queue they share, the order they arrived in.
//
// value=V gives the holder a value: what observers (Q, L) see of it, an
// election's leader for example. V is percent-encoded UTF-8: a byte other
// than A-Z a-z 0-9 - . _ ~ may be written %XX, and a space, %, =, , and
// + and every byte at or below 0x20 or at or above 0x7F must be. At most
// 1024 bytes once decoded. A renewal with value=V replaces it without
// giving the key up (N, below).
//
// A semaphore's grant (limit=N, N more than 1, one key) says which of its
// N places the holder has, place=P, 1 to N, the lowest free at the
// grant; a resource may fence by place and token. Locks, readers and
// sets have no place.
//
//	A key TOKEN [TOKEN]... [place=P] [ref=R]
//
//	$ nc 127.0.0.1 7070    # readers and a writer
//	A cfg 30 0 mode=shared
//	A cfg 7360982537641984001
//	A cfg 30 0 mode=shared
//	A cfg 7360982537641984017
//	A cfg 30 0
//	# the writer waits for both readers; a reader sent now waits behind it:
//	A cfg 30 0 mode=shared
//	Q cfg
//	Q cfg 7360982537641984001 29.1 2 0.5,127.0.0.1:51234 0.2,127.0.0.1:51234 holder=7360982537641984017,29.8 mode=shared wmode=2,shared
//	R cfg 7360982537641984001
//	R cfg ok
//	R cfg 7360982537641984017
//	# the last reader gone, the writer holds cfg alone:
//	A cfg 7360982537641984033
//	R cfg ok
//	R cfg 7360982537641984033
//	# and the reader queued behind it is granted as it goes:
//	A cfg 7360982537641984049
//	R cfg ok
//
//	$ nc 127.0.0.1 7070    # a set: three keys at once, a token each
//	A a 30 10 key=b key=c
//	A a 7360982537641984065 7360982537641984081 7360982537641984097
//	Q b
//	Q b 7360982537641984081 29.6 0 set=7360982537641984081,7360982537641984065
//
//	$ nc 127.0.0.1 7070    # an election: a value, and a Proclaim
//	A leader 10 0 value=node%201%20(10.0.0.1)
//	A leader 7360982537641984113
//	N leader 7360982537641984113 10 value=node%202
//	N leader ok
//	Q leader
//	Q leader 7360982537641984113 9.9 0 value=7360982537641984113,node%202
//
//	$ nc 127.0.0.1 7070    # a semaphore's places
//	A pool 30 0 limit=2
//	A pool 7360982537641984129 place=1
//	A pool 30 0 limit=2
//	A pool 7360982537641984145 place=2
//
// # X: withdraw
//
//	X key id
//
// Takes the waiting acquire of key whose id=ID is id out of the queue at
// once, as if its wait had elapsed: a client that gives up waiting (its
// caller was interrupted, its deadline passed) sends X rather than
// leaving a waiter that would be granted and released for nothing. X
// withdraws only an acquire sent on the same connection. The acquire is
// answered first, T key (with its ref=R if it had one), then the X.
//
//	X key ok        the acquire was waiting and is withdrawn (its T came just before)
//	X key none      no acquire with that id waits on key from this connection:
//	                granted already, timed out, or never queued
//	M key addr      this node is not active: ask addr
//	E key X: words  refused
//
// After X key none, a grant may be on its way (it crossed the X on the
// wire): the client releases it when it comes.
//
//	$ nc 127.0.0.1 7070
//	A report 30 60 id=carol#1 ref=6
//	X report carol#1
//	T report ref=6
//	X report ok
//	X report carol#1
//	X report none
//
// # L: watch, U: unwatch
//
//	L key
//	U key
//
// L subscribes the connection to key's holders and waiters. It is
// answered at once with L key BODY, where BODY is exactly the words a Q
// answer has after its key (ParseQueue reads an L answer as it reads a
// Q), and again with a fresh L key BODY after every change of the key's
// holders or waiters: a grant, a release, an expiry, a waiter joining or
// leaving, a place of a semaphore taken or freed. Renewals alone send
// nothing. Several changes served at once may show as one line, the
// state after them; so do the changes made while the connection has
// not yet taken what it was sent (it reads slower than the key
// changes): once it has, it gets the latest state, not every state in
// between. An L of a key already watched on the connection
// answers its state again; it is still one watch. U ends the watch: U key
// ok, after which no L key line follows. A watch ends when its
// connection closes.
//
// A connection watches at most --max-watches keys (default 256), the
// connections of one address together a tenth of --max-total-watches
// (where --max-conns-per-ip caps them), a node at most
// --max-total-watches (default 100000); beyond them L is answered
// E key L: words. On a node with secrets, L needs an authenticated
// connection like every lock request. A standby answers L with M key
// addr. When the active gives its role up (a handoff, a demotion), every
// watch on it is answered M key addr and ends: a client that reads an M
// matching no outstanding request of its own, while it watches key,
// watches key again at addr, and delivers the state it first reads there.
//
//	$ nc 127.0.0.1 7070
//	L deploy
//	L deploy - - 0
//	# another client acquires deploy:
//	L deploy 7360982537641984007 30 0
//	# and a third waits for it:
//	L deploy 7360982537641984007 28.1 1 0,127.0.0.1:51300
//	U deploy
//	U deploy ok
//
// # R: release
//
//	R key token
//
//	R key ok        released; the head of the queue, if any, is granted at once
//	R key notheld   token does not hold key: it never did, or its lease ran out
//	M key addr      this node is not active: ask addr
//	E key R: words  refused
//
// Releasing twice is harmless: a release of a token released in the last
// ten seconds (lockd remembers them, up to 65536, and a standby that takes
// over remembers what the active did) is answered ok again, so a client
// may re-send a release it is not sure arrived (the official clients do,
// for a few seconds, across a failover) and is never told notheld for a
// release that was applied.
//
//	$ nc 127.0.0.1 7070
//	R deploy 7360982537641984002
//	R deploy ok
//	R deploy 7360982537641984002
//	R deploy ok
//	R deploy 7360982537641984999
//	R deploy notheld
//	R deploy 12x
//	E deploy R: token "12x" is not an unsigned 64-bit integer
//
// # N: renew
//
//	N key token lease [value=V]
//
// Restarts the lease of the lock that token holds: it now ends lease
// seconds after the server reads the request, whatever was left of it. A
// long job renews well before its lease runs out. value=V (encoded as on
// A) replaces the holder's value, and the watchers of key are sent the
// change at once (an election's Proclaim); without it the value stays.
//
//	N key ok        renewed
//	N key notheld   token does not hold key (any more): as for R
//	M key addr      this node is not active: ask addr
//	E key N: words  refused
//
//	$ nc 127.0.0.1 7070
//	A build 10 0
//	A build 7360982537641984003
//	N build 7360982537641984003 60
//	N build ok
//	# more than 60 seconds later, the lease has run out:
//	N build 7360982537641984003 60
//	N build notheld
//
// # Q: queue
//
//	Q key
//
//	Q key TOKEN LEASELEFT NWAITERS WAITED,ADDR ... [limit=N] [holder=TOKEN,LEASELEFT ...] [id=TOKEN,ID ...] [wid=I,ID ...]
//	      [mode=shared] [wmode=I,shared ...] [set=TOKEN,SET ...] [wset=I,KEY+KEY... ...] [place=TOKEN,P ...] [value=TOKEN,V ...]
//
// TOKEN holds key for LEASELEFT more seconds; both are - when nobody holds
// it. NWAITERS counts the waiters; the first of them, at most MaxListKeys
// (1000), follow in queue order, the next to be granted first, each as the
// seconds it has waited so far and the remote address of its connection
// (- when unknown). A key nobody holds or waits on
// answers "Q key - - 0". M and E as for A. ParseQueue reads the answer.
//
// Words of the form name=value follow, in this order:
//
//	limit=N              the key is a semaphore that N may hold at once (no limit=: a lock)
//	holder=TOKEN,LEFT    one per holder of a semaphore or reader of a lock after the first
//	                     (TOKEN above), oldest first: its token and lease left
//	id=TOKEN,ID          the id the acquire of holder TOKEN carried, one per holder that had one
//	wid=I,ID             the id of the I-th waiter listed (from 1), one per waiter that had one
//	mode=shared          the key is held by readers
//	wmode=I,shared       the I-th waiter listed asks as a reader
//	set=TOKEN,SET        holder TOKEN was granted as one key of a set, whose id SET is
//	                     the token of the set's first key
//	wset=I,KEY+KEY...    the I-th waiter listed is a set over these keys, in order, each
//	                     percent-encoded as a value is
//	place=TOKEN,P        holder TOKEN of a semaphore has place P
//	value=TOKEN,V        holder TOKEN's value, percent-encoded
//
// An ID runs to the end of its word and may itself hold , and =. A reader
// skips the names it does not know, so later versions can add more; the
// words before them never change, whatever follows.
//
//	$ nc 127.0.0.1 7070
//	Q deploy
//	Q deploy 7360982537641984001 29.5 2 3.2,127.0.0.1:51234 0.4,127.0.0.1:51240
//	Q nothing
//	Q nothing - - 0
//
//	$ nc 127.0.0.1 7070    # acquires that carry ids: the Go client's and lockctl's do
//	A deploy 30 0 id=alice@ci-1:4242#9f3c2a7d1e5b6a70-1
//	A deploy 7360982537641984005
//	Q deploy
//	Q deploy 7360982537641984005 29.9 1 2.1,127.0.0.1:51260 id=7360982537641984005,alice@ci-1:4242#9f3c2a7d1e5b6a70-1 wid=1,bob@ci-2:811#0c1d2e3f40516273-1
//	Q builds
//	Q builds 7360982537641984003 41.2 0 limit=2 holder=7360982537641984004,58.7 id=7360982537641984003,nightly#1 id=7360982537641984004,carol@ci-3:77#5e6f708192a3b4c5-1
//
// # K: keys
//
//	K pattern
//
//	K pattern TOTAL KEY ...
//
// Lists the keys held or waited on that pattern selects: * selects every
// key, pre* every key that starts with pre, any other pattern only itself
// (MatchKeys). A pattern is written like a key. The keys come sorted
// bytewise, at most MaxListKeys (1000) of them; TOTAL counts every match,
// so a TOTAL larger than the keys listed means the list was cut. M and E
// as for A.
//
//	$ nc 127.0.0.1 7070
//	K *
//	K * 3 build deploy deploy-db
//	K deploy*
//	K deploy* 2 deploy deploy-db
//	K nothing
//	K nothing 0
//
// # S: status
//
//	S label
//
//	S label self=ADDR role=ROLE active=ADDR token=TOKEN seq=SEQ uptime=SECS keys=N waiters=N sticky=BOOL peer=PEER ...
//
// Every node answers S, active or not: it is never answered M. label is
// any key-shaped word, echoed back; by convention -. The answer's fields
// are key=value words:
//
//	self     this node's address, as written in --peers
//	role     active, standby, joining (started, not yet synced; or did not run for
//	         a failure timeout and has not heard its peers since, whatever its role
//	         was, with active -) or handoff (handing the role over)
//	active   the address of the active this node knows of, - when none
//	token    the highest token this node knows of: its high-water mark
//	seq      replication position: state changes applied
//	uptime   seconds since the process started
//	keys     keys held or waited on
//	waiters  waiters queued
//	sticky   true when this node gave the role up by command (see H)
//	replication  sync or async (--replication)
//	degraded     true on a sync-mode active that no standby is in sync with:
//	             it answers at once, and a crash of it may lose those answers
//	durability   memory (the state lives in memory only), or disk:MODE with a
//	             data directory (--data-dir), MODE its --fsync mode: always,
//	             batch or never
//	change   UNIXMS,FROM,TO,REASON: one per time this node took the role
//	         (its last eight, oldest first): when, in milliseconds since
//	         1970, from which node (- none), to which (this one), and why,
//	         query-escaped (a + for each space); every move of the role has
//	         a node that took it, so the nodes' changes together are the
//	         cluster's
//	peer     ADDR,ROLE,up|down,SEQ,LAG,TOKEN: one per node of --peers, in priority
//	         order, this one included; LAG is how many changes it is behind the
//	         active (0 when caught up or unknown), TOKEN its high-water mark
//
// A reader skips fields it does not know, so that older clients read newer
// servers. ParseStatus reads the answer.
//
// S is also the official client's liveness probe: it sends "S -" first on
// every connection (the connection counts as up once answered) and again
// when a connection has read nothing for a while: after a quarter of its
// failure timeout while requests wait (about 4 a second), after the whole
// of it when idle (about 1 a second). A node that does not answer in time
// is treated as gone, and the requests move to another node. S costs the
// node no lock-state work and is never held for replication.
//
//	$ nc 127.0.0.1 7071
//	S -
//	S - self=127.0.0.1:7071 role=standby active=127.0.0.1:7070 token=7360982537641984003 seq=42 uptime=3605.2 keys=2 waiters=1 sticky=false peer=127.0.0.1:7070,active,up,42,0,7360982537641984003 peer=127.0.0.1:7071,standby,up,42,0,7360982537641984003
//
// # H: handoff
//
//	H label [addr]
//
// Sent to the active: it hands its role to its successor by --peers
// priority, or to addr when given. label is as for S. A node that gave the
// role up this way is sticky: it stays a standby and does not take the
// role back by priority until it restarts or a later handoff names it.
// The role is pinned on its new holder the same way: no node that was
// running when the handoff happened takes it back by priority; a node
// restarted since then does.
//
//	H label ok NEWACTIVE   handed over: NEWACTIVE is the active now
//	M label addr           this node is not active: ask addr
//	E label H: words       refused
//
//	$ nc 127.0.0.1 7070
//	H -
//	H - ok 127.0.0.1:7071
//	A deploy 30 10
//	M deploy 127.0.0.1:7071
//
// # I: authenticate
//
//	I role secret
//	I role hello nonce addr
//	I role proof proof
//
// A node started with a secret (--secret-file, --admin-secret-file,
// --peer-secret-file) or with --tls-client-auth serves a connection only
// as far as it has proven a role: client (A, R, N, X, Q, L, U, K, S),
// admin (a client that may also send H) or peer (the peer messages
// below). Until then every request but I is answered "E key OP:
// authenticate first: ...".
// A verified TLS client certificate proves the role its OU names
// (lockd-peer, lockd-admin, lockd-client). A secret proves its own role
// and the roles below it; with no --admin-secret-file, the client secret
// proves admin too. A node started with none of these asks nothing: every
// connection holds every role, as on the loopback default.
//
// The plain form sends the secret itself, for a person at nc over TLS or
// on loopback:
//
//	I role secret          ->  I role ok GRANTED
//
// The official client and the nodes prove the secret without sending it,
// and check that the node knows it too, by challenge and response: nonce
// is 16 random bytes in lower-case hex, proof is HMAC-SHA256 keyed with the
// secret, in lower-case hex (package proto/auth has the exact strings):
//
//	I role hello CNONCE ADDR  ->  I role challenge SNONCE
//	I role proof CPROOF       ->  I role ok GRANTED SPROOF
//
// ADDR is the address the client dialled, as it wrote it (HOST:PORT):
// the proofs are bound to it, and a node refuses a hello whose ADDR is
// not one of its own (a peer's: exactly its address in --peers; over
// TLS a client's ADDR is not checked), so that a stranger listening on
// another address cannot relay a client's handshake to it.
//
// GRANTED is the role the connection now holds. A role the node grants
// without proof is answered "I role ok GRANTED" at once, to either form.
// A wrong secret or proof is answered E and closes the connection.
//
//	$ nc 127.0.0.1 7070    # a node started with --secret-file and --admin-secret-file
//	A deploy 30 10
//	E deploy A: authenticate first: this node requires a secret
//	I client 0bHb8hOUT3gFQf6yI8g9kA
//	I client ok client
//	A deploy 30 10
//	A deploy 7360982537641984001
//	H -
//	E - H: this needs the admin role: authenticate with the admin secret or an admin certificate
//
// # E: errors
//
//	E key OP: words
//
// Any request may be answered E. key is the request's key, or - when it
// could not be read; OP is the request's op letter, or ? when the line had
// none. The words are for a person: a refusal of the grammar names what
// was wrong (the op, the key, the lease, the wait, the token, the number
// of arguments, the length of the line). They are not part of the
// contract; a client shows them and does not parse them. After an E the
// connection stays usable. On a node that requires authentication, a line
// that cannot be read, sent before the connection proved a role, is
// answered with key - in place of its key, which may be a secret typed in
// the wrong place ("i SECRET"); so is an I line whose key is no role.
//
//	$ nc 127.0.0.1 7070
//	a deploy 30 10
//	E deploy ?: op "a" is not one upper-case letter (A acquire, R release, N renew, X withdraw, Q queue, L watch, U unwatch, K keys, S status, H handoff, I authenticate)
//	A deploy 30
//	E deploy A: want A KEY LEASE WAIT [key=KEY]... [mode=shared] [limit=N] [id=ID] [value=V] [ref=R] (seconds; wait 0 = forever, - = never queue), got 1 argument(s)
//	A deploy 30 1.2345
//	E deploy A: wait "1.2345" has more than millisecond precision (at most 3 digits after the point)
//	R deploy
//	E deploy R: want R KEY TOKEN, got 0 argument(s)
//	Q deploy
//	Q deploy - - 0
//
// # Peer messages
//
// lockd nodes talk to each other on the client port, in the same grammar.
// Clients never send these. What they mean for roles is package cluster's
// business; this package only spells them. The sessions show the bytes for
// whoever debugs a cluster: typed at live nodes, they change what those
// nodes believe about each other. Peer messages (P, Y, O, C, and H with
// the label takeback) need the peer role (see I), and a node answers E to
// one whose FROM is not one of its --peers, so a client cannot move its
// token epoch or pose as a standby. A node ignores a token from a peer
// whose epoch is further ahead of its own clock than --max-clock-skew.
//
// # Peer heartbeat: P
//
// Every node sends P to every other node every --heartbeat:
//
//	P FROM ROLE TOKEN SEQ FLAGS
//	P FROM SELF ROLE TOKEN SEQ ACTIVE FLAGS
//
// FROM is the sender's address as written in --peers (the key of the
// line), ROLE its role, TOKEN its token high-water mark, SEQ its
// replication position, FLAGS - or a comma list of sticky (gave the role
// up by command), synced (has applied a snapshot), fresh (active that
// started empty and has fed no standby yet: it gives way to an active that
// holds the cluster's state), restored (started from the state of its
// data directory, --data-dir, and has neither synced from an active nor
// been one since: while such a node is a candidate and no standby of the
// last active is, the node with the newest state serves first), paused
// (it did not run for a failure timeout and has not heard its peers since:
// its word on its role is stale, and a peer never yields to it),
// pinned:MS (active by a handoff asked for by
// command, MS milliseconds ago), top:TOKEN (the newest token of the node's
// lock state, granted there or replicated) and, on an active, base:TOKEN
// and bseq:SEQ (what top and SEQ were when it became active: two actives
// that meet compare them with each other's top and SEQ to tell whose
// state is newer, renewals and releases included, see package
// cluster/core) and prev:ADDR (the active it took the role from),
// round:N (a
// counter the answer echoes, so a node that was paused knows an answer is
// fresh), v:N (the peer messages the node speaks, PeerVersion; none is 1)
// and, on a sync-mode active, isr:ADDR+ADDR (the standbys its answers wait
// for: after a failure one of them is promoted first). Words after
// FLAGS are tolerated, for later versions, and so are flags a node does not
// know. The answer echoes FROM, then gives
// the answering node's own address (SELF), role, token, seq, the active it
// knows of (ACTIVE, - when none) and its flags.
//
//	$ nc 127.0.0.1 7070
//	P 127.0.0.1:7071 standby 7360982537641984003 42 synced
//	P 127.0.0.1:7071 127.0.0.1:7070 active 7360982537641984003 42 127.0.0.1:7070 -
//
// A node of higher priority that restarted, joined as a standby and
// synced takes its role back with a handoff request of the reserved label
// takeback, naming itself; unlike a handoff asked for by command, it does
// not make the giver sticky:
//
//	H takeback 127.0.0.1:7070
//	H takeback ok 127.0.0.1:7070
//
// # Peer replication: Y, G, F, J, D, W, V, H, O
//
// A standby subscribes to the active's state on a connection
// of its own, giving its address (FROM) and its token high-water mark:
//
//	Y FROM TOKEN
//
// From then on the active writes records on that connection, each a line
// of the same grammar. First a snapshot:
//
//	G key token leaseleft [limit=N] [id=ID] [mode=shared] [set=SET] [place=P] [value=V]
//	                         one per holder: its token and lease left, in seconds,
//	                         the key's limit (a semaphore), the acquire's id, and
//	                         (version five) its mode, set, place and value
//	F key token              the latest releases of the last ten seconds (a
//	                         thousand at most), oldest first, remembered as
//	                         below (version four)
//	J key id lease waitleft [limit=N] [mode=shared] [keys=KEY+KEY...]
//	                         one per waiter whose acquire had an id, each key's
//	                         in queue order (a waitleft of zero waits forever);
//	                         a set's once, on its first key, keys= its others
//	Y FROM synced TOKEN SEQ [top=T]
//	                         the snapshot is complete; TOKEN and SEQ are the active's,
//	                         T the newest token of its state, granted or freed
//	                         since it began: its holders may all be older
//
// then live records, in the order the changes happened:
//
//	G key token leaseleft [limit=N] [id=ID] [mode=shared] [set=SET[,N]] [place=P] [value=V]
//	                         granted or renewed; the grant of a set is N G records
//	                         in a row, each set=SET,N, one change that the standby
//	                         applies once all N have come (never half a set)
//	F key token [expired]    freed: released by its holder, or (expired) its lease
//	                         ran out; a standby remembers a release for ten seconds,
//	                         so a release sent again after a failover is told ok
//	J key id lease waitleft [limit=N] [mode=shared] [keys=KEY+KEY...]
//	                         a waiter with an id joined the tail of key's queue
//	                         (a J of an id already known moves it there)
//	D key id                 that waiter left without a grant (its wait ended, it
//	                         was withdrawn, its connection closed); a G with its
//	                         id says it was granted
//	W - TOKEN SEQ            periodic mark: the active's high-water mark and position
//	H FROM TOKEN SEQ [pinned] handoff: you are the successor; promote once this is applied
//	                          (pinned: asked for by command, see H above)
//
// and the successor, once it serves as the active, answers on the same
// connection with its token high-water mark:
//
//	O FROM TOKEN
//
// A standby of version 2 acknowledges, on the same connection, every batch
// of records it applied, with its position (records are applied in order,
// so one acknowledgement covers everything before it):
//
//	V FROM SEQ
//
// In sync mode (--replication sync) the active writes an answer that
// depends on a change (a grant, a release, a renewal, a read after them)
// only once every standby in sync has acknowledged that change. An active
// writes version-1 standbys no limit= and id= words; they do not
// acknowledge, so answers never wait for them (see README, rolling
// upgrades).
//
// A node that is not active answers Y with "M FROM addr". When the active
// stops feeding a stream (it hands off, demotes or shuts down), it writes
// "M - addr", addr being where the role went, and closes the connection.
// Parse reads P, Y, C, O and V as requests, their fields in Request.Peer;
// ParseAnswer reads their answers and the records, and ParseRecord what
// it made of a record. Each live G and F record moves SEQ by one; J and D do not
// (a standby of version 2 never sees them, and counts the same SEQ).
//
// A waiter belongs to its connection to the old active, which answers it
// M when it gives the role up, and its client asks again wherever the
// active is, with the same id. The J and D records let it keep its place:
// a standby keeps the waiters it was told of, and when it takes the role
// (a failover, a handoff) it keeps their places, in order, behind the
// holders, for a grace of one failure timeout (at least 0.5 and at most 5
// seconds): the re-sent acquire takes its place back (see A). An active
// writes J and D only to standbys of version 3; the snapshot's J records
// come last, right before the synced mark.
//
// # Settling a handoff: C
//
// When the successor's confirmation (O) does not come within 3 seconds,
// or its stream closes first, the successor may have taken the role all
// the same, its O lost on the way. The old active then serves nothing and
// asks the successor, on a connection of its own, naming the handoff by
// the TOKEN of its H record, and saying how many seconds ago it began
// (AGE, version 4):
//
//	C FROM TOKEN [AGE]
//	C FROM taken        the successor took that handoff, or is active anyway: follow it
//	C FROM cancelled    it did not: it will ignore the H record if it still reads it
//	C FROM unknown      it has run for less than AGE: it may have taken the handoff
//	                    before it restarted, and cannot tell; the old active steps
//	                    back and the usual rules pick the active
//
// The old active asks every heartbeat until it has an answer; when the
// successor cannot be reached for a failure timeout, or refuses the
// connection, the role goes to the best live node by the usual rules.
//
//	$ nc 127.0.0.1 7070
//	Y 127.0.0.1:7071 7360982537641984001
//	G build 7360982537641984003 41.2
//	G deploy 7360982537641984002 12.75
//	Y 127.0.0.1:7071 synced 7360982537641984003 42 top=7360982537641984003
//	V 127.0.0.1:7071 42
//	F deploy 7360982537641984002
//	G deploy 7360982537641984004 30
//	J deploy bob#2 30 9.5
//	D deploy bob#2
//	F build 7360982537641984003 expired
//	W - 7360982537641984004 45
//	V 127.0.0.1:7071 45
//	H 127.0.0.1:7071 7360982537641984004 45
//	O 127.0.0.1:7071 7360982537641984004
package proto
