// Package buildinfo says which build of lockd or lockctl is running, for
// their version commands: the version the Makefile stamped in, or the
// module version of a `go install` build, with the Go version and
// platform.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is stamped, the version set at build time (-ldflags "-X
// main.version=..."), unless it is "dev": then the module version of a
// `go install` build, if there is one.
func Version(stamped string) string {
	if stamped != "dev" {
		return stamped
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return stamped
}

// Line is what `PROGRAM version` and `PROGRAM --version` print:
// "lockd v1.2.3 (go1.26.0, linux/amd64)".
func Line(program, stamped string) string {
	return fmt.Sprintf("%s %s (%s, %s/%s)", program, Version(stamped), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
