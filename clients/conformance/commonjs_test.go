package conformance

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockd-io/lockd/proto/client"
)

// holdCJS is a CommonJS program as a user of the TypeScript client's
// package writes it: require(), a hold, a release when told.
const holdCJS = `
const { Client } = require("@lockd-io/client");
(async () => {
  const c = new Client(process.argv[2]);
  const hold = await c.hold("cjs", { lease: 5000 });
  console.log("held " + hold.token);
  await new Promise((r) => process.stdin.once("data", r));
  await hold.release();
  await c.close();
  console.log("released");
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
`

// holdCTS is the same in TypeScript, compiled as CommonJS: it type-checks
// against the package's types for require.
const holdCTS = `
import { Client, Hold } from "@lockd-io/client";

async function main(addr: string): Promise<bigint> {
  const c = new Client(addr, { unref: true });
  await using lock = await c.acquire("cjs-ts", { lease: 5000 });
  const hold: Hold = await c.hold("cjs-ts-hold", { lease: 5000 });
  await hold.release();
  return lock.token;
}
void main;
`

// TestTypeScriptRequirePacked packs the TypeScript client as npm would
// publish it (npm pack), installs the tarball in a CommonJS project, and
// runs a program that require()s it and holds a lock on a real lockd; a
// TypeScript file of that project, compiled as CommonJS, type-checks.
func TestTypeScriptRequirePacked(t *testing.T) {
	ts := filepath.Join(repoRoot, "clients", "typescript")
	var ok bool
	for _, d := range knownDrivers() {
		if d.name == "typescript" {
			ok = d.present(repoRoot)
		}
	}
	if !ok {
		if requiredClients()["typescript"] {
			t.Fatalf("the TypeScript client must be tested, and it is not built: run npm ci && npm run build in clients/typescript")
		}
		t.Skip("the TypeScript client is not built (npm ci && npm run build in clients/typescript)")
	}
	t.Parallel()
	run := func(dir string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
		}
		return string(out)
	}
	// The build is there (the driver is); pack it as it is.
	packs := t.TempDir()
	out := run(ts, "npm", "pack", "--ignore-scripts", "--silent", "--pack-destination", packs)
	tarball := filepath.Join(packs, strings.TrimSpace(lastLine(out)))
	proj := t.TempDir()
	writeIn(t, proj, "package.json", `{ "name": "cjs-user", "version": "1.0.0", "private": true }`+"\n")
	run(proj, "npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--offline", tarball)
	writeIn(t, proj, "hold.js", holdCJS)
	writeIn(t, proj, "check.ts", holdCTS)
	writeIn(t, proj, "tsconfig.json", `{
  "compilerOptions": {
    "module": "nodenext", "moduleResolution": "nodenext", "target": "ES2022",
    "lib": ["ES2022", "ESNext.Disposable"], "strict": true, "noEmit": true,
    "typeRoots": [`+strconv.Quote(filepath.Join(ts, "node_modules", "@types"))+`], "types": ["node"]
  },
  "files": ["check.ts"]
}
`)
	run(proj, filepath.Join(ts, "node_modules", ".bin", "tsc"), "-p", ".")

	n := startNode(t)
	cmd := exec.Command("node", "hold.js", n.addr)
	cmd.Dir = proj
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	next := func(want string) []string {
		t.Helper()
		got := make(chan string, 1)
		go func() {
			if lines.Scan() {
				got <- lines.Text()
			}
			close(got)
		}()
		select {
		case l := <-got:
			if f := strings.Fields(l); len(f) > 0 && f[0] == want {
				return f
			}
			t.Fatalf("the CommonJS program said %q, want %s...; its stderr:\n%s", l, want, stderr.String())
		case <-time.After(20 * time.Second):
			t.Fatalf("no %q from the CommonJS program in 20 s; its stderr:\n%s", want, stderr.String())
		}
		return nil
	}
	held := next("held")
	gc, err := client.New([]string{n.addr}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	q, err := gc.Queue(ctx, "cjs")
	if err != nil || !q.Held || strconv.FormatUint(q.Token, 10) != held[1] {
		t.Fatalf("the node's holder of cjs: %+v, %v; the program holds token %s", q, err, held[1])
	}
	io.WriteString(stdin, "release\n")
	next("released")
	if q, err := gc.Queue(ctx, "cjs"); err != nil || q.Held {
		t.Errorf("after the program's release the node still shows a holder of cjs: %+v, %v", q, err)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func writeIn(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
