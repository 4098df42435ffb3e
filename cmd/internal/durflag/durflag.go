// Package durflag is the duration flag lockd and lockctl take: a Go
// duration (500ms, 30s, 2m, 1h30m) or a bare number of seconds (30, 0.5),
// the way flock's -w and the wire protocol write durations, so that
// `--lease 30` means what `-w 30` means.
package durflag

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"
)

// ErrSyntax is the words of a value that is neither.
var ErrSyntax = errors.New("want a duration like 500ms, 30s or 2m, or seconds like 10 or 0.5")

// maxSeconds is the most a bare number may say: past it, the duration
// in nanoseconds no longer fits an int64.
const maxSeconds = math.MaxInt64 / float64(time.Second)

// Parse reads s as a Go duration, or else as decimal seconds.
func Parse(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) >= maxSeconds {
		return 0, ErrSyntax
	}
	return time.Duration(math.Round(f * float64(time.Second))), nil
}

// Flag is a cli.DurationFlag whose value, on the command line or from
// its environment variable, may also be a bare number of seconds. Read
// it as a DurationFlag: its Destination, or cli.Context.Duration.
type Flag struct{ cli.DurationFlag }

// New is f as a Flag.
func New(f cli.DurationFlag) *Flag { return &Flag{f} }

// Apply registers the flag under each of its names, its value taken
// from its environment variable when that is set, else its Value.
func (f *Flag) Apply(set *flag.FlagSet) error {
	v := f.Value
	for _, name := range f.EnvVars {
		val, ok := os.LookupEnv(name)
		if !ok {
			continue
		}
		if val != "" {
			d, err := Parse(val)
			if err != nil {
				return fmt.Errorf("could not parse %q as duration value from environment variable %q for flag %s: %v", val, name, f.Name, err)
			}
			v = d
			f.HasBeenSet = true
		}
		break
	}
	dst := f.Destination
	if dst == nil {
		dst = new(time.Duration)
	}
	*dst = v
	for _, name := range f.Names() {
		set.Var((*value)(dst), name, f.Usage)
	}
	return nil
}

// value is the flag.Value of a Flag. Its String is a Go duration, which
// cli.Context.Duration parses back.
type value time.Duration

func (v *value) Set(s string) error {
	d, err := Parse(s)
	if err != nil {
		return err
	}
	*v = value(d)
	return nil
}

func (v *value) String() string {
	if v == nil {
		return "0s"
	}
	return time.Duration(*v).String()
}
