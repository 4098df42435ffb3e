package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/cluster"
	"github.com/lockd-io/lockd/cluster/metrics"
)

// metricsFlag is --metrics-listen: off unless given.
func metricsFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "metrics-listen",
		EnvVars: []string{"LOCKD_METRICS_LISTEN"},
		Usage: "serve /metrics (Prometheus), /healthz and /readyz over plain HTTP on `HOST:PORT`; " +
			"a bare :PORT or PORT means 127.0.0.1:PORT. Unauthenticated (counts only, never keys or tokens): keep it on loopback or a monitoring network",
		DefaultText: "off",
	}
}

// metricsAddr reads --metrics-listen: "" (off), HOST:PORT, or a port
// alone (PORT or :PORT), which means loopback: a port given without a
// host must not open the metrics to the network.
func metricsAddr(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = "", s
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("--metrics-listen %q: want HOST:PORT, :PORT or PORT", s)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// metricsEvery is how often /metrics renders its values at most: scrapes
// in between get the last rendering.
const metricsEvery = 250 * time.Millisecond

// startMetrics opens the --metrics-listen listener, if any, and serves
// node's metrics and probes on it until stop is called. A bad address is
// a usage error (exit 2), a busy port a start-up failure (exit 1).
func startMetrics(c *cli.Context, node *cluster.Node, logger *slog.Logger) (stop func(), err error) {
	addr, err := metricsAddr(c.String("metrics-listen"))
	if err != nil {
		return nil, cli.Exit(err.Error(), 2)
	}
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("cannot serve metrics on %s: %v; pick a free port with --metrics-listen", addr, err), 1)
	}
	srv := &http.Server{
		Handler:           metrics.PacedHandler(node, metrics.NewRegistry(node, version), metricsEvery),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server stopped", "addr", addr, "err", err.Error())
		}
	}()
	logger.Info("metrics serving", "addr", ln.Addr().String(), "paths", "/metrics /healthz /readyz")
	return func() { srv.Close() }, nil
}
