#!/usr/bin/env bash
# bench-clients.sh: pipelined throughput of the three official clients in
# one run, against one lockd on this machine. `make bench-clients` runs it.
#
# Each client in turn, Go, Python (threads, then asyncio), TypeScript,
# runs WORKERS concurrent workers (goroutines, threads, tasks, async
# functions) sharing one client, each repeating acquire then release of a
# key of its own for DURATION:
#
#   Go              lockctl bench --mode pipelined --keys unique
#   Python          clients/python/bench.py (lockd.Client, WORKERS threads)
#   Python asyncio  clients/python/bench.py --asyncio (lockd.AsyncClient,
#                   WORKERS tasks on one event loop, one process)
#   TypeScript      clients/typescript/dist/bench/bench.js
#
# against one lockd with default flags started on a free loopback port for
# the run (and killed after it), one after another, so that they share the
# node and the machine but not the same seconds. It prints a Markdown
# table of cycles per second and latency, with the machine's load; only
# rows of one run compare.
#
# It builds lockd and lockctl into bin/ (as make build) and the TypeScript
# client (npm ci when its node_modules is missing, then npm run build).
#
# Environment: DURATION [10s] (Go syntax: 10s, 1500ms, 1m; or seconds),
# WORKERS [200], PYTHON [python3], BIN [bin], GO [go].
set -euo pipefail

root=$(git rev-parse --show-toplevel)
cd "$root"
duration=${DURATION:-10s}
workers=${WORKERS:-200}
python=${PYTHON:-python3}
bin=${BIN:-bin}
go=${GO:-go}

# DURATION in seconds and milliseconds, for bench.py and bench.js.
secs=$(awk -v d="$duration" 'BEGIN {
	if (d ~ /^[0-9.]+ms$/) { sub(/ms$/, "", d); print d / 1000 }
	else if (d ~ /^[0-9.]+s$/) { sub(/s$/, "", d); print d + 0 }
	else if (d ~ /^[0-9.]+m$/) { sub(/m$/, "", d); print d * 60 }
	else if (d ~ /^[0-9.]+$/) { print d + 0 }
	else { print "bad" } }')
if [ "$secs" = bad ] || [ "$(awk -v s="$secs" 'BEGIN { print (s > 0) }')" != 1 ]; then
	echo "bench-clients: DURATION=$duration is no duration: write it as 10s, 1500ms, 1m or a number of seconds" >&2
	exit 2
fi
ms=$(awk -v s="$secs" 'BEGIN { printf "%d", s * 1000 }')
case $workers in '' | *[!0-9]* | 0)
	echo "bench-clients: WORKERS=$workers is not a positive number" >&2
	exit 2
	;;
esac

echo "bench-clients: building lockd, lockctl and the TypeScript client" >&2
"$go" build -tags "urfave_cli_no_docs,netgo,osusergo" -o "$bin/" ./cmd/lockd ./cmd/lockctl
(
	cd clients/typescript
	[ -x node_modules/.bin/tsc ] || npm ci --no-audit --no-fund >&2
	npm run --silent build >&2
)

tmp=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
addr=127.0.0.1:$port
"./$bin/lockd" --listen "$addr" --log-level warn 2>"$tmp/lockd.log" &
pid=$!
up=
for _ in $(seq 100); do
	if "./$bin/lockctl" --addr "$addr" status >/dev/null 2>&1; then up=1; break; fi
	sleep 0.1
done
if [ -z "$up" ]; then
	echo "bench-clients: lockd did not come up on $addr:" >&2
	cat "$tmp/lockd.log" >&2
	exit 1
fi

load() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?"; }
load_before=$(load)
echo "bench-clients: lockd on $addr; $workers workers per client, $duration each" >&2

echo "bench-clients: Go" >&2
"./$bin/lockctl" --addr "$addr" --json bench --mode pipelined --keys unique --workers "$workers" --duration "$duration" >"$tmp/go.json"
echo "bench-clients: Python" >&2
"$python" clients/python/bench.py --addr "$addr" --workers "$workers" --duration "$secs" --json >"$tmp/python.json"
echo "bench-clients: Python asyncio" >&2
"$python" clients/python/bench.py --asyncio --addr "$addr" --workers "$workers" --duration "$secs" --json >"$tmp/python-asyncio.json"
echo "bench-clients: TypeScript" >&2
node clients/typescript/dist/bench/bench.js --json "$addr" "$workers" "$ms" >"$tmp/typescript.json"
load_after=$(load)

"$python" - "$tmp" "$workers" "$duration" "$load_before" "$load_after" \
	"$(git describe --tags --always --dirty 2>/dev/null || echo unknown)" \
	"$("$python" -c 'import platform; print(platform.python_version())')" \
	"$(node --version)" "$("$go" env GOVERSION)" "$(nproc 2>/dev/null || echo '?')" <<'PY'
import json, os, sys

tmp, workers, duration, before, after, rev, py, node, gov, cores = sys.argv[1:]
rows = []
g = json.load(open(os.path.join(tmp, "go.json")))
lat = g.get("latency_seconds", {})
rows.append((f"Go ({gov}, `lockctl bench`)", g["cycles_per_second"], lat.get("p50", 0) * 1000, lat.get("p99", 0) * 1000, g.get("errors", 0) + g.get("timeouts", 0)))
p = json.load(open(os.path.join(tmp, "python.json")))
rows.append((f"Python {py}, {workers} threads, one `lockd.Client` (`bench.py`)", p["cycles_per_second"], p["p50_ms"], p["p99_ms"], p["errors"]))
pa = json.load(open(os.path.join(tmp, "python-asyncio.json")))
rows.append((f"Python {py}, {workers} tasks, one `lockd.AsyncClient` (`bench.py --asyncio`)", pa["cycles_per_second"], pa["p50_ms"], pa["p99_ms"], pa["errors"]))
t = json.load(open(os.path.join(tmp, "typescript.json")))
rows.append((f"TypeScript, Node.js {node} (`bench.js`)", t["cycles_per_second"], t["p50_ms"], t["p99_ms"], t["errors"]))

def num(x):
    return f"{round(x):,}".replace(",", " ")

print(f"{workers} workers sharing one client per language, unique keys, acquire+release, {duration} each,")
print(f"one after another against one lockd (default flags) on this machine ({cores} cores),")
print(f"lockd {rev}, load average {before} before, {after} after:")
print()
print("| client | cycles/s | p50 | p99 | errors |")
print("|---|---|---|---|---|")
for name, cps, p50, p99, err in rows:
    print(f"| {name} | {num(cps)} | {p50:.2f} ms | {p99:.2f} ms | {err} |")
print()
print(f"Python asyncio / threads: {pa['cycles_per_second'] / p['cycles_per_second']:.2f}x")
PY
