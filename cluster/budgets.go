package cluster

import (
	"strconv"

	"github.com/lockd-io/lockd/cluster/core"
	"github.com/lockd-io/lockd/proto"
)

// Budgets per address. One machine's connections together may hold only
// a tenth of what the node holds for everyone (as --max-conns-per-ip is
// a tenth of --max-conns by default), so that one tenant cannot take
// every watch of the node: 391 connections took all 100,000 in a second.
// They apply where --max-conns-per-ip does.

// maxWatchesPerIP is the most keys the connections of one address watch
// together.
func (n *Node) maxWatchesPerIP() int {
	total := n.cfg.MaxTotalWatches
	if total <= 0 {
		total = core.DefaultMaxTotalWatches
	}
	return max(total/10, 1)
}

// watchRefusalLocked is the answer to req, an L from c, when it would
// take c's address over its budget of watches; "" when it may go on.
// n.mu is held.
func (n *Node) watchRefusalLocked(c *conn, req *proto.Request) string {
	if n.cfg.Limits.MaxConnsPerIP <= 0 {
		return ""
	}
	n.resyncWatchesLocked()
	ic, lim := n.perIP[c.ip], n.maxWatchesPerIP()
	if ic == nil || ic.watches < lim || n.core.Watching(core.ConnID(c.id), req.Key) {
		return ""
	}
	return "the connections from " + c.ip + " already watch " + strconv.Itoa(lim) + " keys, the most one address may (a tenth of lockd --max-total-watches); unwatch some (U)"
}

// watchesChangedLocked takes in how many keys c watches after an L or a
// U. n.mu is held.
func (n *Node) watchesChangedLocked(c *conn) {
	w := n.core.Watches(core.ConnID(c.id))
	if ic := n.perIP[c.ip]; ic != nil {
		ic.watches += w - c.watches
	}
	c.watches = w
}

// resyncWatchesLocked counts the watches of every address afresh after
// the core ended them all (it gave its role up: RoleChanged). n.mu is
// held.
func (n *Node) resyncWatchesLocked() {
	if !n.watchesStale.Swap(false) {
		return
	}
	for _, ic := range n.perIP {
		ic.watches = 0
	}
	for _, c := range n.conns {
		c.watches = n.core.Watches(core.ConnID(c.id))
		if ic := n.perIP[c.ip]; ic != nil {
			ic.watches += c.watches
		}
	}
}
