package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

func TestMetricsAddr(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"", "", ""},
		{"9100", "127.0.0.1:9100", ""},
		{":9100", "127.0.0.1:9100", ""},
		{"0.0.0.0:9100", "0.0.0.0:9100", ""},
		{"10.0.0.1:9100", "10.0.0.1:9100", ""},
		{"[::1]:9100", "[::1]:9100", ""},
		{"localhost:9100", "localhost:9100", ""},
		{"nine", "", "want HOST:PORT, :PORT or PORT"},
		{"host:port", "", "want HOST:PORT, :PORT or PORT"},
		{"70000", "", "want HOST:PORT, :PORT or PORT"},
	} {
		got, err := metricsAddr(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("metricsAddr(%q) = %q, %v; want an error saying %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("metricsAddr(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestMetricsListenErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--metrics-listen", "nine"}, 2, `--metrics-listen "nine": want HOST:PORT, :PORT or PORT`},
		{[]string{"--metrics-listen", "127.0.0.2:99999"}, 2, "want HOST:PORT"},
		{[]string{"--metrics-listen", busy.Addr().String()}, 1, "cannot serve metrics on " + busy.Addr().String()},
	} {
		var stderr bytes.Buffer
		code := run(append([]string{"lockd", "--listen", "127.0.0.1:0"}, tc.args...), &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("lockd %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(tc.args, " "), code, stderr.String(), tc.code, tc.want)
		}
	}
}
