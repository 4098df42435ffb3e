// Package conformance is the conformance suite of lockd's official
// clients: one named case per rule of the client behaviour that
// clients/README.md writes down
// (and per behaviour a client adds that a user relies on), run the same
// way against every client through its driver (DRIVER.md).
//
// The package holds no code a program imports: the harness and the cases
// are its tests. `go test ./clients/conformance` builds cmd/lockd and the
// Go driver (godriver) into a temporary directory, starts real nodes,
// clusters and scripted nodes as each case needs them, and runs every
// case on every client whose driver is present. See clients/README.md
// for the table of cases and how to add a client.
package conformance
