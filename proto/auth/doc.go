// Package auth owns how each end of a lockd connection proves who it is:
// the roles a connection may hold (client, admin, peer), the secrets that
// prove them and the I handshake that presents a secret without sending it,
// and the TLS configuration of both ends (certificates read from files and
// reread when they change, the CA that verifies the other side, the role a
// client certificate grants).
//
// It knows nothing of locks or of cluster roles. Package cluster asks it
// whether a connection may send a request; package proto/client and the
// peer links of package cluster use it to authenticate themselves. The
// wire form of the I request is documented in package proto.
//
// # The handshake
//
// A secret is proven either plainly, for a person at nc over TLS or on
// loopback, or by challenge and response, which never puts the secret on
// the wire and proves the server knows it too:
//
//	I ROLE SECRET                ->  I ROLE ok GRANTED
//	I ROLE hello CNONCE TARGET   ->  I ROLE challenge SNONCE
//	I ROLE proof CPROOF          ->  I ROLE ok GRANTED SPROOF
//
// CNONCE and SNONCE are 16 random bytes in lower-case hex, TARGET the
// address the client dialled, CPROOF and SPROOF HMAC-SHA256 in lower-case
// hex, keyed with the secret, over "lockd-v1 client|ROLE|TARGET|SNONCE|CNONCE"
// and "lockd-v1 server|ROLE|TARGET|CNONCE|SNONCE". The proofs are bound to
// TARGET, and a node accepts a hello only when TARGET reaches it: for a
// peer, its own address as --peers writes it; for a client or an admin
// without TLS, an address of this node (--listen, --advertise,
// --advertise-client, or the address the connection arrived at, by IP
// or by a name of this machine). So a stranger that listens on a dead
// node's address, or on any address of a client's list, cannot relay one
// node's handshake to another. Over TLS a client's TARGET is not checked:
// a relay would carry only what the client encrypted for this node.
// A secret proves its own role and every role below it; GRANTED is the
// role of the secret that matched. A node on which ROLE needs no proof
// answers "I ROLE ok GRANTED" at once, to either form.
package auth
