// Pipelined throughput of the TypeScript client: WORKERS async workers
// share one Client and repeat acquire+release of a key of their own for
// DURATION_MS, as `lockctl bench --mode pipelined --keys unique` does for
// the Go client.
//
//   node dist/bench/bench.js [ADDR] [WORKERS] [DURATION_MS]

import { Client } from "../src/index.js";

const addr = process.argv[2] ?? process.env.LOCKD_ADDR ?? "127.0.0.1:7070";
const workers = Number(process.argv[3] ?? 200);
const duration = Number(process.argv[4] ?? 10_000);

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
const q = (p: number) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))].toFixed(2) : "-");
console.log(
  `typescript pipelined: ${workers} workers, unique keys, ${secs.toFixed(1)} s: ${Math.round(lat.length / secs)} cycles/s, ${errors} errors; latency p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, p99.9 ${q(0.999)} ms`,
);
if (firstError) console.log(`first error: ${firstError}`);
