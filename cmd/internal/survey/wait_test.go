package survey

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto"
	"github.com/lockd-io/lockd/proto/client"
)

// WaitActive asks until the node says it is active, and keeps its last
// answer for when it never does.
func TestWaitActive(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	becomes := func(ctx context.Context, addr string) (proto.Status, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		switch calls {
		case 1:
			return proto.Status{}, fmt.Errorf("status %s: %w", addr, client.ErrNoAnswer)
		case 2:
			return proto.Status{Self: addr, Role: RoleStandby, Active: "x:1"}, nil
		}
		return proto.Status{Self: addr, Role: RoleActive}, nil
	}
	waited, last, err := WaitActive(context.Background(), becomes, "a:1", 5*time.Second, time.Millisecond)
	if err != nil || calls != 3 || last.Status.Role != RoleActive || last.Asked != "a:1" || waited <= 0 || waited > 5*time.Second {
		t.Errorf("waited %s, last %+v, err %v after %d questions", waited, last, err, calls)
	}

	standby := proto.Status{Self: "a:1", Role: RoleStandby, Active: "b:2"}
	never := func(ctx context.Context, addr string) (proto.Status, error) { return standby, nil }
	waited, last, err = WaitActive(context.Background(), never, "a:1", 30*time.Millisecond, 5*time.Millisecond)
	if !errors.Is(err, ErrNotActive) || !reflect.DeepEqual(last, Answer{Asked: "a:1", Status: standby}) || waited < 30*time.Millisecond {
		t.Errorf("never active: waited %s, last %+v, err %v", waited, last, err)
	}

	down := func(ctx context.Context, addr string) (proto.Status, error) {
		return proto.Status{}, syscall.ECONNREFUSED
	}
	_, last, err = WaitActive(context.Background(), down, "a:1", 10*time.Millisecond, time.Millisecond)
	if !errors.Is(err, ErrNotActive) || !errors.Is(last.Err, syscall.ECONNREFUSED) {
		t.Errorf("unreachable: last %+v, err %v", last, err)
	}

	// Each question may take what is left of the timeout, and no less
	// than 50ms: a slow answer that comes within it counts.
	slow := func(ctx context.Context, addr string) (proto.Status, error) {
		select {
		case <-ctx.Done():
			return proto.Status{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
			return proto.Status{Self: addr, Role: RoleActive}, nil
		}
	}
	if _, _, err := WaitActive(context.Background(), slow, "a:1", time.Millisecond, time.Millisecond); err != nil {
		t.Errorf("a slow answer within 50ms: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	stop := func(ctx context.Context, addr string) (proto.Status, error) {
		cancel()
		return standby, nil
	}
	if _, _, err := WaitActive(ctx, stop, "a:1", 5*time.Second, time.Millisecond); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err %v", err)
	}
}
