package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// printJSON writes v as one line of JSON: scripts read lockctl's output
// line by line (jq, read), and one object per line keeps hold's output
// readable while it still runs. Strings keep their exact value, but a rune
// that could act on a terminal (a bidi control, a C1 control) is written
// as a \u escape, for the person who reads the JSON there.
func printJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(jsonPrintable(b.Bytes()))
	return err
}

// reportError writes err to w as the one line a person reads, and returns
// the exit code it stands for. Errors that did not come from lockctl's own
// code (urfave/cli's, or a bug) still get the "lockctl: " prefix and a hint,
// never a raw chain or a stack. The line may carry words of a server or of
// another user (a client error, a refusal's reason): printableText escapes
// whatever of them could act on the terminal, and leaves alone the values
// the message holds already escaped.
func reportError(w io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	var e *exitError
	if !errors.As(err, &e) {
		e = &exitError{code: exitCode(err), what: err.Error(), try: "see `lockctl --help`"}
	}
	if msg := e.Error(); msg != "" {
		fmt.Fprintln(w, wrapMessage(w, "lockctl: "+printableText(oneLine(msg))))
	}
	return e.code
}

// wrapMessage wraps an error or a warning at spaces to the width of w
// when it is a terminal, its lines after the first indented, so that the
// terminal does not break a word; in a pipe or a log it stays one line.
func wrapMessage(w io.Writer, line string) string {
	return wrapText(line, 0, lineWidth(w), "  ")
}

// errorJSON is what a failed command prints on stdout with --json (or
// -o json), besides its line on stderr: scripts that read stdout as JSON
// get an object for a failure too. It is part of lockctl's contract.
type errorJSON struct {
	Error struct {
		ExitCode int    `json:"exit_code"`
		Message  string `json:"message"`
		Hint     string `json:"hint"`
	} `json:"error"`
}

// reportJSONError writes err as an errorJSON object; nothing for a
// success, an exit that says nothing (exec passing on its command's
// code), or a command that printed its own JSON answer.
func reportJSONError(w io.Writer, err error) {
	if err == nil {
		return
	}
	var e *exitError
	if !errors.As(err, &e) {
		e = &exitError{code: exitCode(err), what: err.Error(), try: "see `lockctl --help`"}
	}
	if e.what == "" || e.answered {
		return
	}
	var out errorJSON
	out.Error.ExitCode, out.Error.Message, out.Error.Hint = e.code, oneLine(e.what), oneLine(e.try)
	printJSON(w, out)
}

// warn writes a message that does not change the exit code, in the same
// shape and made safe the same way as an error.
func warn(w io.Writer, what, try string) {
	msg := "lockctl: warning: " + what
	if try != "" {
		msg += "; " + try
	}
	fmt.Fprintln(w, wrapMessage(w, printableText(oneLine(msg))))
}

// oneLine keeps a message on one line whatever its parts carried.
func oneLine(s string) string {
	return strings.TrimSpace(lineBreaks.Replace(s))
}

var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")
