package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

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

// buildVersion is version, or the module version of a `go install`
// build.
func buildVersion() string {
	if version != "dev" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return version
}

// versionLine is what lockd version and lockd --version print.
func versionLine() string {
	return fmt.Sprintf("lockd %s (%s, %s/%s)", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
