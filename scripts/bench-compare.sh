#!/usr/bin/env bash
# bench-compare.sh [BASE]: lockd built from BASE against lockd built from
# the working tree, side by side in one interleaved run, with Redis when
# redis-server is installed. `make bench-compare` runs it.
#
# BASE is any git revision; by default the previous commit (HEAD~1) when
# the working tree is clean, HEAD when it has uncommitted changes: what
# the last commit, or the edits not committed yet, changed.
#
# The rows and the table come from loadgen's side-by-side.sh, which lives
# outside this repository: LOADGEN names its directory (default
# ../shared/loadgen from the repository root, where the team's workplace
# keeps it). The table gives each server's cycles/s and its CPU per cycle
# (user+system from /proc, the steadier figure on a shared machine);
# below it come the ratios new/old and new/Redis per row, and the
# fairness of the hot-key row (fewest / most cycles of any worker: FIFO
# keeps it near 1).
#
# Environment: LOADGEN, BASE, and side-by-side.sh's REPS [3], DURATION [3s].
set -euo pipefail

root=$(git rev-parse --show-toplevel)
cd "$root"
base=${1:-${BASE:-}}
if [ -z "$base" ]; then
	if git diff --quiet HEAD -- && git diff --cached --quiet; then base=HEAD~1; else base=HEAD; fi
fi
rev=$(git rev-parse --verify --quiet "$base^{commit}") || {
	echo "bench-compare: $base is no commit of this repository (pass BASE=REV)" >&2
	exit 2
}

loadgen=${LOADGEN:-$root/../shared/loadgen}
if [ ! -x "$loadgen/side-by-side.sh" ]; then
	echo "bench-compare: no side-by-side.sh in $loadgen: pass LOADGEN=DIR, the loadgen directory that holds side-by-side.sh (make bench-compare LOADGEN=DIR)" >&2
	exit 2
fi
loadgen=$(cd "$loadgen" && pwd)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "bench-compare: old = $base (${rev:0:12}), new = the working tree" >&2
mkdir "$tmp/src-old"
git archive "$rev" | tar -x -C "$tmp/src-old"
(cd "$tmp/src-old" && go build -o "$tmp/old/" ./cmd/lockd ./cmd/lockctl)
go build -o "$tmp/new/" ./cmd/lockd ./cmd/lockctl
(cd "$loadgen" && go build -o "$tmp/loadgen" .)

"$loadgen/side-by-side.sh" "$tmp/new/lockd" "$tmp/old/lockd" | tee "$tmp/table"

python3 - "$tmp/table" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 5 and f[0] != "workload":
        rows.setdefault((f[0], f[1]), {})[f[2]] = (float(f[3]), float(f[4]))
print()
print("%-7s %-6s %14s %14s %14s" % ("workload", "conns", "rate new/old", "cpu new/old", "cpu new/redis"))
for (wl, conns), s in rows.items():
    def ratio(a, b, i):
        if a not in s or b not in s or s[b][i] == 0:
            return "-"
        return "%.2f" % (s[a][i] / s[b][i])
    print("%-8s %-6s %14s %14s %14s" % (wl, conns, ratio("new", "old", 0), ratio("new", "old", 1), ratio("new", "redis", 1)))
PY

# Fairness of the hot key: one more short run per build.
echo
echo "hot key fairness (fewest / most cycles of any of 200 workers):"
for b in new old; do
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	"$tmp/$b/lockd" --listen "127.0.0.1:$port" >/dev/null 2>&1 &
	pid=$!
	sleep 0.5
	"$tmp/loadgen" --proto lockd --addr "127.0.0.1:$port" --workload hot --workers 200 \
		--duration "${DURATION:-3s}" --json 2>/dev/null | tail -1 |
		python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("  %-4s %d / %d = %.3f, errors %d" % (sys.argv[1], d["worker_cycles_min"], d["worker_cycles_max"], d["worker_cycles_min"]/max(1,d["worker_cycles_max"]), d["errors"]))' "$b" || true
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
done
