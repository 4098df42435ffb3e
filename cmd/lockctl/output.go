package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// printJSON writes v as one line of JSON: scripts read lockctl's output
// line by line (jq, read), and one object per line keeps hold's output
// readable while it still runs.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// reportError writes err to w as the one line a person reads, and returns
// the exit code it stands for. Errors that did not come from lockctl's own
// code (urfave/cli's, or a bug) still get the "lockctl: " prefix and a hint,
// never a raw chain or a stack.
func reportError(w io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	var e *exitError
	if !errors.As(err, &e) {
		e = &exitError{code: exitCode(err), what: err.Error(), try: "see `lockctl --help`"}
	}
	if msg := e.Error(); msg != "" {
		fmt.Fprintln(w, "lockctl: "+oneLine(msg))
	}
	return e.code
}

// warn writes a message that does not change the exit code, in the same
// shape as an error.
func warn(w io.Writer, what, try string) {
	msg := "lockctl: warning: " + what
	if try != "" {
		msg += "; " + try
	}
	fmt.Fprintln(w, oneLine(msg))
}

// oneLine keeps a message on one line whatever its parts carried.
func oneLine(s string) string {
	return strings.TrimSpace(lineBreaks.Replace(s))
}

var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")

// seconds is a duration as JSON wants it: a number of seconds.
func seconds(d time.Duration) float64 { return d.Seconds() }
