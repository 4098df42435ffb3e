// Command godriver is the Go client's conformance driver: it reads the
// commands of clients/conformance/DRIVER.md on stdin, one JSON object a
// line, runs each on a proto/client.Client through its public API only,
// and writes each result on stdout as it completes.
//
// LOCKD_GODRIVER_BREAK names one rule to break on purpose, so that the
// harness can prove its cases fail a client that breaks them
// (clients/conformance's TestHarnessCatches). The first four go through
// the client's public Options; the Go client keeps the others whatever
// its Options say, so the driver breaks them on its behalf, as a client
// breaking the rule would behave towards its caller (breaks.go):
//
//	conns1        one connection even for a single address
//	norelease     a release is sent once, never re-sent
//	noredial      a dropped connection is re-dialled after a minute, not 3 s
//	deaf          a silent node is noticed after a minute, not the failure timeout
//	fifo          each result goes to the oldest call to a node still waiting
//	              for one, whatever its op and key: answers matched in the
//	              order they arrive
//	nomove        an acquire whose connection drops fails at once, as
//	              unavailable: it neither moves nor tries another connection
//	nofollow      an acquire redirected by M fails as refused (its grant,
//	              from the node the M named, is released)
//	noroundrobin  every call goes over one connection, while the others the
//	              client should keep stay open and idle
//	lostrelease   a release answered ok after a connection dropped under it
//	              fails as not held
//	nostale       a watch or an observer never says it lost the cluster
//	impatient     an acquire, hold or campaign that waits forever fails as
//	              unavailable in an outage: it is sent with a wait of a second
//	anylease      a hold takes any lease: the failure timeout is 10ms
//	quickdisagree redirects between nodes that disagree end after ten: the
//	              failure timeout is 10ms, three of which pass sooner
//	textstatus    a status's values are the text of the S answer's words
//
// Nothing else reads it; a user of the driver leaves it unset.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockd-io/lockd/proto/auth"
	"github.com/lockd-io/lockd/proto/client"
)

// command is one line of stdin: every field any command may carry.
type command struct {
	ID            int64      `json:"id"`
	Cmd           string     `json:"cmd"`
	Addrs         []string   `json:"addrs"`
	FailureTO     *float64   `json:"failure_timeout_ms"`
	ConnsPerAddr  int        `json:"conns_per_addr"`
	RedialMS      *float64   `json:"redial_ms"`
	ReleaseEvery  *float64   `json:"release_every_ms"`
	ReleaseFor    *float64   `json:"release_for_ms"`
	DialTimeoutMS *float64   `json:"dial_timeout_ms"`
	Name          string     `json:"name"`
	Secret        *string    `json:"secret"`
	Role          string     `json:"role"`
	TLS           *tlsConfig `json:"tls"`

	Key         string   `json:"key"`
	LeaseMS     float64  `json:"lease_ms"`
	WaitMS      float64  `json:"wait_ms"`
	Limit       int      `json:"limit"`
	CancelAfter *float64 `json:"cancel_after_ms"`
	Token       string   `json:"token"`
	Pattern     string   `json:"pattern"`
	MaxMS       *float64 `json:"max_ms"`
	Hold        int      `json:"hold"`
	Watch       int      `json:"watch"`
	Value       string   `json:"value"`
	Keys        []string `json:"keys"`
	Shared      bool     `json:"shared"`
}

type tlsConfig struct {
	CA         string `json:"ca"`
	Cert       string `json:"cert"`
	Key        string `json:"key"`
	ServerName string `json:"server_name"`
}

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type driver struct {
	out    *json.Encoder
	outMu  sync.Mutex
	opened time.Time

	mu     sync.Mutex
	c      *client.Client
	addrs  []string
	opts   client.Options
	closed bool
	wg     sync.WaitGroup
	h      handles
	brk    breaks
}

func (d *driver) write(v map[string]any) {
	d.outMu.Lock()
	defer d.outMu.Unlock()
	if err := d.out.Encode(v); err != nil {
		fmt.Fprintln(os.Stderr, "godriver: writing a result:", err)
	}
}

func main() {
	d := &driver{out: json.NewEncoder(os.Stdout), h: handles{holds: map[int]*holdState{}, watches: map[int]context.CancelFunc{}}}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var cmd command
		if err := json.Unmarshal(sc.Bytes(), &cmd); err != nil {
			fmt.Fprintf(os.Stderr, "godriver: line %q is not a command: %v\n", sc.Text(), err)
			continue
		}
		start := time.Now()
		if cmd.Cmd == "open" {
			// open runs before any other command reads the client.
			d.answer(cmd, start)
			continue
		}
		d.brk.fifoStart(cmd)
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.answer(cmd, start)
		}()
	}
	// Stdin is closed: close the client, which ends the calls still
	// running and the watches, and write their results.
	d.mu.Lock()
	if d.c != nil && !d.closed {
		d.c.Close()
	}
	d.mu.Unlock()
	d.brk.close()
	d.wg.Wait()
}

func (d *driver) answer(cmd command, start time.Time) {
	res, err := d.run(cmd)
	if res == nil {
		res = map[string]any{}
	}
	res["id"] = d.brk.fifoID(cmd)
	res["ms"] = msOf(time.Since(start))
	if err != nil {
		kind, msg := classify(err)
		res["ok"] = false
		res["error"] = kind
		res["message"] = msg
	} else {
		res["ok"] = true
	}
	d.write(res)
}

// errUnsupported answers a command the Go client has no API for.
var errUnsupported = errors.New("unsupported")

type invalidError struct{ msg string }

func (e invalidError) Error() string { return e.msg }

func classify(err error) (string, string) {
	var se *client.SetupError
	var srv *client.ServerError
	var inv invalidError
	switch {
	case errors.Is(err, errUnsupported):
		return "unsupported", "the Go client has no API for this command"
	case errors.As(err, &inv), errors.Is(err, client.ErrInvalidArgument):
		return "invalid", err.Error()
	case errors.Is(err, context.Canceled):
		return "cancelled", err.Error()
	case errors.Is(err, client.ErrTimeout):
		return "timeout", err.Error()
	case errors.Is(err, client.ErrNotHeld):
		return "notheld", err.Error()
	case errors.Is(err, client.ErrLimitMismatch):
		return "limit_mismatch", err.Error()
	case errors.Is(err, client.ErrClosed):
		return "closed", err.Error()
	case errors.As(err, &se):
		return "auth", err.Error()
	case errors.As(err, &srv):
		if isAuthRefusal(srv.Msg) {
			return "auth", err.Error()
		}
		return "refused", err.Error()
	case errors.Is(err, client.ErrUnavailable):
		return "unavailable", err.Error()
	}
	return "other", err.Error()
}

// isAuthRefusal tells a node's refusal of a request for want of
// authentication from other refusals.
func isAuthRefusal(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "auth") || strings.Contains(m, "secret")
}

func (d *driver) client() (*client.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c == nil {
		return nil, invalidError{"open has not succeeded; send open first"}
	}
	return d.c, nil
}

// callCtx is the context of one call: cancelled cancel_after_ms after
// the call started, when the command says so.
func callCtx(cmd command) (context.Context, context.CancelFunc) {
	if cmd.CancelAfter != nil {
		ctx, cancel := context.WithCancel(context.Background())
		t := time.AfterFunc(ms(*cmd.CancelAfter), cancel)
		return ctx, func() { t.Stop(); cancel() }
	}
	return context.WithCancel(context.Background())
}

func (d *driver) run(cmd command) (map[string]any, error) {
	switch cmd.Cmd {
	case "open":
		if err := d.open(cmd); err != nil {
			return nil, err
		}
		return nil, nil
	case "close":
		d.mu.Lock()
		c := d.c
		d.closed = true
		d.mu.Unlock()
		d.brk.close()
		if c != nil {
			return nil, c.Close()
		}
		return nil, nil
	case "acquire":
		c, err := d.client()
		if err != nil {
			return nil, err
		}
		ctx, cancel := callCtx(cmd)
		defer cancel()
		actx, dropped := d.brk.acquireCtx(ctx)
		l, err := c.AcquireWith(actx, cmd.Key, ms(cmd.LeaseMS), d.brk.wait(ms(cmd.WaitMS)), d.acquireOpts(cmd)...)
		if dropped() && err != nil {
			return nil, errBroken(d.brk.name, "the acquire's connection dropped", client.ErrUnavailable)
		}
		if err != nil {
			return nil, err
		}
		if err := d.brk.notFollowed(c, d.addrs, cmd.Key, l.Token); err != nil {
			return nil, err
		}
		return map[string]any{"token": strconv.FormatUint(l.Token, 10), "limit": l.Limit, "place": placeOf(l)}, nil
	case "release", "renew":
		c, err := d.client()
		if err != nil {
			return nil, err
		}
		tok, err := strconv.ParseUint(cmd.Token, 10, 64)
		if err != nil {
			return nil, invalidError{fmt.Sprintf("token %q is not a decimal u64", cmd.Token)}
		}
		ctx, cancel := callCtx(cmd)
		defer cancel()
		if cmd.Cmd == "release" {
			drops := d.brk.drops.Load()
			err := c.ReleaseToken(ctx, cmd.Key, tok)
			if err == nil && d.brk.name == "lostrelease" && d.brk.drops.Load() > drops {
				return nil, errBroken(d.brk.name, "a connection dropped under the release", client.ErrNotHeld)
			}
			return nil, err
		}
		return nil, c.Renew(ctx, cmd.Key, tok, ms(cmd.LeaseMS))
	case "queue":
		c, err := d.client()
		if err != nil {
			return nil, err
		}
		q, err := c.QueueInfo(context.Background(), cmd.Key)
		if err != nil {
			return nil, err
		}
		return queueFields(q), nil
	case "keys":
		c, err := d.client()
		if err != nil {
			return nil, err
		}
		keys, total, err := c.Keys(context.Background(), cmd.Pattern)
		if err != nil {
			return nil, err
		}
		if keys == nil {
			keys = []string{}
		}
		return map[string]any{"keys": keys, "total": total}, nil
	case "status":
		return d.status()
	case "try":
		return d.try(cmd)
	case "watch":
		return d.watch(cmd)
	case "unwatch":
		return d.unwatch(cmd)
	case "hold":
		return d.hold(cmd)
	case "hold_release":
		return d.holdRelease(cmd)
	case "hold_state":
		return d.holdState(cmd)
	case "campaign":
		return d.campaign(cmd)
	case "leader":
		return d.leader(cmd)
	case "observe":
		return d.observe(cmd)
	case "resign":
		return d.resign(cmd)
	case "acquire_all":
		return d.acquireAll(cmd)
	case "hold_all":
		return d.holdAll(cmd)
	case "proclaim":
		return d.proclaim(cmd)
	}
	return nil, errUnsupported
}

// status asks each address in turn, as the client's own S would: the
// Go client reads status through client.StatusWith, node by node, into
// proto.Status, whose typed fields are DRIVER.md's.
func (d *driver) status() (map[string]any, error) {
	if _, err := d.client(); err != nil {
		return nil, err
	}
	var last error
	for _, a := range d.addrs {
		st, err := client.StatusWith(context.Background(), a, d.opts)
		if err != nil {
			last = err
			continue
		}
		peers := []map[string]any{}
		for _, p := range st.Peers {
			peers = append(peers, map[string]any{"addr": p.Addr, "role": p.Role, "up": p.Reachable,
				"seq": strconv.FormatUint(p.Seq, 10), "lag": strconv.FormatUint(p.Lag, 10), "token": strconv.FormatUint(p.Token, 10)})
		}
		fields := map[string]any{"self": st.Self, "role": st.Role, "active": st.Active,
			"token": strconv.FormatUint(st.Token, 10), "seq": strconv.FormatUint(st.Seq, 10), "uptime_ms": msOf(st.Uptime),
			"keys": st.Keys, "waiters": st.Waiters, "sticky": st.Sticky, "replication": st.Replication,
			"degraded": st.Degraded, "durability": st.Durability, "peers": peers}
		if d.brk.name == "textstatus" {
			for k, v := range fields {
				fields[k] = fmt.Sprint(v)
			}
		}
		return map[string]any{"fields": fields}, nil
	}
	return nil, last
}

func (d *driver) open(cmd command) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c != nil {
		return invalidError{"open was sent twice; one driver runs one client"}
	}
	// The client's log goes to stderr, which the harness shows when a
	// case fails.
	opts := client.Options{ConnsPerAddr: cmd.ConnsPerAddr, Name: cmd.Name,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if cmd.FailureTO != nil {
		opts.FailureTimeout = ms(*cmd.FailureTO)
	}
	if cmd.RedialMS != nil {
		opts.Redial = ms(*cmd.RedialMS)
	}
	if cmd.ReleaseEvery != nil {
		opts.ReleaseEvery = ms(*cmd.ReleaseEvery)
	}
	if cmd.ReleaseFor != nil {
		opts.ReleaseFor = ms(*cmd.ReleaseFor)
	}
	if cmd.DialTimeoutMS != nil {
		opts.DialTimeout = ms(*cmd.DialTimeoutMS)
	}
	if cmd.Secret != nil {
		opts.Secret = []byte(*cmd.Secret)
	}
	switch cmd.Role {
	case "", "client":
	case "admin":
		opts.Role = auth.Admin
	case "peer":
		opts.Role = auth.Peer
	default:
		return invalidError{fmt.Sprintf("role %q is not client, admin or peer", cmd.Role)}
	}
	if cmd.TLS != nil {
		cfg, err := tlsFrom(cmd.TLS)
		if err != nil {
			return err
		}
		opts.TLS = cfg
	}
	d.brk.name = os.Getenv("LOCKD_GODRIVER_BREAK")
	if err := d.brk.apply(&opts, cmd.Addrs); err != nil {
		return err
	}
	c, err := client.New(cmd.Addrs, opts)
	if err != nil {
		return invalidError{err.Error()}
	}
	d.c, d.addrs, d.opts, d.opened = c, cmd.Addrs, opts, time.Now()
	return nil
}

func tlsFrom(t *tlsConfig) (*tls.Config, error) {
	cfg := &tls.Config{ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, invalidError{fmt.Sprintf("tls ca: %v", err)}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, invalidError{fmt.Sprintf("tls ca %s holds no PEM certificate", t.CA)}
		}
		cfg.RootCAs = pool
	}
	if t.Cert != "" || t.Key != "" {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, invalidError{fmt.Sprintf("tls cert: %v", err)}
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
