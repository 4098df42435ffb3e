package main

import (
	"fmt"
	"runtime"

	"github.com/lockd-io/lockd/cmd/internal/buildinfo"
	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=...", as
// the Makefile does; a `go install` build reads its module version.
var version = "dev"

// versionCommand prints what lockctl this is, for bug reports and for
// scripts that check it.
type versionCommand struct{}

func (c *versionCommand) Command() *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "print lockctl's version (also: lockctl --version)",
		UsageText: "lockctl version",
		Description: "Prints the version lockctl was built as, with the Go version and platform.\n" +
			"With --json: {\"version\":...,\"go\":...,\"platform\":...}.\n\n" +
			exitCodesHelp(helpExitOK, helpExitUsage),
		Action: c.Run,
	}
}

func (c *versionCommand) Run(cCtx *cli.Context) error {
	if err := noArgs(cCtx); err != nil {
		return err
	}
	json := lookupGlobal(cCtx, flagJSON, false, (*cli.Context).Bool) || lookupGlobal(cCtx, flagOutput, "", (*cli.Context).String) == outputJSON
	v := buildVersion()
	if json {
		return printJSON(cCtx.App.Writer, struct {
			Version  string `json:"version"`
			Go       string `json:"go"`
			Platform string `json:"platform"`
		}{v, runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH})
	}
	_, err := fmt.Fprintln(cCtx.App.Writer, versionLine())
	return err
}

func buildVersion() string { return buildinfo.Version(version) }

// versionLine is what lockctl version and lockctl --version print.
func versionLine() string { return buildinfo.Line("lockctl", version) }
