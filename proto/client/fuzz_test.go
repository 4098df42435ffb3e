package client

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lockd-io/lockd/proto"
)

// FuzzDispatch feeds a connection a script of requests sent and answer
// lines read, in any interleaving, and checks the answer matcher
// (conn.dispatch, popLocked, popAnyLocked) against the rule of doc.go:
// an answer goes to the oldest outstanding request with its (op, key),
// T answering A and E naming its op; M goes to the oldest outstanding
// request on its key, whatever its op but S. Whatever the lines, nothing
// panics, every call gets exactly one result (an answer, or the error of
// the connection dropping), and no call gets an answer that is not its.
//
// The script is lines. "> OP KEY" sends a request, ">! OP KEY" sends one
// and abandons it at once, as a caller whose context ends does. Any other
// line is what the node writes, read as readLoop reads it: a line the
// client cannot parse, or an E that matches no request, drops the
// connection, which fails every call still outstanding; a last line
// without its LF is never read.
func FuzzDispatch(f *testing.F) {
	for _, s := range []string{
		"> A deploy\n> R deploy\nR deploy ok\nA deploy 7360982537641984001\n",
		"> A deploy\nT deploy\n",
		"> A deploy\n> R deploy\nE deploy R: token \"12x\" is not an unsigned 64-bit integer\nE deploy A: lease must be greater than 0 seconds\n",
		"> R deploy\n> A deploy\n> Q deploy\nM deploy 127.0.0.1:7071\nM deploy 127.0.0.1:7071\nQ deploy - - 0\n",
		"> A k\n> A k\n> A k\nA k 1\nT k\nA k 3\n",
		"> A k\n> A k\nA k 1\n> A k\n> A k\nA k 2\n> A k\nA k 3\nA k 4\nA k 5\n",
		"> A k\nA other 1\nR k ok\nA k 1\n",
		"> A k\nE k R: not yours\n",
		"> A k\nE - ?: empty line: send OP KEY [ARG]..., for example: A deploy 30 10\n",
		">! A k\nA k 5\n",
		">! A k\n> A k\nT k\nA k 6\n",
		"> A k\nnot an answer\n",
		"> K *\n> S -\n> H -\n> N build\nK * 0\nH - ok 127.0.0.1:7071\nS - self=a\nN build notheld\n",
		"> H -\n> S -\nM - 127.0.0.1:7071\nS - self=a\n",
		"> A k\nA k 1",
		"> R k\r\nR k ok\r\n",
		"> A 鍵\n> R 鍵\nM 鍵 127.0.0.1:7070\nR 鍵 ok\n",
		"> P k\n> A k k\n> X k\nP k a b\n",
		"> A k\n> A k\nT k ref=2\nA k 7 ref=1\n",
		"> A k\n> A k\nE k A: ref=2 limit mismatch: no\nM k 127.0.0.1:7071 ref=1\n",
		"> A k\nA k 7 ref=9\nE k A: ref=9 no\n",
		"> A k\n> A k\nT k\nA k 7 ref=zz\n",
		"> L k\nL k - - 0\nL k 7 30 0\nM k 127.0.0.1:7071\n",
		"> X k\n> U k\nX k ok\nU k ok\n",
		"",
	} {
		f.Add([]byte(s))
	}
	c, err := newClient([]string{"127.0.0.1:1"}, Options{}, hooks{
		dial: func(context.Context, string) (net.Conn, error) { return nil, errors.New("no network in this test") },
	})
	if err != nil {
		f.Fatal(err)
	}
	// A closed client: an answer to an abandoned acquire is not released
	// over a network that is not there.
	c.Close()
	f.Fuzz(func(t *testing.T, script []byte) {
		runDispatchScript(t, c, script)
	})
}

// sentCall is one request of a FuzzDispatch script and what it got.
type sentCall struct {
	cl      *call
	op      proto.Op
	key     string
	results []result
}

var errScriptEnd = errors.New("the script ended")

func runDispatchScript(t *testing.T, c *Client, script []byte) {
	cn := newConn(c, "127.0.0.1:1")
	cn.nc = noNetConn{} // up, as far as send can tell; nothing is written
	var calls []*sentCall
	var waiting []*sentCall // outstanding, in send order: the model
	drain := func() {
		for _, sc := range calls {
			for {
				select {
				case r := <-sc.cl.res:
					sc.results = append(sc.results, r)
					if len(sc.results) > 1 {
						t.Fatalf("%s %s got a second result %+v after %+v", sc.op, sc.key, r, sc.results[0])
					}
					continue
				default:
				}
				break
			}
		}
	}
	lines := bytes.Split(script, []byte("\n"))
	complete := lines[:len(lines)-1] // the last has no LF: never read
	dropped := error(nil)
	for i, line := range complete {
		if i >= 512 || len(calls) >= 64 {
			break
		}
		if send, ok := bytes.CutPrefix(line, []byte(">")); ok {
			send, abandon := bytes.CutPrefix(send, []byte("!"))
			w := strings.Fields(string(send))
			if len(w) != 2 || len(w[0]) != 1 || !isMatchOp(proto.Op(w[0][0])) || proto.CheckKey([]byte(w[1])) != "" {
				continue
			}
			sc := &sentCall{op: proto.Op(w[0][0]), key: w[1]}
			sc.cl = newCall(&request{op: sc.op, key: sc.key}, nil)
			if err := cn.send(sc.cl); err != nil {
				t.Fatalf("send on a live connection: %v", err)
			}
			if abandon {
				if r, ok := sc.cl.abandon(); ok {
					t.Fatalf("a call abandoned before any answer had one: %+v", r)
				}
			}
			calls = append(calls, sc)
			waiting = append(waiting, sc)
			continue
		}

		a, err := proto.ParseAnswer(append(line, '\n'))
		if err != nil {
			dropped = err
			break
		}
		want := -1 // index in waiting of the call a belongs to
		delivered := a
		if ref, err := strconv.ParseUint(a.Ref(), 36, 64); err == nil && ref != 0 {
			// An answer that carries a ref goes to the acquire sent with
			// it, without its ref, or to nobody.
			for j, sc := range waiting {
				if sc.key == a.Key && sc.op == proto.OpAcquire && sc.cl.ref == ref {
					want = j
					delivered = a.WithoutRef()
					break
				}
			}
		} else {
			for j, sc := range waiting {
				if sc.key == a.Key && ((a.Kind == proto.KindMoved && sc.op != proto.OpStatus) || sc.op == answerOp(a)) {
					want = j
					break
				}
			}
		}
		err = cn.dispatch(a)
		drain()
		if want < 0 {
			if (err != nil) != (a.Kind == proto.KindError) {
				// An L that answers no request belongs to a watch, or to
				// nobody: it never drops the connection.
				t.Fatalf("answer %q matches no request: dispatch = %v, want an error only for an E", line, err)
			}
		} else if err != nil {
			t.Fatalf("answer %q matches %s %s: dispatch = %v", line, waiting[want].op, waiting[want].key, err)
		}
		if want >= 0 {
			sc := waiting[want]
			if len(sc.results) != 1 || sc.results[0].err != nil || !sameAnswer(sc.results[0].ans, delivered) {
				t.Fatalf("answer %q belongs to %s %s (the oldest outstanding of its kind), which got %+v", line, sc.op, sc.key, sc.results)
			}
			waiting = append(waiting[:want], waiting[want+1:]...)
		}
		checkPending(t, cn, waiting)
		for _, sc := range waiting {
			if len(sc.results) > 0 {
				t.Fatalf("answer %q reached %s %s, which is not its: %+v", line, sc.op, sc.key, sc.results)
			}
		}
		if err != nil {
			dropped = err
			break
		}
	}

	// The connection ends: what is outstanding fails with the reason.
	if dropped == nil {
		dropped = errScriptEnd
	}
	cn.down(dropped)
	drain()
	for _, sc := range calls {
		if len(sc.results) != 1 {
			t.Fatalf("%s %s got %d results, want exactly one: %+v", sc.op, sc.key, len(sc.results), sc.results)
		}
		if slices.Contains(waiting, sc) && sc.results[0].err != dropped {
			t.Fatalf("%s %s was outstanding when the connection dropped, got %+v", sc.op, sc.key, sc.results[0])
		}
	}
	checkPending(t, cn, nil)
}

// answerOp is the op of the request an answer that is not M belongs to,
// by doc.go's words: T answers A, "E key OP: words" answers OP, any
// other answer the op of its own letter. It is 0 for an E that names no
// op.
func answerOp(a proto.Answer) proto.Op {
	switch a.Kind {
	case proto.KindTimeout:
		return proto.OpAcquire
	case proto.KindError:
		if len(a.Fields) > 0 {
			if op, ok := strings.CutSuffix(a.Fields[0], ":"); ok && len(op) == 1 {
				return proto.Op(op[0])
			}
		}
		return 0
	}
	return a.Kind
}

// isMatchOp reports whether the client sends requests of op on a
// pipelined connection: those an M may answer, and S (its keep-alive),
// which no node answers M.
func isMatchOp(op proto.Op) bool {
	return op == proto.OpStatus || slices.Contains(matchOps, op)
}

// checkPending checks the connection's registry against the model: the
// same calls outstanding, and no empty queue left behind, which the next
// answer of its (op, key) would index out of range.
func checkPending(t *testing.T, cn *conn, waiting []*sentCall) {
	t.Helper()
	cn.mu.Lock()
	defer cn.mu.Unlock()
	n := 0
	for k, q := range cn.pending {
		if q.head >= len(q.calls) {
			t.Fatalf("pending queue of %s %s is empty but registered", k.op, k.key)
		}
		for _, cl := range q.calls[q.head:] {
			if cl == nil || cl.req.op != k.op || cl.req.key != k.key {
				t.Fatalf("pending queue of %s %s holds %+v", k.op, k.key, cl)
			}
		}
		n += len(q.calls) - q.head
	}
	if n != len(waiting) {
		t.Fatalf("%d calls registered, the model has %d outstanding", n, len(waiting))
	}
}

func sameAnswer(a, b proto.Answer) bool {
	return a.Kind == b.Kind && a.Key == b.Key && slices.Equal(a.Fields, b.Fields)
}

// noNetConn stands for a live connection that send never touches: any
// use of it panics, which FuzzDispatch would report.
type noNetConn struct{ net.Conn }
