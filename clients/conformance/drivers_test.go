package conformance

import (
	"os"
	"path/filepath"
	"strings"
)

// A client takes part in the suite through a driver: a command line the
// harness starts once per case. Adding a client is one entry here.
type driverSpec struct {
	name string
	// argv is the driver's command line; a relative program path is
	// taken from the repository's root, and "{go}" is the Go driver the
	// harness built.
	argv []string
	// needs is a file, relative to the repository's root, whose absence
	// means the driver is not built yet (a skip, unless required).
	needs string
	// env is added to the driver's environment.
	env []string
}

// knownDrivers are the official clients, in the order of the table.
// LOCKD_CONFORMANCE_<NAME>_CMD (e.g. LOCKD_CONFORMANCE_PYTHON_CMD=
// "/usr/bin/python3 clients/python/conformance_driver.py"; a - in the
// name is a _) replaces a driver's command line, words separated by
// spaces. python-asyncio is the Python client's lockd.AsyncClient, a
// client of its own on the wire.
func knownDrivers() []driverSpec {
	specs := []driverSpec{
		{name: "go", argv: []string{"{go}"}},
		{name: "python", argv: []string{"python3", "clients/python/conformance_driver.py"}, needs: "clients/python/conformance_driver.py"},
		{name: "python-asyncio", argv: []string{"python3", "clients/python/conformance_driver_async.py"}, needs: "clients/python/conformance_driver_async.py"},
		{name: "typescript", argv: []string{"node", "clients/typescript/dist/conformance/driver.js"}, needs: "clients/typescript/dist/conformance/driver.js"},
	}
	for i, s := range specs {
		if v := strings.Fields(os.Getenv(cmdEnv(s.name))); len(v) > 0 {
			specs[i].argv = v
		}
	}
	return specs
}

// cmdEnv is the variable that replaces the command line of the driver
// named name: LOCKD_CONFORMANCE_PYTHON_ASYNCIO_CMD for python-asyncio.
func cmdEnv(name string) string {
	return "LOCKD_CONFORMANCE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_CMD"
}

// requiredClients reads LOCKD_CONFORMANCE_CLIENTS (go,python,...): the
// clients that must run; a missing driver among them fails the suite
// instead of being skipped. Unset, every present driver runs.
func requiredClients() map[string]bool {
	v := strings.TrimSpace(os.Getenv("LOCKD_CONFORMANCE_CLIENTS"))
	if v == "" {
		return nil
	}
	req := map[string]bool{}
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			req[n] = true
		}
	}
	return req
}

// present reports whether d's driver exists in the checkout at root.
func (d driverSpec) present(root string) bool {
	if d.needs == "" {
		return true
	}
	_, err := os.Stat(filepath.Join(root, d.needs))
	return err == nil
}
