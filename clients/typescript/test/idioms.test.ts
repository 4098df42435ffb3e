// The client in Node.js's idiom: locks that release themselves and
// dispose, disposable watches and observations, one AbortSignal shared by
// many calls without a warning, an idle client that lets the process
// exit, and a .d.ts without the internals.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { Client, Lock } from "../src/index.js";
import { FakeNode, arg } from "./fake.js";

let tokens = 5000n;
const serve = (n: FakeNode) => {
  n.handle = (l) => {
    switch (l.words[0]) {
      case "A":
        return `A ${l.words[1]} ${++tokens} ref=${arg(l, "ref")}`;
      case "R":
        return `R ${l.words[1]} ok`;
      case "L":
        return `L ${l.words[1]} - - 0`;
      default:
        return "";
    }
  };
};

test("acquire gives a Lock that releases itself, and await using releases it", async (t) => {
  const n = await FakeNode.start();
  const c = new Client(n.addr);
  t.after(async () => {
    await c.close();
    await n.stop();
  });
  serve(n);
  const lock = await c.acquire("self", { lease: 10000 });
  assert.ok(lock instanceof Lock);
  await lock.release();
  assert.equal(n.got("R").at(-1)?.text, `R self ${lock.token}`);
  let token = 0n;
  {
    await using held = await c.acquire("scoped", { lease: 10000 });
    token = held.token;
    assert.equal(n.got("R").filter((l) => l.words[1] === "scoped").length, 0);
  }
  assert.equal(n.got("R").at(-1)?.text, `R scoped ${token}`);
});

test("watches and observations are disposable", async (t) => {
  const n = await FakeNode.start();
  const c = new Client(n.addr);
  t.after(async () => {
    await c.close();
    await n.stop();
  });
  serve(n);
  {
    using w = c.watch("w");
    assert.equal((await w.next()).done, false);
  }
  await n.waitFor("U w", () => n.got("U").some((l) => l.words[1] === "w"));
  {
    await using o = c.election("e").observe();
    assert.equal((await o.next()).value, null);
  }
  await n.waitFor("U e", () => n.got("U").some((l) => l.words[1] === "e"));
});

test("calls sharing one AbortSignal print no MaxListenersExceededWarning", async (t) => {
  const n = await FakeNode.start();
  const c = new Client(n.addr);
  const warnings: Error[] = [];
  const onWarning = (w: Error) => warnings.push(w);
  process.on("warning", onWarning);
  t.after(async () => {
    process.off("warning", onWarning);
    await c.close();
    await n.stop();
  });
  // Nothing is granted: every call waits on the signal.
  n.handle = () => "";
  const ctl = new AbortController();
  const calls: Promise<unknown>[] = [];
  for (let i = 0; i < 25; i++) {
    calls.push(c.acquire("shared" + i, { lease: 10000, signal: ctl.signal }));
    calls.push(c.queue("q" + i, { signal: ctl.signal }));
  }
  await n.waitFor("the acquires", () => n.got("A").length === 25);
  ctl.abort();
  const results = await Promise.allSettled(calls);
  assert.ok(results.every((r) => r.status === "rejected"), "every call ends with the abort");
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(
    warnings.filter((w) => w.name === "MaxListenersExceededWarning").map((w) => w.message),
    [],
  );
});

// runs a program that acquires and releases a lock and never closes its
// client; resolves with its exit code, or "alive" if it still runs after ms.
async function orphanProgram(addr: string, unref: boolean, ms: number): Promise<number | "alive"> {
  const index = fileURLToPath(new URL("../src/index.js", import.meta.url));
  const src = `
    const { Client } = await import(${JSON.stringify(index)});
    const c = new Client(${JSON.stringify(addr)}, { unref: ${unref} });
    const lock = await c.acquire("idle", { lease: 10000 });
    await lock.release();
    console.log("done");
  `;
  const p = spawn(process.execPath, ["--input-type=module", "-e", src], { stdio: ["ignore", "pipe", "inherit"] });
  return await new Promise((resolve) => {
    const t = setTimeout(() => {
      p.kill();
      resolve("alive");
    }, ms);
    p.on("exit", (code) => {
      clearTimeout(t);
      resolve(code ?? -1);
    });
  });
}

test("unref: an idle client lets the process exit without close()", async (t) => {
  const n = await FakeNode.start();
  t.after(() => n.stop());
  serve(n);
  assert.equal(await orphanProgram(n.addr, true, 5000), 0, "with unref, the program exits once its work is done");
  assert.equal(await orphanProgram(n.addr, false, 1500), "alive", "without unref, the client keeps the program alive until close()");
});

test("the .d.ts leaves the @internal members out", () => {
  const dts = ["client.d.ts", "hold.d.ts"].map((f) => readFileSync(fileURLToPath(new URL(`../src/${f}`, import.meta.url)), "utf8")).join("\n");
  // A member is declared at the start of a line of its class.
  for (const name of ["acquireAs", "holdAs", "orphan", "connUp", "connDown", "watchLine", "watchMoved", "lose", "push", "end", "unwatchSignal", "open", "log"]) {
    assert.doesNotMatch(dts, new RegExp(`^\\s+${name}\\b`, "m"), `${name} is @internal, and in the .d.ts`);
  }
  assert.match(dts, /^\s+acquire\(/m, "the test reads the declarations");
});
