#!/usr/bin/env python3
"""Pipelined throughput of the Python client, as lockctl bench --mode
pipelined measures the Go client's: WORKERS threads share one Client,
each repeating acquire then release of a key of its own for DURATION;
with --asyncio, WORKERS tasks on one event loop share one AsyncClient.

    python3 clients/python/bench.py --addr 127.0.0.1:7070 --workers 200 --duration 10
    python3 clients/python/bench.py --asyncio --addr 127.0.0.1:7070 --workers 200 --duration 10
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import argparse
import asyncio
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lockd  # noqa: E402


def threads(args: argparse.Namespace, run: str) -> Tuple[List[int], List[int], List[List[float]], float]:
    client = lockd.Client(args.addr)
    stop = threading.Event()
    counts = [0] * args.workers
    errors = [0] * args.workers
    lat: List[List[float]] = [[] for _ in range(args.workers)]
    start_line = threading.Barrier(args.workers + 1)

    def worker(i: int) -> None:
        key = f"pybench-{run}-{i}"
        start_line.wait()
        n = e = 0
        mine = lat[i]
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                lock = client.acquire(key, args.lease, wait=args.lease)
                client.release(key, lock.token)
                n += 1
                if n % 16 == 0:
                    mine.append(time.perf_counter() - t0)
            except lockd.Error:
                e += 1
        counts[i], errors[i] = n, e

    ts = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(args.workers)]
    for t in ts:
        t.start()
    client.status()  # the connections are up before the clock starts
    start_line.wait()
    t0 = time.perf_counter()
    time.sleep(args.duration)
    stop.set()
    for t in ts:
        t.join()
    elapsed = time.perf_counter() - t0
    client.close()
    return counts, errors, lat, elapsed


async def tasks(args: argparse.Namespace, run: str) -> Tuple[List[int], List[int], List[List[float]], float]:
    counts = [0] * args.workers
    errors = [0] * args.workers
    lat: List[List[float]] = [[] for _ in range(args.workers)]
    stop = False
    async with lockd.AsyncClient(args.addr) as client:
        await client.status()  # the connections are up before the clock starts

        async def worker(i: int) -> None:
            key = f"pybench-{run}-{i}"
            n = e = 0
            mine = lat[i]
            while not stop:
                t0 = time.perf_counter()
                try:
                    lock = await client.acquire(key, args.lease, wait=args.lease)
                    await client.release(key, lock.token)
                    n += 1
                    if n % 16 == 0:
                        mine.append(time.perf_counter() - t0)
                except lockd.Error:
                    e += 1
            counts[i], errors[i] = n, e

        t0 = time.perf_counter()
        running = [asyncio.ensure_future(worker(i)) for i in range(args.workers)]
        await asyncio.sleep(args.duration)
        stop = True
        await asyncio.gather(*running)
        elapsed = time.perf_counter() - t0
    return counts, errors, lat, elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--addr", default=os.environ.get("LOCKD_ADDR", "127.0.0.1:7070"))
    ap.add_argument("--workers", type=int, default=200)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds")
    ap.add_argument("--lease", type=float, default=5.0, help="seconds")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--asyncio", action="store_true", help="tasks sharing one lockd.AsyncClient, not threads sharing one lockd.Client")
    args = ap.parse_args()

    run = f"{os.getpid()}-{int(time.time())}"
    if args.asyncio:
        counts, errors, lat, elapsed = asyncio.run(tasks(args, run))
    else:
        counts, errors, lat, elapsed = threads(args, run)
    samples = sorted(x for w in lat for x in w)

    def pct(p: float) -> float:
        return samples[min(len(samples) - 1, int(p * len(samples)))] * 1000.0 if samples else 0.0

    res: Dict[str, Any] = {
        "client": "python-asyncio" if args.asyncio else "python",
        "python": sys.version.split()[0],
        "mode": "pipelined",
        "workers": args.workers,
        "duration_seconds": round(elapsed, 3),
        "cycles": sum(counts),
        "errors": sum(errors),
        "cycles_per_second": round(sum(counts) / elapsed, 1),
        "p50_ms": round(pct(0.50), 3),
        "p99_ms": round(pct(0.99), 3),
    }
    if args.json:
        print(json.dumps(res))
    else:
        print(
            f"python client, {args.workers} {'tasks sharing one AsyncClient' if args.asyncio else 'threads sharing one Client'}, unique keys: "
            f"{res['cycles_per_second']:.0f} acquire+release cycles/s over {elapsed:.1f}s "
            f"(p50 {res['p50_ms']:.2f} ms, p99 {res['p99_ms']:.2f} ms, {res['errors']} errors)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
