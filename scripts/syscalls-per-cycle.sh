#!/usr/bin/env bash
# syscalls-per-cycle.sh [BASE]: how many system calls lockd's server makes
# per lock cycle (acquire + release), for lockd built from BASE and from
# the working tree, on loadgen's three rows (per connection, pipelined,
# hot key), in one interleaved run. perf counts every syscalls:sys_enter_*
# tracepoint of the server's process while loadgen makes an exact number
# of cycles (--cycles), so the figure is that count over those cycles:
# no warm-up or drain outside the count. "all" is every system call;
# "read+write" the socket I/O alone, which the server's code decides,
# while futex and epoll_pwait follow how the Go runtime parks.
#
# Needs perf with tracepoint access (root, or kernel.perf_event_paranoid
# <= 1) and loadgen (LOADGEN, default ../shared/loadgen, as bench-compare).
# Environment: BASE (default HEAD~1), REPS [3], CYCLES [500] per worker
# (the hot row makes a fifth of them).
set -euo pipefail

root=$(git rev-parse --show-toplevel)
cd "$root"
base=${1:-${BASE:-HEAD~1}}
rev=$(git rev-parse --verify --quiet "$base^{commit}") || {
	echo "syscalls-per-cycle: $base is no commit of this repository (pass BASE=REV)" >&2
	exit 2
}
loadgen=${LOADGEN:-$root/../shared/loadgen}
[ -d "$loadgen" ] || { echo "syscalls-per-cycle: no loadgen in $loadgen: pass LOADGEN=DIR" >&2; exit 2; }
command -v perf >/dev/null || { echo "syscalls-per-cycle: perf not found (apt-get install linux-tools-generic)" >&2; exit 2; }
reps=${REPS:-3}
cycles=${CYCLES:-500}

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
mkdir "$tmp/src-old"
git archive "$rev" | tar -x -C "$tmp/src-old"
(cd "$tmp/src-old" && go build -o "$tmp/old/" ./cmd/lockd)
go build -o "$tmp/new/" ./cmd/lockd
(cd "$loadgen" && go build -o "$tmp/loadgen" .)

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
declare -A addr pid
for s in new old; do
	addr[$s]=127.0.0.1:$(port)
	"$tmp/$s/lockd" --listen "${addr[$s]}" --log-level warn >/dev/null 2>&1 &
	pid[$s]=$!
	pids+=($!)
done
for s in new old; do
	for _ in $(seq 50); do python3 -c "import socket; socket.create_connection(('${addr[$s]%:*}', ${addr[$s]##*:}), 0.2)" 2>/dev/null && break; sleep 0.1; done
done

echo "syscalls-per-cycle: old = $base (${rev:0:12}), new = the working tree" >&2
printf '%-7s %-6s %-4s %12s %12s\n' workload conns build "all/cyc" "read+write"
for row in "unique 0" "unique 2" "hot 0"; do
	set -- $row
	n=$cycles
	[ "$1" = hot ] && n=$((cycles / 5))
	for r in $(seq "$reps"); do
		for s in new old; do
			perf stat -x, -e 'syscalls:sys_enter_*' -p "${pid[$s]}" -o "$tmp/perf" &
			perfpid=$!
			sleep 0.3 # perf attached
			"$tmp/loadgen" --proto lockd --addr "${addr[$s]}" --workload "$1" --workers 200 --conns "$2" \
				--cycles "$n" --json 2>/dev/null | tail -1 >"$tmp/lg"
			kill -INT "$perfpid"
			wait "$perfpid" || true
			python3 - "$tmp/perf" "$tmp/lg" >>"$tmp/$1-$2-$s" <<'PY'
import json, sys
calls = io = 0
for line in open(sys.argv[1]):
    f = line.split(",")
    if len(f) > 2 and "syscalls:sys_enter_" in f[2] and f[0].strip().isdigit():
        calls += int(f[0])
        if f[2].strip().endswith(("sys_enter_read", "sys_enter_write")):
            io += int(f[0])
cycles = json.loads(open(sys.argv[2]).read()).get("cycles", 0)
print(calls / cycles if cycles else 0, io / cycles if cycles else 0)
PY
		done
	done
	for s in new old; do
		python3 -c "import statistics,sys; v=[l.split() for l in open(sys.argv[1])]; print(f'{sys.argv[2]:7} {sys.argv[3]:6} {sys.argv[4]:4} {statistics.median(float(a) for a,_ in v):12.3f} {statistics.median(float(b) for _,b in v):12.3f}')" "$tmp/$1-$2-$s" "$1" "$2" "$s"
	done
done
