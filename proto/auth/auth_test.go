package auth

import (
	"bufio"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

var testSecrets = Secrets{
	Client: []byte("client-secret-0123456789"),
	Admin:  []byte("admin-secret-0123456789"),
	Peer:   []byte("peer-secret-0123456789"),
}

// server answers I requests read from conn with Step, the way a node does,
// until conn closes or a step fails.
const testSelf = "10.0.0.1:7070"

// testTarget is a node at testSelf, reached by clients only there.
var testTarget = Target{Self: testSelf, Reaches: func(a string) bool { return a == testSelf }}

func server(t *testing.T, conn net.Conn, s Secrets, open Role, granted chan<- Role) {
	t.Helper()
	defer conn.Close()
	var h Handshake
	have := open
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			granted <- have
			return
		}
		w := strings.Fields(line)
		reply, now, err := h.Step(s, open, have, testTarget, w[1], w[2:])
		if err != nil {
			io.WriteString(conn, "E "+w[1]+" I: "+err.Error()+"\n")
			granted <- have
			return
		}
		have = now
		io.WriteString(conn, "I "+w[1]+" "+strings.Join(reply, " ")+"\n")
	}
}

func handshake(t *testing.T, s Secrets, open, role Role, secret []byte, strict bool) (client, server_ Role, err error) {
	t.Helper()
	a, b := net.Pipe()
	got := make(chan Role, 1)
	go server(t, b, s, open, got)
	r, err := Authenticate(a, bufio.NewReader(a), role, secret, testSelf, strict)
	a.Close()
	return r, <-got, err
}

func TestAuthenticateGrantsTheSecretsRole(t *testing.T) {
	for _, tc := range []struct {
		name   string
		role   Role
		secret []byte
		want   Role
	}{
		{"client secret as client", Client, testSecrets.Client, Client},
		{"admin secret as client", Client, testSecrets.Admin, Admin},
		{"admin secret as admin", Admin, testSecrets.Admin, Admin},
		{"peer secret as peer", Peer, testSecrets.Peer, Peer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s, err := handshake(t, testSecrets, None, tc.role, tc.secret, false)
			if err != nil {
				t.Fatal(err)
			}
			if c != tc.want || s != tc.want {
				t.Fatalf("client saw %s, server granted %s; want %s", c, s, tc.want)
			}
		})
	}
}

func TestAuthenticateRefusesWrongSecrets(t *testing.T) {
	for _, tc := range []struct {
		name   string
		role   Role
		secret []byte
	}{
		{"client secret as admin", Admin, testSecrets.Client},
		{"client secret as peer", Peer, testSecrets.Client},
		{"unknown secret", Client, []byte("not-a-secret-of-this-node")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s, err := handshake(t, testSecrets, None, tc.role, tc.secret, false)
			var re *RefusedError
			if !errors.As(err, &re) || !strings.Contains(re.Words, "wrong secret") {
				t.Fatalf("err = %v, want a refusal naming the wrong secret", err)
			}
			if s != None {
				t.Fatalf("server granted %s", s)
			}
		})
	}
}

func TestOpenNode(t *testing.T) {
	c, _, err := handshake(t, Secrets{}, Peer, Client, testSecrets.Client, false)
	if err != nil || c != Peer {
		t.Fatalf("lenient client on an open node: %s, %v", c, err)
	}
	if _, _, err := handshake(t, Secrets{}, Peer, Peer, testSecrets.Peer, true); !errors.Is(err, ErrOpen) {
		t.Fatalf("strict peer on an open node: err = %v, want ErrOpen", err)
	}
}

// A node that does not know the secret cannot make the client believe it
// does: its proof is checked.
func TestServerMustProveTheSecret(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		defer b.Close()
		r := bufio.NewReader(b)
		r.ReadString('\n')
		io.WriteString(b, "I client challenge "+NewNonce()+"\n")
		r.ReadString('\n')
		// Accept whatever proof, and prove with the wrong secret.
		io.WriteString(b, "I client ok client "+strings.Repeat("ab", 32)+"\n")
	}()
	if _, err := Authenticate(a, bufio.NewReader(a), Client, testSecrets.Client, testSelf, false); !errors.Is(err, ErrBadProof) {
		t.Fatalf("err = %v, want ErrBadProof", err)
	}
}

func TestPlainForm(t *testing.T) {
	var h Handshake
	reply, r, err := h.Step(testSecrets, None, None, testTarget, "client", []string{string(testSecrets.Client)})
	if err != nil || r != Client || strings.Join(reply, " ") != "ok client" {
		t.Fatalf("plain client: %v %s %v", reply, r, err)
	}
	if _, r, err := h.Step(testSecrets, None, None, testTarget, "admin", []string{string(testSecrets.Client)}); err == nil || r != None {
		t.Fatalf("plain admin with the client secret: %s %v", r, err)
	}
	// Admin falls back to nothing here: a node maps it in newGate.
	if _, _, err := h.Step(testSecrets, None, None, testTarget, "root", []string{"x"}); err == nil || !strings.Contains(err.Error(), "want I client, I admin or I peer") {
		t.Fatalf("unknown role: %v", err)
	}
}

func TestStepRefusesMalformedHandshakes(t *testing.T) {
	var h Handshake
	for _, args := range [][]string{
		{"hello", "xyz"},
		{"hello", strings.Repeat("A", 32)},
		{"proof", strings.Repeat("0", 64)}, // no challenge before
		{"what", "ever"},
	} {
		if _, r, err := h.Step(testSecrets, None, None, testTarget, "client", args); err == nil || r != None {
			t.Errorf("%v: granted %s, err %v", args, r, err)
		}
	}
	// A challenge is for one proof only.
	reply, _, err := h.Step(testSecrets, None, None, testTarget, "client", []string{"hello", NewNonce(), testSelf})
	if err != nil || reply[0] != WordChallenge {
		t.Fatal(reply, err)
	}
	if _, _, err := h.Step(testSecrets, None, None, testTarget, "client", []string{"proof", strings.Repeat("0", 64)}); err == nil {
		t.Fatal("a wrong proof was accepted")
	}
	if _, _, err := h.Step(testSecrets, None, None, testTarget, "client", []string{"proof", strings.Repeat("0", 64)}); err == nil || !strings.Contains(err.Error(), "without a challenge") {
		t.Fatalf("second proof on one challenge: %v", err)
	}
}

func TestCheckSecret(t *testing.T) {
	for s, ok := range map[string]bool{
		"":                             false,
		"short":                        false,
		"0123456789abcdef":             true,
		"with space 0123456789":        false,
		"tab\t0123456789abcdef":        false,
		"ünïcode-0123456789abcdef":     false,
		strings.Repeat("x", 1025):      false,
		"dGhpcyBpcyBiYXNlNjQgc2VjcmV0": true,
		"aaaaaaaaaaaaaaaaaaaaaaaa":     false,
		"abababababababababababab":     false,
		"abcdefgabcdefgabcdefg":        false,
		"abcdefghabcdefghabcdefgh":     true,
	} {
		if err := CheckSecret([]byte(s)); (err == nil) != ok {
			t.Errorf("CheckSecret(%q) = %v, want ok %v", s, err, ok)
		}
	}
}

// FuzzStep feeds arbitrary I requests to a node's side of the handshake:
// it never panics, and grants a role only to a proof or secret that
// matches.
func FuzzStep(f *testing.F) {
	f.Add("client", string(testSecrets.Client), "")
	f.Add("admin", "hello", NewNonce())
	f.Add("peer", "proof", strings.Repeat("ab", 32))
	f.Add("root", "x", "y")
	f.Add("client", "hello", "zz")
	f.Fuzz(func(t *testing.T, role, a1, a2 string) {
		args := []string{a1}
		if a2 != "" {
			args = append(args, a2)
		}
		var h Handshake
		_, got, err := h.Step(testSecrets, None, None, testTarget, role, args)
		if err == nil && got > None {
			// Only the plain form with a real secret grants at once.
			if len(args) != 1 || matchPlain(testSecrets, got, []byte(a1)) == None {
				t.Fatalf("granted %s to %q %q", got, role, args)
			}
		}
		// A proof right after cannot succeed without the secret.
		_, got, err = h.Step(testSecrets, None, None, testTarget, role, []string{WordProof, strings.Repeat("0", 64)})
		if err == nil && got > None {
			t.Fatalf("granted %s to a zero proof", got)
		}
	})
}

// A proof meant for one node cannot be relayed to another: a stranger
// that listens on a dead peer's address and passes the dialling node's
// handshake on to a live node gets nothing.
func TestProofsAreBoundToTheirTarget(t *testing.T) {
	nodeB := Target{Self: "10.0.0.2:7070", Reaches: func(a string) bool { return a == "10.0.0.2:7070" }}
	// The dialler means node C; the relay hands its hello to node B. The
	// refusal does not tell the relay B's own address.
	var b Handshake
	if _, _, err := b.Step(testSecrets, None, None, nodeB, "peer", []string{WordHello, NewNonce(), "10.0.0.3:7070"}); err == nil || !strings.Contains(err.Error(), "names another node") || strings.Contains(err.Error(), "10.0.0.2") {
		t.Fatalf("a peer hello naming another node: %v", err)
	}
	// Rewriting TARGET to B's address makes the dialler's proof wrong.
	cnonce := NewNonce()
	reply, _, err := b.Step(testSecrets, None, None, nodeB, "peer", []string{WordHello, cnonce, "10.0.0.2:7070"})
	if err != nil {
		t.Fatal(err)
	}
	relayed := hex.EncodeToString(proof(testSecrets.Peer, "client", Peer, "10.0.0.3:7070", reply[1], cnonce))
	if _, r, err := b.Step(testSecrets, None, None, nodeB, "peer", []string{WordProof, relayed}); err == nil || r != None {
		t.Fatalf("a proof made for another node was accepted: %s %v", r, err)
	}
	// A peer hello must name its target.
	if _, _, err := b.Step(testSecrets, None, None, nodeB, "peer", []string{WordHello, NewNonce()}); err == nil {
		t.Fatal("a peer hello naming no node was accepted")
	}
}

// A key that is no role is never repeated: it may be a secret typed in
// the wrong place ("I SECRET").
func TestUnknownRoleIsNotEchoed(t *testing.T) {
	var h Handshake
	_, _, err := h.Step(testSecrets, None, None, testTarget, string(testSecrets.Client), nil)
	if err == nil || strings.Contains(err.Error(), string(testSecrets.Client)) {
		t.Fatalf("err = %v", err)
	}
}

// A client's or an admin's handshake is bound to the address it dialled
// as a peer's is: a stranger listening on an address of a client's list
// (a dead node's) that passes its hello, the challenge and the proof on to
// a live node gets nothing, whatever role it relays.
func TestClientProofsAreBoundToTheirTarget(t *testing.T) {
	for _, role := range []Role{Client, Admin} {
		// The relay listens on 10.0.0.9:7070; the client dialled it.
		a, relay := net.Pipe()
		got := make(chan Role, 1)
		go server(t, relay, testSecrets, None, got)
		_, err := Authenticate(a, bufio.NewReader(a), role, testSecrets.Client, "10.0.0.9:7070", true)
		a.Close()
		var re *RefusedError
		if !errors.As(err, &re) || !strings.Contains(re.Words, "not this node's") || strings.Contains(re.Words, testSelf) {
			t.Fatalf("%s: a relayed hello: %v", role, err)
		}
		if r := <-got; r != None {
			t.Fatalf("%s: the node granted %s to a relayed handshake", role, r)
		}
		// A hello that names no address is refused too: its proof would
		// be good at any node.
		var h Handshake
		if _, _, err := h.Step(testSecrets, None, None, testTarget, role.String(), []string{WordHello, NewNonce()}); err == nil || !strings.Contains(err.Error(), "must name the address dialled") {
			t.Fatalf("%s: a hello naming no address: %v", role, err)
		}
	}
	// Dialled at the node's own address, the same handshake succeeds; and
	// a channel already bound (TLS: Reaches nil) takes any address.
	if r, _, err := handshake(t, testSecrets, None, Client, testSecrets.Client, true); err != nil || r != Client {
		t.Fatalf("a direct handshake: %s %v", r, err)
	}
	var h Handshake
	if reply, _, err := h.Step(testSecrets, None, None, Target{Self: testSelf}, "client", []string{WordHello, NewNonce(), "lb.example:7070"}); err != nil || reply[0] != WordChallenge {
		t.Fatalf("over a bound channel: %v %v", reply, err)
	}
}
