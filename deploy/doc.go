// Package deploy holds what an operator installs beside the binaries,
// as files: Prometheus alert rules and their unit tests (prometheus/), a
// Grafana dashboard (grafana/) and a systemd unit (systemd/); make dist
// puts them in the release archives. It has no Go code: its tests prove
// the files on the real programs, a Prometheus scraping a real cluster
// and the release archives unpacked and run.
package deploy
