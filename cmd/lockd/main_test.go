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
		{[]string{"tsl"}, 2, `lockd: unexpected argument "tsl": lockd takes flags, and the commands tls and completion; did you mean "tls"?; see ` + "`lockd --help`\n"},
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
