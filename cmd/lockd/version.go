package main

import (
	"fmt"
	"io"

	"github.com/lockd-io/lockd/cmd/internal/buildinfo"
	"github.com/urfave/cli/v2"
)

// versionCommand prints what lockd this is, as lockctl version does: for
// bug reports, and for scripts that check what runs.
func versionCommand() *cli.Command {
	return &cli.Command{
		Name:        "version",
		Usage:       "print lockd's version (also: lockd --version)",
		UsageText:   "lockd version",
		Description: "Prints the version lockd was built as, with the Go version and platform.",
		Action: func(c *cli.Context) error {
			if c.Args().Len() > 0 {
				return cli.Exit(fmt.Sprintf("unexpected argument %q: lockd version takes none; see `lockd version --help`", c.Args().First()), 2)
			}
			return printVersion(c.App.Writer)
		},
	}
}

func printVersion(w io.Writer) error {
	_, err := fmt.Fprintln(w, versionLine())
	return err
}

func buildVersion() string { return buildinfo.Version(version) }

// versionLine is what lockd version and lockd --version print.
func versionLine() string { return buildinfo.Line("lockd", version) }
