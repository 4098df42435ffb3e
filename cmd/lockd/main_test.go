package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompletionsUpToDate(t *testing.T) {
	for shell, file := range map[string]string{"bash": "lockd.bash", "zsh": "_lockd", "fish": "lockd.fish"} {
		var got bytes.Buffer
		if err := writeCompletion(&got, shell); err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("..", "..", "completions", file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("completions/%s is out of date: run make completions", file)
		}
	}
}

func TestStartupErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--bogus"}, 2, "lockd: unknown flag --bogus; see `lockd --help`\n"},
		{[]string{"--max-keys", "abc"}, 2, "lockd: --max-keys \"abc\": want a whole number; see `lockd --help`\n"},
		// Issue 11, item 15: lockd's usage errors read like lockctl's,
		// with a "did you mean" for a typo.
		{[]string{"--lisen", "127.0.0.1:0"}, 2, "lockd: unknown flag --lisen; did you mean --listen?; see `lockd --help`\n"},
		{[]string{"--heartbeat", "banana"}, 2, "lockd: --heartbeat \"banana\": want a duration like 500ms, 30s or 2m, or seconds like 10 or 0.5; see `lockd --help`\n"},
		{[]string{"--peers"}, 2, "lockd: --peers needs a value; see `lockd --help`\n"},
		{[]string{"tsl"}, 2, `lockd: unexpected argument "tsl": lockd takes flags, and the commands tls, completion and version; did you mean "tls"?; see ` + "`lockd --help`\n"},
		{[]string{"--max-keys", "0"}, 2, "--max-keys 0: must be at least 1"},
		{[]string{"--max-lease", "-1s"}, 2, "--max-lease -1s: must be more than 0"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"--log-level", "loud"}, 2, "--log-level"},
		{[]string{"--listen", "127.0.0.1:0", "--peers", "127.0.0.1:1,127.0.0.1:2"}, 1, "is not in --peers"},
		{[]string{"--listen", "nohost"}, 1, "is not HOST:PORT"},
		{[]string{"--heartbeat", "1s", "--failure-timeout", "1s", "--peers", "127.0.0.1:0"}, 1, "at least twice"},
	} {
		var stderr bytes.Buffer
		code := run(append([]string{"lockd", "--listen", "127.0.0.1:0"}, tc.args...), &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("lockd %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(tc.args, " "), code, stderr.String(), tc.code, tc.want)
		}
	}
}

// --listen takes a port alone as loopback, as --metrics-listen does.
func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{
		"7079": "127.0.0.1:7079", ":7079": "127.0.0.1:7079", " 7079 ": "127.0.0.1:7079",
		"10.0.0.1:7070": "10.0.0.1:7070", "[::1]:7070": "[::1]:7070", "0.0.0.0:7070": "0.0.0.0:7070",
		"nohost": "nohost", "70799": "70799", "": "",
	} {
		if got := listenAddr(in); got != want {
			t.Errorf("listenAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// lockd version works as lockctl version does, and says what --version
// says.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"lockd", "version"}, {"lockd", "--version"}} {
		var out bytes.Buffer
		app := newApp(&out)
		app.Writer = &out
		if err := app.Run(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if got := out.String(); !strings.HasPrefix(got, "lockd dev (go") || !strings.HasSuffix(got, ")\n") {
			t.Errorf("%v printed %q", args, got)
		}
	}
}
