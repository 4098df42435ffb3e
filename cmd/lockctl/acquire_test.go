package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func TestAcquirePrintsToken(t *testing.T) {
	f := startFake(t)
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "acquire", "--key", "deploy", "--lease", "2m", "--wait", "1500ms")
	if code != 0 {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	tok, ok := f.holder("deploy")
	if !ok || stdout != strconv.FormatUint(tok, 10)+"\n" {
		t.Fatalf("stdout %q, want the token %d alone on its line", stdout, tok)
	}
	// The client sends what is left of the wait, a hair under 1.5s.
	if got := f.requests(); len(got) != 1 || !strings.HasPrefix(got[0], "A deploy 120 1.") {
		t.Errorf("requests %q, want [A deploy 120 1.5]", got)
	}
}

func TestAcquireJSON(t *testing.T) {
	f := startFake(t)
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "--json", "acquire", "--key", "deploy", "--lease", "500ms")
	if code != 0 {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	var got lockJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	tok, _ := f.holder("deploy")
	// The token must survive as an exact integer, not a float.
	if got.Key != "deploy" || got.Token != tok || got.LeaseSeconds != 0.5 || !strings.Contains(stdout, `"token":`+strconv.FormatUint(tok, 10)) {
		t.Errorf("got %s, want key deploy, token %d, lease_seconds 0.5", stdout, tok)
	}
}

func TestAcquireTimeoutExit3(t *testing.T) {
	f := startFake(t)
	f.busy["deploy"] = true
	code, stdout, stderr := lockctl(t, "--addr", f.addr, "acquire", "--key", "deploy", "--wait", "2s")
	if code != exitTimeout {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitTimeout, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing", stdout)
	}
	if !strings.HasPrefix(stderr, `lockctl: "deploy" was still held after waiting 2s; `) {
		t.Errorf("stderr %q", stderr)
	}
}
