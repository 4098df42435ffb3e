package cluster

import (
	"strconv"
	"time"

	"github.com/lockd-io/lockd/proto"
)

// ReadyMaxLag is how many replication records a standby may be behind
// the active, as of the active's last heartbeat answer, and still be
// ready: records in flight on the stream while the heartbeat overtakes
// them.
const ReadyMaxLag = 1000

// Health is what the probes decide on.
type Health struct {
	Running    bool // serving: started and not shutting down
	Role       Role
	Active     string // the active this node knows of
	Paused     bool   // did not run for a failure timeout; waits to hear its peers
	Following  string // the active whose stream it follows
	StreamLive bool   // that stream is synced and running
	Lag        uint64 // records behind the active, as of its last heartbeat
}

// Live reports whether the node serves its role (the /healthz probe),
// and why not.
func (h Health) Live() (bool, string) {
	if !h.Running {
		return false, "not serving: starting or shutting down"
	}
	return true, "serving as " + string(h.Role)
}

// Ready reports whether the node is the active or a standby caught up
// with it (the /readyz probe), and in a few words why.
func (h Health) Ready() (bool, string) {
	switch {
	case !h.Running:
		return false, "not serving: starting or shutting down"
	case h.Paused:
		return false, "paused: this node did not run for a failure timeout and waits to hear its peers"
	case h.Role == Active:
		return true, "active"
	case h.Role == HandingOff:
		return false, "handing its role off"
	case h.Role == Joining:
		return false, "joining: still learning who is active"
	case h.Active == "":
		return false, "standby, and no active is known"
	case h.Following != h.Active || !h.StreamLive:
		return false, "standby, not synced with the active " + h.Active + " yet"
	case h.Lag > ReadyMaxLag:
		return false, "standby, " + strconv.FormatUint(h.Lag, 10) + " records behind the active " + h.Active
	}
	return true, "standby, caught up with the active " + h.Active + " (" + strconv.FormatUint(h.Lag, 10) + " records behind)"
}

// Health reads what the probes decide on.
func (n *Node) Health() Health {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.now()
	return n.healthLocked(now, n.core.Status(now))
}

// healthLocked reads the role and active as st reports them: a paused
// node is joining, whatever role it had when it stopped, so that it is
// never counted as a second active.
func (n *Node) healthLocked(now time.Time, st proto.Status) Health {
	h := Health{
		Running: n.running.Load() && !n.core.Leaving(),
		Role:    Role(st.Role),
		Active:  st.Active,
		Paused:  n.core.PausedAt(now),
	}
	h.Following, h.StreamLive = n.core.Following()
	for _, p := range st.Peers {
		if p.Addr == n.self {
			h.Lag = p.Lag
		}
	}
	return h
}
