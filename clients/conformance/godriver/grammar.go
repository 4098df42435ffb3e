package main

// The commands of shared holds, sets of keys, Proclaim and places:
//
//	hold_shared  as hold, taking the key as a reader
//	             -> {"hold": N, "token": "T"}
//	hold_all     {"keys": [K...], "lease_ms", "wait_ms"?, "limit"?,
//	             "shared"?} holds every key at once, or none
//	             -> {"hold": N, "tokens": ["T"...]}, one per key in order;
//	             its "lost" event also names the "key" that ended it
//	proclaim     {"hold": N, "value": V} changes the value of the leader
//	             that campaign N made -> {}
//	place        {"key", "lease_ms", "wait_ms", "limit"} acquires one place
//	             of a semaphore -> {"token": "T", "limit": L, "place": P},
//	             P 0 when the node does not say

import (
	"fmt"
	"strconv"

	"github.com/lockd-io/lockd/proto/client"
)

func (d *driver) holdAll(cmd command) (map[string]any, error) {
	c, err := d.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := callCtx(cmd)
	defer cancel()
	var opts []client.AcquireOption
	if wait := d.brk.wait(ms(cmd.WaitMS)); wait > 0 {
		opts = append(opts, client.Wait(wait))
	}
	if cmd.Limit != 0 {
		opts = append(opts, client.Limit(cmd.Limit))
	}
	if cmd.Shared {
		opts = append(opts, client.Shared())
	}
	s, err := c.HoldAll(ctx, cmd.Keys, ms(cmd.LeaseMS), opts...)
	if err != nil {
		return nil, err
	}
	tokens := make([]string, 0, len(cmd.Keys))
	for _, t := range s.Tokens() {
		tokens = append(tokens, strconv.FormatUint(t, 10))
	}
	return map[string]any{"hold": d.addHold(s, nil), "tokens": tokens}, nil
}

func (d *driver) proclaim(cmd command) (map[string]any, error) {
	st, err := d.holdOf(cmd)
	if err != nil {
		return nil, err
	}
	if st.e == nil {
		return nil, invalidError{fmt.Sprintf("hold %d is not a campaign's", cmd.Hold)}
	}
	ctx, cancel := callCtx(cmd)
	defer cancel()
	return nil, st.e.Proclaim(ctx, cmd.Value)
}

func (d *driver) place(cmd command) (map[string]any, error) {
	c, err := d.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := callCtx(cmd)
	defer cancel()
	l, err := c.AcquireWith(ctx, cmd.Key, ms(cmd.LeaseMS), d.brk.wait(ms(cmd.WaitMS)), client.Limit(max(cmd.Limit, 1)))
	if err != nil {
		return nil, err
	}
	return map[string]any{"token": strconv.FormatUint(l.Token, 10), "limit": l.Limit, "place": l.Place}, nil
}
