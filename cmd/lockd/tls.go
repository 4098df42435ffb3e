package main

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockd-io/lockd/cmd/internal/pki"
)

// File names lockd tls writes, in --dir.
const (
	caCertFile = "lockd-ca.pem"
	caKeyFile  = "lockd-ca-key.pem"
)

// maxDays keeps --days within what a time.Duration holds, with room.
const maxDays = 100 * 365

// tlsCommand makes the files TLS between nodes and clients needs, so no
// one has to learn openssl to secure a cluster. The certificates
// themselves are package pki's; this file owns flags, files and output.
func tlsCommand() *cli.Command {
	return &cli.Command{
		Name:  "tls",
		Usage: "create a CA and certificates for TLS between lockd nodes and clients (no openssl needed)",
		Description: `Makes a private CA, then one certificate per node and per person or program
that talks to lockd, as PEM files in the current folder (or --dir). A
certificate's role decides what its holder may do: node (a lockd peer),
admin (a client that may also change the cluster), client (locks only).

Examples:
   lockd tls ca
   lockd tls cert --host 10.0.0.1 --host node1.example.com
   lockd tls cert --role admin --name alice
   lockd tls cert --role client --name deploy-bot

Keep lockd-ca-key.pem off the nodes: it signs new certificates, so whoever
holds it can join the cluster.`,
		HideHelpCommand: true,
		OnUsageError:    tlsUsageError(""),
		Subcommands:     []*cli.Command{tlsCACommand(), tlsCertCommand()},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("no command %q under lockd tls: want ca or cert (see lockd tls --help)", c.Args().First()), 2)
			}
			return cli.ShowSubcommandHelp(c)
		},
	}
}

func tlsCACommand() *cli.Command {
	return &cli.Command{
		Name:      "ca",
		Usage:     "create the CA that signs every node and client certificate",
		UsageText: "lockd tls ca [--dir DIR] [--name NAME] [--days N] [--force]",
		Description: `Writes ` + caCertFile + ` (the CA certificate: copy it to every node and client)
and ` + caKeyFile + ` (its key: keep it secret, ideally offline) in DIR.

Examples:
   lockd tls ca
   lockd tls ca --dir /etc/lockd/tls --name "acme lockd CA" --days 3650

Exit codes: 0 written; 1 a file exists already or could not be written; 2 usage error.`,
		OnUsageError: tlsUsageError("ca"),
		Flags: []cli.Flag{
			dirFlag(),
			&cli.StringFlag{Name: "name", Value: "lockd CA", Usage: "common `NAME` of the CA, shown by tools that inspect certificates"},
			daysFlag(3650),
			forceFlag(),
		},
		Action: func(c *cli.Context) error {
			if err := tlsNoArgs(c, "ca"); err != nil {
				return err
			}
			days, err := tlsDays(c)
			if err != nil {
				return err
			}
			certPEM, keyPEM, err := pki.NewCA(c.String("name"), days, time.Now())
			if err != nil {
				return cli.Exit("making the CA: "+err.Error(), 1)
			}
			dir := c.String("dir")
			certPath, keyPath, err := writePair(dir, caCertFile, caKeyFile, certPEM, keyPEM, c.Bool("force"))
			if err != nil {
				return err
			}
			next := "lockd tls cert --host 10.0.0.1"
			if filepath.Clean(dir) != "." {
				next += " --dir " + shellQuote(dir)
			}
			w := c.App.Writer
			fmt.Fprintf(w, "wrote %s (CA certificate: copy it to every node and client)\n", certPath)
			fmt.Fprintf(w, "wrote %s (CA key: keep it secret, ideally offline; it signs new certificates)\n", keyPath)
			fmt.Fprintf(w, "next: %s  # once per node, with each address clients and peers dial it at\n", next)
			return nil
		},
	}
}

func tlsCertCommand() *cli.Command {
	return &cli.Command{
		Name:      "cert",
		Usage:     "create a node, admin or client certificate signed by the CA",
		UsageText: "lockd tls cert --host HOST [--host HOST ...] [--role node|admin|client] [--name NAME] [--dir DIR] [--ca FILE] [--ca-key FILE] [--days N] [--force]",
		Description: `Writes lockd-NAME.pem and lockd-NAME-key.pem in DIR, signed by the CA that
lockd tls ca made. NAME is --name, else the first --host; characters other
than letters, digits, '.', '_' and '-' become '_' in the file name.

Roles:
   node     a lockd server: --host is required, once per IP address or DNS
            name clients and peers dial (repeat it, or separate with commas);
            the certificate serves clients and authenticates to peers
   admin    a person or program that may also change the cluster: --name
            is required, --host is refused
   client   a person or program that takes locks: --name is required,
            --host is refused

Examples:
   lockd tls cert --host 10.0.0.1
   lockd tls cert --host 10.0.0.2,node2.example.com,localhost,127.0.0.1
   lockd tls cert --role admin --name alice
   lockd tls cert --role client --name deploy-bot --days 90 --dir /etc/lockd/tls

Exit codes: 0 written; 1 no CA, a file exists already or could not be written; 2 usage error.`,
		OnUsageError: tlsUsageError("cert"),
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "host", Usage: "`HOST` (IP address or DNS name) the node is reached at; repeat or comma-separate (node only)"},
			&cli.StringFlag{Name: "role", Value: "node", Usage: "`ROLE` the certificate grants: node, admin or client"},
			&cli.StringFlag{Name: "name", Usage: "`NAME` in the certificate and its file names (default: the first --host; required for admin and client)"},
			dirFlag(),
			&cli.StringFlag{Name: "ca", Usage: "CA certificate `FILE` (default: DIR/" + caCertFile + ")"},
			&cli.StringFlag{Name: "ca-key", Usage: "CA key `FILE` (default: DIR/" + caKeyFile + ")"},
			daysFlag(730),
			forceFlag(),
		},
		Action: tlsCert,
	}
}

func tlsCert(c *cli.Context) error {
	if err := tlsNoArgs(c, "cert"); err != nil {
		return err
	}
	days, err := tlsDays(c)
	if err != nil {
		return err
	}
	role := strings.TrimSpace(c.String("role"))
	name := strings.TrimSpace(c.String("name"))
	var hosts []string
	for _, h := range c.StringSlice("host") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	switch role {
	case "node":
		if len(hosts) == 0 {
			return cli.Exit("a node certificate needs --host: the IP address or DNS name clients and peers dial, once per name (e.g. --host 10.0.0.1 --host node1.example.com)", 2)
		}
	case "admin", "client":
		if name == "" {
			return cli.Exit(fmt.Sprintf("%s certificates need --name: who or what will use it (e.g. --role %s --name alice)", role, role), 2)
		}
		if len(hosts) > 0 {
			return cli.Exit(fmt.Sprintf("--host is for node certificates only: %s certificates name a person or a program; drop --host", role), 2)
		}
	default:
		return cli.Exit(fmt.Sprintf("--role %q: want node, admin or client (see lockd tls cert --help)", role), 2)
	}
	if name == "" {
		name = hosts[0]
	}

	dir := c.String("dir")
	caPath, caKeyPath := c.String("ca"), c.String("ca-key")
	if caPath == "" {
		caPath = filepath.Join(dir, caCertFile)
	}
	if caKeyPath == "" {
		caKeyPath = filepath.Join(dir, caKeyFile)
	}
	caPEM, err := readCAFile(caPath, "--ca", dir)
	if err != nil {
		return err
	}
	caKeyPEM, err := readCAFile(caKeyPath, "--ca-key", dir)
	if err != nil {
		return err
	}

	certPEM, keyPEM, err := pki.NewCert(caPEM, caKeyPEM, pki.CertRequest{Role: role, Name: name, Hosts: hosts, Validity: days}, time.Now())
	if err != nil {
		var bad interface{ BadRequest() bool }
		if errors.As(err, &bad) && bad.BadRequest() {
			return cli.Exit(err.Error(), 2)
		}
		return cli.Exit(fmt.Sprintf("signing with %s and %s: %v", caPath, caKeyPath, err), 1)
	}
	base := "lockd-" + fileSafe(name)
	certPath, keyPath, err := writePair(dir, base+".pem", base+"-key.pem", certPEM, keyPEM, c.Bool("force"))
	if err != nil {
		return err
	}

	until := ""
	if block, _ := pem.Decode(certPEM); block != nil {
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			until = "; valid until " + cert.NotAfter.UTC().Format(time.DateOnly)
			if cert.NotAfter.Before(time.Now().Add(days - 24*time.Hour)) {
				until += ", when the CA expires"
			}
		}
	}
	w := c.App.Writer
	flags := fmt.Sprintf("--tls-cert %s --tls-key %s --tls-ca %s", shellQuote(certPath), shellQuote(keyPath), shellQuote(caPath))
	if role == "node" {
		fmt.Fprintf(w, "wrote %s (node certificate for %s%s)\n", certPath, strings.Join(hosts, ", "), until)
		fmt.Fprintf(w, "wrote %s (its key: keep it on that node only)\n", keyPath)
		fmt.Fprintf(w, "next: lockd %s  # on the node, with your other flags; copy the three files there\n", flags)
		return nil
	}
	fmt.Fprintf(w, "wrote %s (%s certificate for %s%s)\n", certPath, role, name, until)
	fmt.Fprintf(w, "wrote %s (its key: give it to %s only)\n", keyPath, name)
	fmt.Fprintf(w, "next: lockctl status %s  # any lockctl command takes these flags\n", flags)
	return nil
}

func dirFlag() cli.Flag {
	return &cli.StringFlag{Name: "dir", Value: ".", Usage: "`DIR` to write the files in (created if missing)"}
}

func daysFlag(def int) cli.Flag {
	return &cli.IntFlag{Name: "days", Value: def, Usage: "`N` days the certificate is valid"}
}

func forceFlag() cli.Flag {
	return &cli.BoolFlag{Name: "force", Usage: "overwrite files that exist already"}
}

func tlsDays(c *cli.Context) (time.Duration, error) {
	days := c.Int("days")
	if days < 1 || days > maxDays {
		return 0, cli.Exit(fmt.Sprintf("--days %d: must be between 1 and %d", days, maxDays), 2)
	}
	return time.Duration(days) * 24 * time.Hour, nil
}

func tlsNoArgs(c *cli.Context, sub string) error {
	if c.Args().Len() > 0 {
		return cli.Exit(fmt.Sprintf("unexpected argument %q: lockd tls %s takes flags only (see lockd tls %s --help)", c.Args().First(), sub, sub), 2)
	}
	return nil
}

// tlsUsageError words a flag error of lockd tls (or of one of its
// subcommands, sub) as lockd's own are worded: the flag as typed, the
// nearest known flag for a typo, what a value should look like, and the
// help that lists them.
func tlsUsageError(sub string) cli.OnUsageErrorFunc {
	help := strings.Join(strings.Fields("lockd tls "+sub+" --help"), " ")
	return func(c *cli.Context, err error, _ bool) error {
		return cli.Exit(flagUsage(err, c.Command.Flags)+"; see `"+help+"`", 2)
	}
}

// readCAFile reads the CA certificate or key, and on a missing file says
// how to make one or where to point.
func readCAFile(path, flag, dir string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		ca := "lockd tls ca"
		if filepath.Clean(dir) != "." {
			ca += " --dir " + shellQuote(dir)
		}
		return nil, cli.Exit(fmt.Sprintf("no CA at %s: run %s first, or point %s at an existing file", path, ca, flag), 1)
	}
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("reading %s: %v", path, err), 1)
	}
	return data, nil
}

// writePair writes a certificate (0644) and its key (0600) in dir. Both
// names are checked before either is written, so a refusal leaves no half
// pair behind.
func writePair(dir, certName, keyName string, certPEM, keyPEM []byte, force bool) (certPath, keyPath string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", cli.Exit(fmt.Sprintf("creating %s: %v", dir, err), 1)
	}
	certPath, keyPath = filepath.Join(dir, certName), filepath.Join(dir, keyName)
	if !force {
		for _, p := range []string{certPath, keyPath} {
			if _, err := os.Lstat(p); err == nil {
				return "", "", existsError(p)
			}
		}
	}
	if err := writeFile(keyPath, keyPEM, 0o600, force); err != nil {
		return "", "", err
	}
	if err := writeFile(certPath, certPEM, 0o644, force); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

func existsError(path string) error {
	return cli.Exit(fmt.Sprintf("%s exists already: remove it, pick another --dir, or pass --force to overwrite it", path), 1)
}

// writeFile creates path with perm, whatever the umask. Without force it
// never replaces a file (O_EXCL); with force it writes a temporary file
// and renames it over, so a reader never sees half a key, and a key that
// was world-readable is not rewritten in place.
func writeFile(path string, data []byte, perm os.FileMode, force bool) error {
	var f *os.File
	var err error
	if force {
		f, err = os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	} else {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	}
	if errors.Is(err, fs.ErrExist) {
		return existsError(path)
	}
	if err != nil {
		return cli.Exit(fmt.Sprintf("writing %s: %v", path, err), 1)
	}
	name := f.Name()
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && force {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return cli.Exit(fmt.Sprintf("writing %s: %v", path, err), 1)
	}
	return nil
}

// fileSafe keeps a name usable as a file name on any system.
func fileSafe(name string) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, name)
}

// shellQuote quotes a path for the commands printed as the next step, so
// they can be pasted as they are.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:=@+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
