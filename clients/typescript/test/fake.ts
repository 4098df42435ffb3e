// A scripted lockd node for tests: it answers S itself and hands every
// other line to the test, recording what each connection sent.

import * as net from "node:net";

export interface Line {
  conn: net.Socket;
  text: string;
  words: string[];
  at: number;
}

export class FakeNode {
  readonly lines: Line[] = [];
  readonly conns: net.Socket[] = [];
  /** Answers a line (the words after the op included); "" answers nothing. */
  handle: (l: Line) => string = () => "";
  /** A frozen process: read nothing more, answer nothing, keep connections open. */
  silent = false;
  /** When this node last wrote to any connection: where a client's silence clock starts. */
  wroteAt = 0;
  /** The S answer's words after self=. */
  statusWords = "role=active";
  private server: net.Server;
  addr = "";

  private constructor() {
    this.server = net.createServer((c) => {
      this.conns.push(c);
      let buf = "";
      c.on("error", () => {});
      c.on("data", (d) => {
        if (this.silent) return;
        buf += d.toString("utf8");
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const text = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          const l = { conn: c, text, words: text.split(" "), at: Date.now() };
          if (l.words[0] === "S") {
            c.write(`S ${l.words[1]} self=${this.addr} ${this.statusWords}\n`);
            this.wroteAt = Date.now();
            continue;
          }
          this.lines.push(l);
          const out = this.handle(l);
          if (out !== "") {
            c.write(out + "\n");
            this.wroteAt = Date.now();
          }
        }
      });
    });
  }

  /** A node on port (0: a free one): where another stopped, one that came back. */
  static async start(port = 0): Promise<FakeNode> {
    const n = new FakeNode();
    await new Promise<void>((r) => n.server.listen(port, "127.0.0.1", r));
    n.addr = `127.0.0.1:${(n.server.address() as net.AddressInfo).port}`;
    return n;
  }

  got(op: string): Line[] {
    return this.lines.filter((l) => l.words[0] === op);
  }

  open(): net.Socket[] {
    return this.conns.filter((c) => !c.destroyed);
  }

  async waitFor(what: string, cond: () => boolean, ms = 5000): Promise<void> {
    const end = Date.now() + ms;
    while (!cond()) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}; lines: ${this.lines.map((l) => l.text).join(" | ")}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  async stop(): Promise<void> {
    for (const c of this.conns) c.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/** The arg name=value of an acquire line. */
export function arg(l: Line, name: string): string {
  const w = l.words.find((x) => x.startsWith(name + "="));
  return w ? w.slice(name.length + 1) : "";
}
