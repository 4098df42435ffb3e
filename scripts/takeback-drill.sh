#!/bin/bash
# takeback-drill.sh LOCKD LOCKCTL: the take-back drill of docs/cluster.md.
# Three nodes on 127.0.0.1; node 1 is killed with kill -9 and the failover
# settles; then `lockctl drill --action none --duration 16s` runs while
# node 1 is restarted six seconds in and takes its role back. Prints the
# drill's cycles, errors, lost answers and its longest gap without a grant.
LD=$1; LC=$2; B=$((20000 + RANDOM % 20000)); A=127.0.0.1:$B; Bn=127.0.0.1:$((B+1)); C=127.0.0.1:$((B+2))
P=$A,$Bn,$C; d=$(mktemp -d)
$LD --listen $A --peers $P > $d/a.log 2>&1 & pa=$!
$LD --listen $Bn --peers $P > $d/b.log 2>&1 & pb=$!
$LD --listen $C --peers $P > $d/c.log 2>&1 & pc=$!
sleep 2; kill -9 $pa; sleep 5
( sleep 6; $LD --listen $A --peers $P > $d/a2.log 2>&1 & echo $! > $d/pa2 ) &
LOCKD_ADDR=$P $LC drill --action none --duration 16s --json > $d/drill.json 2>$d/drill.err
sleep 1; kill $(cat $d/pa2) $pb $pc 2>/dev/null; wait 2>/dev/null
python3 -c "
import json,sys; j=json.load(open('$d/drill.json'))
print({k:j.get(k) for k in ['cycles','errors','lost','in_doubt','gap_ms','takeover_ms','active_before','active_after','fencing']})" || cat $d/drill.err
