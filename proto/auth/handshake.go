package auth

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Words of the I request and its answers.
const (
	WordHello     = "hello"
	WordChallenge = "challenge"
	WordProof     = "proof"
	WordOK        = "ok"
)

// ErrWrongSecret is the refusal of a secret or a proof that matches no
// secret of the role: a guess, where other refusals are mistakes.
var ErrWrongSecret = errors.New("wrong secret")

// nonceLen is the length of a nonce in bytes; on the wire it is hex.
const nonceLen = 16

// Target says which addresses a handshake may name as the one its
// client dialled: the proofs are bound to that address, and a node that
// accepts only its own refuses a handshake relayed to it by a stranger
// listening on another address.
type Target struct {
	// Self is this node as --peers writes it: the one address a peer's
	// handshake may name.
	Self string
	// Reaches reports whether addr, the address a client or an admin
	// says it dialled, reaches this node. nil accepts every address, for
	// a connection already bound to this node otherwise (TLS, whose
	// relay would carry only what the client encrypted for this node).
	Reaches func(addr string) bool
}

// Handshake is one connection's progress through the I handshake, on the
// server side. The zero value is ready; it is not safe for concurrent use.
type Handshake struct {
	asked  Role
	cnonce string
	snonce string
	target string
}

// Step serves one I request: asked is its key (the role asked for), args
// the words after it. to says which addresses a hello may name. It
// returns the answer's words after the key, and the role the
// connection holds from now on, which is have when nothing new was
// proven. open is the role this node grants without proof. An error means
// the connection is refused: answer it E and close. Its words never
// repeat what the client sent, which may be a secret.
func (h *Handshake) Step(s Secrets, open, have Role, to Target, askedWord string, args []string) (reply []string, now Role, err error) {
	asked, ok := ParseRole(askedWord)
	if !ok {
		return nil, have, errors.New("unknown role: want I client, I admin or I peer")
	}
	if asked <= max(open, have) && (len(args) == 1 || !anySecret(s, asked)) {
		// Nothing to prove: say so at once. (A challenge is still run
		// when this node has a secret, so that a client that holds the
		// role already, by certificate, learns the node knows it too.)
		*h = Handshake{}
		return []string{WordOK, max(open, have).String()}, max(open, have), nil
	}
	switch {
	case len(args) == 1:
		// The plain form: I ROLE SECRET.
		*h = Handshake{}
		r := matchPlain(s, asked, []byte(args[0]))
		if r == None {
			return nil, have, fmt.Errorf("%w for role %s", ErrWrongSecret, asked)
		}
		return []string{WordOK, r.String()}, max(have, r), nil
	case (len(args) == 2 || len(args) == 3) && args[0] == WordHello:
		if !validNonce(args[1]) {
			*h = Handshake{}
			return nil, have, errors.New("hello wants a nonce of 32 lower-case hex digits")
		}
		if !anySecret(s, asked) {
			*h = Handshake{}
			return nil, have, fmt.Errorf("this node has no secret for role %s", asked)
		}
		target := ""
		if len(args) == 3 {
			target = args[2]
		}
		// A proof is bound to the node it was meant for: a stranger
		// listening on a dead node's address, or on any address of a
		// client's list, must not relay one node's handshake to
		// another. The words name neither this node (a stranger learns
		// nothing of it) nor the target (it may be a mistyped secret).
		switch {
		case asked == Peer && target != to.Self:
			*h = Handshake{}
			return nil, have, errors.New("a peer's hello must name the node it dials as --peers writes it, and this one names another node: check that --peers is the same on every node")
		case asked != Peer && to.Reaches != nil && target == "":
			*h = Handshake{}
			return nil, have, errors.New("hello must name the address dialled: I " + asked.String() + " hello NONCE HOST:PORT")
		case asked != Peer && to.Reaches != nil && !to.Reaches(target):
			*h = Handshake{}
			return nil, have, errors.New("this hello names an address that is not this node's, as a handshake relayed from another address would: if clients reach this node under another name or address (DNS, NAT), list it in lockd --advertise-client")
		}
		*h = Handshake{asked: asked, cnonce: args[1], snonce: NewNonce(), target: target}
		return []string{WordChallenge, h.snonce}, have, nil
	case len(args) == 2 && args[0] == WordProof:
		st := *h
		*h = Handshake{}
		if st.snonce == "" || st.asked != asked {
			return nil, have, fmt.Errorf("proof without a challenge: send I %s hello NONCE first", asked)
		}
		got, err := hex.DecodeString(args[1])
		if err != nil || len(got) != sha256.Size {
			return nil, have, errors.New("proof wants 64 lower-case hex digits")
		}
		for r := Peer; r >= asked; r-- {
			sec := s.of(r)
			if sec != nil && hmac.Equal(got, proof(sec, "client", asked, st.target, st.snonce, st.cnonce)) {
				sp := hex.EncodeToString(proof(sec, "server", asked, st.target, st.cnonce, st.snonce))
				return []string{WordOK, max(have, r).String(), sp}, max(have, r), nil
			}
		}
		return nil, have, fmt.Errorf("%w for role %s", ErrWrongSecret, asked)
	}
	*h = Handshake{}
	return nil, have, fmt.Errorf("want I %s SECRET, I %s hello NONCE or I %s proof PROOF", asked, asked, asked)
}

// matchPlain returns the highest role at or above asked whose secret is
// secret, or None. Every comparison takes the same time whatever matches.
func matchPlain(s Secrets, asked Role, secret []byte) Role {
	given := sha256.Sum256(secret)
	found := None
	for r := asked; r <= Peer; r++ {
		sec := s.of(r)
		if sec == nil {
			continue
		}
		want := sha256.Sum256(sec)
		if subtle.ConstantTimeCompare(given[:], want[:]) == 1 {
			found = r
		}
	}
	return found
}

func anySecret(s Secrets, asked Role) bool {
	for r := asked; r <= Peer; r++ {
		if s.of(r) != nil {
			return true
		}
	}
	return false
}

// proof is HMAC-SHA256(secret, "lockd-v1 SIDE|ROLE|TARGET|A|B").
func proof(secret []byte, side string, role Role, target, a, b string) []byte {
	m := hmac.New(sha256.New, secret)
	io.WriteString(m, "lockd-v1 "+side+"|"+role.String()+"|"+target+"|"+a+"|"+b)
	return m.Sum(nil)
}

// NewNonce returns 16 random bytes in hex.
func NewNonce() string {
	var b [nonceLen]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("auth: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

func validNonce(s string) bool {
	if len(s) != 2*nonceLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ErrBadProof is returned by Authenticate when the node's proof does not
// match the secret.
var ErrBadProof = errors.New("the node's proof does not match this secret: its secret differs, or it is not the lockd it claims to be")

// ErrOpen is returned by Authenticate, with strict set, when the node
// granted the role without proving that it knows the secret.
var ErrOpen = errors.New("the node asked for no proof and gave none of its own: it does not hold this secret (is it started without the matching --*-secret-file?)")

// Authenticate proves role with secret on a connection that has sent
// nothing yet, by challenge and response, and checks that the node knows
// the secret too. target is the address dialled (for a peer, as --peers
// writes it): the proofs are bound to it, so they cannot be relayed to
// another node. It returns the role granted. r must read from the same
// connection as w and is left at the start of the next answer.
//
// A node on which the role needs no proof grants it at once; with strict
// set that is refused with ErrOpen, since such a node has not proven it
// knows the secret (peers use strict: a node that cannot prove it is a
// peer must not be followed).
func Authenticate(w io.Writer, r *bufio.Reader, role Role, secret []byte, target string, strict bool) (Role, error) {
	cnonce := NewNonce()
	if err := checkTarget(target); err != nil {
		return None, err
	}
	hello := "I " + role.String() + " " + WordHello + " " + cnonce
	if target != "" {
		hello += " " + target
	}
	if _, err := io.WriteString(w, hello+"\n"); err != nil {
		return None, err
	}
	f, err := readAnswer(r, role)
	if err != nil {
		return None, err
	}
	if len(f) >= 2 && f[0] == WordOK {
		if strict {
			return None, ErrOpen
		}
		granted, _ := ParseRole(f[1])
		return granted, nil
	}
	if len(f) != 2 || f[0] != WordChallenge || !validNonce(f[1]) {
		return None, fmt.Errorf("unexpected answer to I %s hello: %q", role, strings.Join(f, " "))
	}
	snonce := f[1]
	cp := hex.EncodeToString(proof(secret, "client", role, target, snonce, cnonce))
	if _, err := io.WriteString(w, "I "+role.String()+" "+WordProof+" "+cp+"\n"); err != nil {
		return None, err
	}
	f, err = readAnswer(r, role)
	if err != nil {
		return None, err
	}
	if len(f) != 3 || f[0] != WordOK {
		return None, fmt.Errorf("unexpected answer to I %s proof: %q", role, strings.Join(f, " "))
	}
	granted, ok := ParseRole(f[1])
	if !ok || granted < role {
		return None, fmt.Errorf("the node granted %q for role %s", f[1], role)
	}
	sp, err := hex.DecodeString(f[2])
	if err != nil || !hmac.Equal(sp, proof(secret, "server", role, target, cnonce, snonce)) {
		return None, ErrBadProof
	}
	return granted, nil
}

// checkTarget refuses an address that is not one word of the grammar.
func checkTarget(t string) error {
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] == 0x7f {
			return fmt.Errorf("address %q has a space or control character", clip(t))
		}
	}
	return nil
}

// RefusedError is an E answer to I: the node refused the secret.
type RefusedError struct{ Words string }

func (e *RefusedError) Error() string { return "refused: " + e.Words }

// readAnswer reads one "I ROLE ..." line and returns its words after the
// key. An E answer is a *RefusedError.
func readAnswer(r *bufio.Reader, role Role) ([]string, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errors.New("answer to I too long")
		}
		return nil, err
	}
	words := strings.Fields(string(line))
	if len(words) < 2 {
		return nil, fmt.Errorf("malformed answer to I: %q", clip(string(line)))
	}
	switch words[0] {
	case "I":
		if words[1] != role.String() {
			return nil, fmt.Errorf("answer to I names role %q", clip(words[1]))
		}
		return words[2:], nil
	case "E":
		msg := strings.Join(words[2:], " ")
		msg = strings.TrimPrefix(msg, "I: ")
		return nil, &RefusedError{Words: msg}
	}
	return nil, fmt.Errorf("unexpected answer to I: %q", clip(string(line)))
}

func clip(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
