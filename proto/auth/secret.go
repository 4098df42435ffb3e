package auth

import (
	"bytes"
	"errors"
	"fmt"
	"os"
)

// MinSecretLen is the shortest secret accepted: the challenge answers an
// eavesdropper sees can be tried offline against guesses, so a secret
// must be too long to guess.
const MinSecretLen = 16

// MinSecretChars is the fewest different characters a secret may have:
// a secret like aaaaaaaaaaaaaaaa or abababababababab is long enough and
// trivially guessed. It catches such placeholders, not a guessable
// phrase: generate secrets (head -c 32 /dev/urandom | base64).
const MinSecretChars = 8

// maxSecretLen bounds a secret so that the plain form of I fits a line.
const maxSecretLen = 1024

// Secrets are the shared secrets of a node, one per role; nil means the
// role has no secret of its own.
type Secrets struct {
	Client []byte
	Admin  []byte
	Peer   []byte
}

// of returns the secret of role r.
func (s Secrets) of(r Role) []byte {
	switch r {
	case Client:
		return s.Client
	case Admin:
		return s.Admin
	case Peer:
		return s.Peer
	}
	return nil
}

// ReadSecretFile reads a secret from path: the file's content without
// surrounding white space. It must be MinSecretLen to 1024 bytes of
// printable ASCII with no space and at least MinSecretChars different
// characters. warn is set when the file can be read by other users of
// the machine (a node refuses to start on it; a client warns).
func ReadSecretFile(flag, path string) (secret []byte, warn string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("--%s %s: %v", flag, path, unwrapPath(err))
	}
	b = bytes.TrimSpace(b)
	if err := CheckSecret(b); err != nil {
		return nil, "", fmt.Errorf("--%s %s: %v", flag, path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		warn = fmt.Sprintf("--%s %s can be read by other users of this machine (mode %04o): chmod 600 %s", flag, path, fi.Mode().Perm(), path)
	}
	return b, warn, nil
}

// CheckSecret says why b cannot be a secret, or returns nil.
func CheckSecret(b []byte) error {
	if len(b) == 0 {
		return errors.New("the secret is empty; write one with: head -c 32 /dev/urandom | base64 > FILE")
	}
	if len(b) < MinSecretLen {
		return fmt.Errorf("the secret is %d bytes, shorter than %d; make a longer one with: head -c 32 /dev/urandom | base64 > FILE", len(b), MinSecretLen)
	}
	if len(b) > maxSecretLen {
		return fmt.Errorf("the secret is %d bytes, longer than %d", len(b), maxSecretLen)
	}
	var seen [128]bool
	distinct := 0
	for _, c := range b {
		if c <= ' ' || c >= 0x7f {
			return errors.New("the secret holds a space, a control character or a non-ASCII byte; use printable ASCII, for example base64")
		}
		if !seen[c] {
			seen[c] = true
			distinct++
		}
	}
	if distinct < MinSecretChars {
		return fmt.Errorf("the secret has fewer than %[2]d different characters (%[1]d): it is trivially guessed; make one with: head -c 32 /dev/urandom | base64 > FILE", distinct, MinSecretChars)
	}
	return nil
}

// ExposedKey says, when the private key file at path can be read by every
// user of the machine, what to do about it; "" when it cannot. A key
// readable by its group is left alone: that is how a group of services
// shares one (Debian's ssl-cert).
func ExposedKey(flag, path string) string {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm()&0o004 == 0 {
		return ""
	}
	return fmt.Sprintf("--%s %s can be read by every user of this machine (mode %04o): chmod 600 %s", flag, path, fi.Mode().Perm(), path)
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
