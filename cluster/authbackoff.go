package cluster

import (
	"net/netip"
	"time"
)

// Failed authentications slow down the next ones from the same source:
// the first authFreeFailures wrong secrets cost nothing (a person's
// typos), each one after refuses every authentication from there for
// twice as long as the one before, from authPenaltyBase up to
// authPenaltyMax, and a source is forgotten authForget after its last
// failure. A guesser gets one secret every few seconds from an address,
// where it got thousands a second; a correct secret from the same source during the penalty
// is refused too (it cannot be told from a guess), told when to retry.
//
// The peer role is never paused. Its callers are the other nodes, whose
// links must come up whoever else shares their address: a pause that
// refused a peer's correct proof let anyone on a node's machine (or
// behind its NAT) who sent wrong peer secrets keep a restarted standby
// from reaching the active, which it then took for dead and replaced.
// And a pause that checked the proof first, to let the right one
// through, would tell a guesser at once which guess was right, which is
// no pause at all. So a peer's proof is checked every time, and what
// stands against guessing it is its strength: the peer secret is made by
// a machine (head -c 32 /dev/urandom), held by machines, never typed,
// and a node refuses to start on a short or repetitive one
// (docs/security.md).
const (
	authFreeFailures = 3
	authPenaltyBase  = 250 * time.Millisecond
	authPenaltyMax   = 5 * time.Second
	authForget       = time.Minute
	// maxAuthSources bounds the sources remembered: past it, those
	// forgotten already go first, then any.
	maxAuthSources = 4096
)

// authBackoff counts failed authentications by source and role: an IPv4
// address, or an IPv6 /64 (one machine usually holds the whole of it),
// and the role asked for, so that clients guessing (or misconfigured)
// behind a NAT or on a node's own machine never slow down the peers'
// handshakes from there. Guarded by n.mu.
type authBackoff struct {
	m map[string]*authFailures
}

type authFailures struct {
	n     int       // failures since the source was last forgotten
	last  time.Time // the last one
	until time.Time // authentications are refused until then
}

// authSource is what failures from remote IP ip asking for role count
// against.
func authSource(ip, role string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Unmap().Is6() {
		return ip + " " + role
	}
	p, _ := a.Prefix(64)
	return p.String() + " " + role
}

// penalty is how long authentications from ip as role are still refused.
func (b *authBackoff) penalty(ip, role string, now time.Time) time.Duration {
	if b.m == nil {
		return 0
	}
	f := b.m[authSource(ip, role)]
	if f == nil {
		return 0
	}
	return max(f.until.Sub(now), 0)
}

// failed counts a wrong secret from ip for role.
func (b *authBackoff) failed(ip, role string, now time.Time) {
	src := authSource(ip, role)
	if b.m == nil {
		b.m = make(map[string]*authFailures)
	}
	f := b.m[src]
	if f != nil && now.Sub(f.last) > authForget {
		f.n = 0
	}
	if f == nil {
		if len(b.m) >= maxAuthSources {
			b.makeRoom(now)
		}
		f = &authFailures{}
		b.m[src] = f
	}
	f.n++
	f.last = now
	if k := f.n - authFreeFailures; k > 0 {
		d := authPenaltyMax
		if k <= 8 {
			d = min(authPenaltyBase<<(k-1), authPenaltyMax)
		}
		f.until = now.Add(d)
	}
}

// makeRoom forgets, among a few sources (a map range starts anywhere),
// those whose last failure is older than authForget, or the first when
// none is: a bounded cost per failure however many sources fail.
func (b *authBackoff) makeRoom(now time.Time) {
	const look = 32
	first, seen, freed := "", 0, false
	for src, f := range b.m {
		if now.Sub(f.last) > authForget {
			delete(b.m, src)
			freed = true
		} else if first == "" {
			first = src
		}
		if seen++; seen == look {
			break
		}
	}
	if !freed {
		delete(b.m, first)
	}
}
