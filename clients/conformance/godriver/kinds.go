package main

// The commands of the lock kinds beside the exclusive lock (DRIVER.md):
// acquire_all and hold_all take a set of keys, proclaim changes a
// leader's value; shared (on acquire, try, hold, acquire_all, hold_all)
// takes keys as a reader, and acquire and hold answer the grant's place.

import (
	"strconv"

	"github.com/lockd-io/lockd/proto/client"
)

// acquireOpts are the options of an acquire, a hold or a set that
// cmd's fields ask for.
func (d *driver) acquireOpts(cmd command) []client.AcquireOption {
	var opts []client.AcquireOption
	if cmd.Limit != 0 {
		opts = append(opts, client.Limit(cmd.Limit))
	}
	if cmd.Shared {
		opts = append(opts, client.Shared())
	}
	return opts
}

// placeOf is a grant's place as DRIVER.md writes it: null when the
// grant names none.
func placeOf(l client.Lock) any {
	if l.Place == 0 {
		return nil
	}
	return l.Place
}

func tokensOf(ls client.Locks) []string {
	tokens := make([]string, 0, len(ls))
	for _, t := range ls.Tokens() {
		tokens = append(tokens, strconv.FormatUint(t, 10))
	}
	return tokens
}

func (d *driver) acquireAll(cmd command) (map[string]any, error) {
	c, err := d.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := callCtx(cmd)
	defer cancel()
	ls, err := c.AcquireAll(ctx, cmd.Keys, ms(cmd.LeaseMS), d.brk.wait(ms(cmd.WaitMS)), d.acquireOpts(cmd)...)
	if err != nil {
		return nil, err
	}
	return map[string]any{"tokens": tokensOf(ls)}, nil
}

func (d *driver) holdAll(cmd command) (map[string]any, error) {
	c, err := d.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := callCtx(cmd)
	defer cancel()
	opts := d.acquireOpts(cmd)
	if wait := d.brk.wait(ms(cmd.WaitMS)); wait > 0 {
		opts = append(opts, client.Wait(wait))
	}
	if cmd.MaxMS != nil {
		opts = append(opts, client.MaxHold(ms(*cmd.MaxMS)))
	}
	s, err := c.HoldAll(ctx, cmd.Keys, ms(cmd.LeaseMS), opts...)
	if err != nil {
		return nil, err
	}
	return map[string]any{"hold": d.addHold(s, nil), "tokens": tokensOf(s.Locks())}, nil
}

// proclaim changes the value of the leader that campaign's hold is.
func (d *driver) proclaim(cmd command) (map[string]any, error) {
	st, err := d.holdOf(cmd)
	if err != nil {
		return nil, err
	}
	if st.e == nil {
		return nil, invalidError{"hold " + strconv.Itoa(cmd.Hold) + " is no campaign's"}
	}
	ctx, cancel := callCtx(cmd)
	defer cancel()
	return nil, st.e.Proclaim(ctx, cmd.Value)
}
