package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// runTLS runs `lockd tls ARGS...` as main's run would, without needing
// tlsCommand in main's command list.
func runTLS(t *testing.T, args ...string) (stdout, msg string, code int) {
	t.Helper()
	var out bytes.Buffer
	app := &cli.App{
		Name:           "lockd",
		Writer:         &out,
		ErrWriter:      &out,
		ExitErrHandler: func(*cli.Context, error) {},
		Commands:       []*cli.Command{tlsCommand()},
	}
	err := app.Run(append([]string{"lockd", "tls"}, args...))
	if err == nil {
		return out.String(), "", 0
	}
	var ec cli.ExitCoder
	if !errors.As(err, &ec) {
		t.Fatalf("lockd tls %s: error %v is not a cli.ExitCoder", strings.Join(args, " "), err)
	}
	return out.String(), err.Error(), ec.ExitCode()
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, msg, code := runTLS(t, args...)
	if code != 0 {
		t.Fatalf("lockd tls %s: exit %d: %s", strings.Join(args, " "), code, msg)
	}
	return out
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != want {
		t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), want)
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTLSCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	out := mustRun(t, "ca", "--dir", dir)
	certPath, keyPath := filepath.Join(dir, "lockd-ca.pem"), filepath.Join(dir, "lockd-ca-key.pem")
	checkMode(t, dir, 0o700)
	checkMode(t, certPath, 0o644)
	checkMode(t, keyPath, 0o600)
	for _, want := range []string{certPath, keyPath, "next: lockd tls cert --host 10.0.0.1 --dir " + dir} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not mention %q:\n%s", want, out)
		}
	}
	ca := readCert(t, certPath)
	if !ca.IsCA || ca.Subject.CommonName != "lockd CA" {
		t.Errorf("IsCA %v, CN %q", ca.IsCA, ca.Subject.CommonName)
	}
	if days := ca.NotAfter.Sub(ca.NotBefore).Hours() / 24; days < 3650 || days > 3651 {
		t.Errorf("valid %.1f days, want the default 3650", days)
	}

	_, msg, code := runTLS(t, "ca", "--dir", dir)
	if code != 1 || !strings.Contains(msg, certPath) || !strings.Contains(msg, "--force") {
		t.Errorf("second run: exit %d, %q; want exit 1 naming %s and --force", code, msg, certPath)
	}
	if again := readCert(t, certPath); !again.Equal(ca) {
		t.Error("a refused run changed the CA")
	}

	// --force replaces both files, and the key stays private even if it
	// had been made readable meanwhile.
	if err := os.Chmod(keyPath, 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "ca", "--dir", dir, "--force", "--name", "acme CA", "--days", "10")
	if again := readCert(t, certPath); again.Equal(ca) || again.Subject.CommonName != "acme CA" {
		t.Errorf("--force kept the old CA (CN %q)", again.Subject.CommonName)
	}
	checkMode(t, keyPath, 0o600)
	checkMode(t, certPath, 0o644)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("%d files in %s, want 2 (no temporary files left)", len(entries), dir)
	}
}

func TestTLSCertNode(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "ca", "--dir", dir)
	out := mustRun(t, "cert", "--dir", dir, "--host", "10.0.0.1,node1.example.com", "--host", "localhost")
	certPath, keyPath := filepath.Join(dir, "lockd-10.0.0.1.pem"), filepath.Join(dir, "lockd-10.0.0.1-key.pem")
	checkMode(t, certPath, 0o644)
	checkMode(t, keyPath, 0o600)
	want := "--tls-cert " + certPath + " --tls-key " + keyPath + " --tls-ca " + filepath.Join(dir, "lockd-ca.pem")
	if !strings.Contains(out, want) || !strings.Contains(out, "lockd --tls-cert") {
		t.Errorf("output does not show the lockd flags %q:\n%s", want, out)
	}
	c := readCert(t, certPath)
	if len(c.IPAddresses) != 1 || !slices.Equal(c.DNSNames, []string{"node1.example.com", "localhost"}) {
		t.Errorf("IPs %v, DNS names %v", c.IPAddresses, c.DNSNames)
	}
	if days := c.NotAfter.Sub(c.NotBefore).Hours() / 24; days < 730 || days > 731 {
		t.Errorf("valid %.1f days, want the default 730", days)
	}
	if _, err := tls.LoadX509KeyPair(certPath, keyPath); err != nil {
		t.Errorf("files do not load as a key pair: %v", err)
	}

	_, msg, code := runTLS(t, "cert", "--dir", dir, "--host", "10.0.0.1")
	if code != 1 || !strings.Contains(msg, certPath) || !strings.Contains(msg, "--force") {
		t.Errorf("second run: exit %d, %q; want exit 1 naming %s", code, msg, certPath)
	}
	mustRun(t, "cert", "--dir", dir, "--host", "10.0.0.1", "--force")
	if again := readCert(t, certPath); again.Equal(c) {
		t.Error("--force kept the old certificate")
	}
}

func TestTLSCertClient(t *testing.T) {
	dir, caDir := t.TempDir(), t.TempDir()
	mustRun(t, "ca", "--dir", caDir)
	caPath, caKeyPath := filepath.Join(caDir, "lockd-ca.pem"), filepath.Join(caDir, "lockd-ca-key.pem")
	out := mustRun(t, "cert", "--role", "admin", "--name", "alice smith/ops", "--dir", dir, "--ca", caPath, "--ca-key", caKeyPath, "--days", "30")
	certPath := filepath.Join(dir, "lockd-alice_smith_ops.pem")
	checkMode(t, certPath, 0o644)
	checkMode(t, filepath.Join(dir, "lockd-alice_smith_ops-key.pem"), 0o600)
	if !strings.Contains(out, "lockctl status --tls-cert "+certPath) || !strings.Contains(out, "--tls-ca "+caPath) {
		t.Errorf("output does not show the lockctl flags:\n%s", out)
	}
	c := readCert(t, certPath)
	if c.Subject.CommonName != "alice smith/ops" || !slices.Equal(c.Subject.OrganizationalUnit, []string{"lockd-admin"}) {
		t.Errorf("CN %q, OU %v", c.Subject.CommonName, c.Subject.OrganizationalUnit)
	}
}

// TestTLSDefaultDir writes in the current folder, as a person types it.
func TestTLSDefaultDir(t *testing.T) {
	t.Chdir(t.TempDir())
	out := mustRun(t, "ca")
	if !strings.Contains(out, "wrote lockd-ca.pem") || !strings.Contains(out, "next: lockd tls cert --host 10.0.0.1 ") {
		t.Errorf("output:\n%s", out)
	}
	out = mustRun(t, "cert", "--role", "client", "--name", "deploy-bot")
	if !strings.Contains(out, "--tls-cert lockd-deploy-bot.pem --tls-key lockd-deploy-bot-key.pem --tls-ca lockd-ca.pem") {
		t.Errorf("output:\n%s", out)
	}
	for _, f := range []string{"lockd-ca.pem", "lockd-ca-key.pem", "lockd-deploy-bot.pem", "lockd-deploy-bot-key.pem"} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
}

func TestTLSErrors(t *testing.T) {
	empty := t.TempDir()
	withCA := t.TempDir()
	mustRun(t, "ca", "--dir", withCA)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"cert", "--dir", empty, "--host", "10.0.0.1"}, 1, "no CA at " + filepath.Join(empty, "lockd-ca.pem") + ": run lockd tls ca --dir " + empty + " first"},
		{[]string{"cert", "--dir", withCA, "--host", "10.0.0.1", "--ca-key", filepath.Join(empty, "k.pem")}, 1, "point --ca-key at an existing file"},
		{[]string{"cert", "--dir", withCA, "--host", "10.0.0.1", "--ca", filepath.Join(withCA, "lockd-ca-key.pem")}, 1, "is it the CA file, not its key?"},
		{[]string{"cert", "--dir", withCA, "--role", "admin"}, 2, "admin certificates need --name"},
		{[]string{"cert", "--dir", withCA, "--role", "client", "--name", "bob", "--host", "10.0.0.1"}, 2, "--host is for node certificates only"},
		{[]string{"cert", "--dir", withCA}, 2, "a node certificate needs --host"},
		{[]string{"cert", "--dir", withCA, "--role", "root", "--name", "x"}, 2, `--role "root": want node, admin or client`},
		{[]string{"cert", "--dir", withCA, "--host", "node 1"}, 2, `host "node 1" is neither an IP address nor a valid DNS name`},
		{[]string{"cert", "--dir", withCA, "--host", "10.0.0.1:7070"}, 2, "give the host alone (10.0.0.1)"},
		{[]string{"cert", "--dir", withCA, "--host", "10.0.0.1", "--days", "0"}, 2, "--days 0: must be between 1 and"},
		// Flag errors read as lockd's own do (flagUsage), not as urfave's
		// raw "flag provided but not defined".
		{[]string{"cert", "--dir", withCA, "--bogus"}, 2, "unknown flag --bogus; see `lockd tls cert --help`"},
		{[]string{"cert", "--dir", withCA, "--hots", "10.0.0.1"}, 2, "unknown flag --hots; did you mean --host?; see `lockd tls cert --help`"},
		{[]string{"cert", "--dir", withCA, "--host"}, 2, "--host needs a value; see `lockd tls cert --help`"},
		{[]string{"ca", "--dir", empty, "--days", "ten"}, 2, "--days \"ten\": want a whole number; see `lockd tls ca --help`"},
		{[]string{"ca", "--dir", empty, "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"bogus"}, 2, `no command "bogus" under lockd tls: want ca or cert`},
		{[]string{"--bogus"}, 2, "unknown flag --bogus; see `lockd tls --help`"},
	} {
		_, msg, code := runTLS(t, tc.args...)
		if strings.Contains(msg, "flag provided but not defined") {
			t.Errorf("lockd tls %s: %q is urfave's wording, not lockd's", strings.Join(tc.args, " "), msg)
		}
		if code != tc.code || !strings.Contains(msg, tc.want) {
			t.Errorf("lockd tls %s: exit %d, %q; want exit %d mentioning %q", strings.Join(tc.args, " "), code, msg, tc.code, tc.want)
		}
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("failed runs left files in %s: %v", empty, entries)
	}
}

func TestTLSHelpPlaceholders(t *testing.T) {
	for _, sub := range []string{"ca", "cert"} {
		out := mustRun(t, sub, "--help")
		if strings.Contains(out, " value") {
			t.Errorf("lockd tls %s --help shows a \"value\" placeholder:\n%s", sub, out)
		}
		if !strings.Contains(out, "--dir DIR") || !strings.Contains(out, "--days N") {
			t.Errorf("lockd tls %s --help lacks the DIR and N placeholders:\n%s", sub, out)
		}
	}
}
