package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/cmd/internal/survey"
	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

func TestHandoffCommand(t *testing.T) {
	tc := startCluster(t, 3)
	a := tc.addrs[0]

	// The successor is the caught-up standby of highest priority; a node
	// just started may not have caught up yet, so either may be picked.
	code, out, errOut := lockctl(t, "--addr", tc.addrList(), "handoff")
	if code != 0 {
		t.Fatalf("handoff: exit %d: %s", code, errOut)
	}
	m := regexp.MustCompile(`^active is now (\S+) \(handoff took [0-9.]+(µs|ms|s)\)\n$`).FindStringSubmatch(out)
	if m == nil || m[1] == a {
		t.Fatalf("handoff output %q", out)
	}
	b := m[1]
	// The handoff is sticky: the role stays where it went.
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		st, err := client.Status(context.Background(), b)
		if err != nil || st.Role != survey.RoleActive {
			t.Fatalf("handoff did not stick: %s is %s (active %q) %v after lockctl saw it active", b, st.Role, st.Active, err)
		}
	}

	// The standbys subscribe to the new active's stream a moment after
	// it takes over; until then lockd refuses to hand off to them.
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, out, errOut = lockctl(t, "--addr", a, "handoff", "--to", a, "--json")
		if code != exitFailed || !strings.Contains(errOut, "not a caught-up standby") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var got handoffJSON
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("handoff --to --json: exit %d %v: %s %s", code, err, out, errOut)
	}
	if got.From == nil || *got.From != b || got.To != a || got.GapMs <= 0 {
		t.Errorf("handoff --json: %s", out)
	}

	// A handoff lockd refuses exits 1 with lockd's reason.
	nowhere := freeLoopbackAddrs(t, 1)[0]
	code, _, errOut = lockctl(t, "--addr", a, "handoff", "--to", nowhere)
	if code != exitFailed || !strings.Contains(errOut, "lockd did not hand off: ") || !strings.Contains(errOut, nowhere) {
		t.Errorf("handoff to a stranger: exit %d: %s", code, errOut)
	}
	code, _, errOut = lockctl(t, "--addr", a, "handoff", "--to", a)
	if code != exitFailed || !strings.Contains(errOut, "already active") {
		t.Errorf("handoff to the active: exit %d: %s", code, errOut)
	}
}

// fakeHandoff hands off at once, to the address it is given.
type fakeHandoff struct{ to string }

func (f fakeHandoff) Handoff(ctx context.Context, to string) (string, error) { return f.to, nil }

func TestRunHandoffWaitsForTheNewActive(t *testing.T) {
	start := time.Now()
	ask := func(ctx context.Context, addr string) (proto.Status, error) {
		if time.Since(start) < 50*time.Millisecond {
			return proto.Status{Self: addr, Role: "joining"}, nil
		}
		return proto.Status{Self: addr, Role: survey.RoleActive}, nil
	}
	res, err := runHandoff(context.Background(), fakeHandoff{to: "b:1"}, ask, "")
	if err != nil || res.To != "b:1" || res.Gap < 50*time.Millisecond {
		t.Fatalf("got %+v, %v", res, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	never := func(ctx context.Context, addr string) (proto.Status, error) {
		return proto.Status{Self: addr, Role: survey.RoleStandby}, nil
	}
	_, err = runHandoff(ctx, fakeHandoff{to: "b:1"}, never, "")
	var ns *notServing
	if !errors.As(err, &ns) || ns.last != "role=standby" {
		t.Errorf("never serving: %v", err)
	}
}

// What a node names and says in a handoff reaches the terminal escaped.
func TestHandoffEscapesWhatNodesSay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	role := "\x1b[2Jjoining\u202e"
	never := func(ctx context.Context, addr string) (proto.Status, error) {
		return proto.Status{Self: addr, Role: role}, nil
	}
	to := rlo + ":1"
	_, err := runHandoff(ctx, fakeHandoff{to: to}, never, "")
	g := &globals{AddrList: "a:1"}
	var b bytes.Buffer
	reportError(&b, handoffFailure(ctx, g, time.Second, err))
	assertNoHostileBytes(t, "not serving", b.String(), false, role, to)
	if want := `lockctl: lockd handed the role to deploy\u202e:1, but it did not answer as active in time (last seen: role=\x1b[2Jjoining\u202e);`; !strings.HasPrefix(b.String(), want) {
		t.Errorf("got  %s\nwant %s", b.String(), want)
	}

	b.Reset()
	refused := &client.ServerError{Op: proto.OpHandoff, Key: proto.WordNone, Msg: "target " + to + " is not a caught-up standby"}
	reportError(&b, handoffFailure(context.Background(), g, time.Second, refused))
	assertNoHostileBytes(t, "refused", b.String(), false, to)
	if want := `lockctl: lockd did not hand off: target deploy\u202e:1 is not a caught-up standby` + "\n"; b.String() != want {
		t.Errorf("got  %s\nwant %s", b.String(), want)
	}

	// The node says which role is missing; lockctl adds its flags.
	b.Reset()
	admin := &client.ServerError{Op: proto.OpHandoff, Key: proto.WordNone, Msg: "this needs the admin role: authenticate with the admin secret or an admin certificate"}
	reportError(&b, handoffFailure(context.Background(), g, time.Second, admin))
	if want := "lockctl: lockd did not hand off: this needs the admin role: authenticate with the admin secret or an admin certificate; pass the node's --admin-secret-file with --secret-file"; !strings.HasPrefix(b.String(), want) {
		t.Errorf("got  %s\nwant %s", b.String(), want)
	}
}
