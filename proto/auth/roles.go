package auth

import "crypto/x509"

// Role is what a connection has proven it may do. Roles are ordered: each
// includes the ones below it.
type Role uint8

const (
	// None: nothing proven yet. On a node that requires authentication,
	// such a connection may only send I.
	None Role = iota
	// Client: lock requests and reads (proto's table of ops says which).
	Client
	// Admin: a client that may also change the cluster (H by command).
	Admin
	// Peer: another lockd node: heartbeats, replication, take-back.
	Peer
)

func (r Role) String() string {
	switch r {
	case Client:
		return "client"
	case Admin:
		return "admin"
	case Peer:
		return "peer"
	}
	return "none"
}

// ParseRole reads a role as written on the wire: client, admin or peer.
func ParseRole(s string) (Role, bool) {
	switch s {
	case "client":
		return Client, true
	case "admin":
		return Admin, true
	case "peer":
		return Peer, true
	}
	return None, false
}

// Organizational units of the certificates lockd makes (lockd tls cert).
// A verified client certificate grants the role its OU names; one with
// none of them grants Client.
const (
	OUPeer   = "lockd-peer"
	OUAdmin  = "lockd-admin"
	OUClient = "lockd-client"
)

// RoleOfCert is the role a verified certificate grants.
func RoleOfCert(c *x509.Certificate) Role {
	best := Client
	for _, ou := range c.Subject.OrganizationalUnit {
		switch ou {
		case OUPeer:
			return Peer
		case OUAdmin:
			best = Admin
		}
	}
	return best
}
