// Package flagname writes a flag's name the way a user types it, so
// that lockd's and lockctl's errors and lockctl's completions name flags
// alike.
package flagname

// Dashed is name as it is typed: -k for a one-letter flag, --key for the
// others.
func Dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}
