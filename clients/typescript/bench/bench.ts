// Pipelined throughput of the TypeScript client: WORKERS async workers
// share one Client and repeat acquire+release of a key of their own for
// DURATION_MS, as `lockctl bench --mode pipelined --keys unique` does for
// the Go client.
//
//   node dist/bench/bench.js [--json] [ADDR] [WORKERS] [DURATION_MS]
//
// --json prints the result as one JSON object (cycles_per_second,
// p50_ms, p99_ms, errors, ...), as lockctl --json bench and the Python
// client's bench.py --json do; scripts/bench-clients.sh reads it.

import { Client } from "../src/index.js";

const json = process.argv.includes("--json");
const args = process.argv.slice(2).filter((a) => a !== "--json");
const addr = args[0] ?? process.env.LOCKD_ADDR ?? "127.0.0.1:7070";
const workers = Number(args[1] ?? 200);
const duration = Number(args[2] ?? 10_000);

const client = new Client(addr);
const lat: number[] = [];
let errors = 0;
let firstError = "";
// One cycle first, so that the connections are up before the clock starts.
const warm = await client.acquire(`bench-ts-${process.pid}-warm`, { lease: 5000 });
await client.release(warm);

const end = performance.now() + duration;
const start = performance.now();
await Promise.all(
  Array.from({ length: workers }, async (_, i) => {
    const key = `bench-ts-${process.pid}-${i}`;
    while (performance.now() < end) {
      const t0 = performance.now();
      try {
        const l = await client.acquire(key, { lease: 5000 });
        await client.release(l);
        lat.push(performance.now() - t0);
      } catch (e) {
        errors++;
        firstError ||= (e as Error).message;
      }
    }
  }),
);
const secs = (performance.now() - start) / 1000;
await client.close();
lat.sort((a, b) => a - b);
const at = (p: number) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] : 0);
const q = (p: number) => (lat.length ? at(p).toFixed(2) : "-");
if (json) {
  const round3 = (x: number) => Math.round(x * 1000) / 1000;
  console.log(
    JSON.stringify({
      client: "typescript",
      node: process.versions.node,
      mode: "pipelined",
      workers,
      duration_seconds: round3(secs),
      cycles: lat.length,
      errors,
      first_error: firstError || undefined,
      cycles_per_second: Math.round((lat.length / secs) * 10) / 10,
      p50_ms: round3(at(0.5)),
      p99_ms: round3(at(0.99)),
      p999_ms: round3(at(0.999)),
    }),
  );
} else {
  console.log(
    `typescript pipelined: ${workers} workers, unique keys, ${secs.toFixed(1)} s: ${Math.round(lat.length / secs)} cycles/s, ${errors} errors; latency p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, p99.9 ${q(0.999)} ms`,
  );
  if (firstError) console.log(`first error: ${firstError}`);
}
