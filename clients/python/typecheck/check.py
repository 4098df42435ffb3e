#!/usr/bin/env python3
"""Type-checks the Python client with pyright (installed here from
package-lock.json by make typecheck-python):

  1. pyright --verifytypes lockd: every public symbol of the package
     has a known type (py.typed promises them);
  2. pyright in strict mode on examples/ and typecheck/api_types.py: the
     examples use the public API without an error, and every reveal_type
     in api_types.py shows a type with no Any and no Unknown in it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
pyright = os.path.join(here, "node_modules", ".bin", "pyright")


def main() -> int:
    if not os.path.exists(pyright):
        print(f"check.py: {pyright} is missing; install it with: cd {here} && npm ci", file=sys.stderr)
        return 2
    env = dict(os.environ, PYTHONPATH=root)
    v = subprocess.run([pyright, "--verifytypes", "lockd", "--ignoreexternal", "--outputjson"], cwd=root, env=env, capture_output=True, text=True)
    report = json.loads(v.stdout)
    score = report["typeCompleteness"]["completenessScore"]
    bad = [d for d in report["typeCompleteness"]["symbols"] for d in d.get("diagnostics", []) if d["severity"] == "error"]
    for d in bad:
        print(f"verifytypes: {d['message']} ({d.get('file', '')}:{d.get('range', {}).get('start', {}).get('line', 0) + 1})")
    print(f"pyright --verifytypes lockd: type completeness {score * 100:.1f}%")
    failed = score < 1.0 or bool(bad)

    s = subprocess.run([pyright, "--outputjson", "-p", "pyrightconfig.json"], cwd=root, env=env, capture_output=True, text=True)
    out = json.loads(s.stdout)
    revealed = 0
    for d in out["generalDiagnostics"]:
        where = f"{os.path.relpath(d['file'], root)}:{d['range']['start']['line'] + 1}"
        msg = d["message"]
        if d["severity"] == "information" and msg.startswith("Type of "):
            revealed += 1
            shown = msg.split(" is ", 1)[-1]
            if "Any" in shown or "Unknown" in shown:
                print(f"{where}: {msg}: the client's API gives Any or Unknown here")
                failed = True
            continue
        print(f"{where}: {d['severity']}: {msg}")
        if d["severity"] == "error":
            failed = True
    print(f"pyright (strict) on examples/ and typecheck/api_types.py: {out['summary']['errorCount']} errors, {revealed} types revealed")
    with open(os.path.join(here, "api_types.py")) as f:
        want = f.read().count("reveal_type(")
    if revealed < want:
        print("check.py: {revealed} reveal_type results, but api_types.py has {want}: is pyright checking all of it?")
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
