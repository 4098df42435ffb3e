package durflag

import (
	"flag"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30": 30 * time.Second, "0.5": 500 * time.Millisecond, "2.25": 2250 * time.Millisecond, "0": 0,
		"30s": 30 * time.Second, "2m": 2 * time.Minute, "1h30m": 90 * time.Minute, "500ms": 500 * time.Millisecond,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "banana", "30x", "NaN", "Inf", "1e300", "--5"} {
		if got, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %s, want an error", in, got)
		}
	}
}

// A bare number on the command line, or in the environment twin, is
// seconds; what the flag reads back through cli.Context.Duration is the
// same, and a flag not given keeps its default.
func TestFlag(t *testing.T) {
	var lease, wait time.Duration
	t.Setenv("TEST_SECONDS_WAIT", "2.5")
	var got time.Duration
	app := &cli.App{
		Flags: []cli.Flag{
			New(cli.DurationFlag{Name: "lease", Aliases: []string{"l"}, Destination: &lease, Value: time.Minute}),
			New(cli.DurationFlag{Name: "wait", Destination: &wait, EnvVars: []string{"TEST_SECONDS_WAIT"}}),
			New(cli.DurationFlag{Name: "grace", Value: 10 * time.Second}),
		},
		Action: func(c *cli.Context) error {
			got = c.Duration("grace")
			if !c.IsSet("wait") || c.IsSet("grace") {
				t.Errorf("IsSet: wait %v, grace %v", c.IsSet("wait"), c.IsSet("grace"))
			}
			return nil
		},
	}
	if err := app.Run([]string{"app", "--lease", "30"}); err != nil {
		t.Fatal(err)
	}
	if lease != 30*time.Second || wait != 2500*time.Millisecond || got != 10*time.Second {
		t.Errorf("lease %s, wait %s, grace %s", lease, wait, got)
	}
	if err := app.Run([]string{"app", "-l", "1m30s"}); err != nil || lease != 90*time.Second {
		t.Errorf("-l 1m30s: %s, %v", lease, err)
	}
	set := flag.NewFlagSet("x", flag.ContinueOnError)
	set.SetOutput(new(nopWriter))
	f := New(cli.DurationFlag{Name: "lease"})
	if err := f.Apply(set); err != nil {
		t.Fatal(err)
	}
	if err := set.Parse([]string{"--lease", "banana"}); err == nil {
		t.Errorf("--lease banana accepted")
	}
}

type nopWriter struct{}

func (*nopWriter) Write(p []byte) (int, error) { return len(p), nil }
