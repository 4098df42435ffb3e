#!/usr/bin/env python3
"""pydist.py SRC VERSION OUT: the wheel and the sdist of the Python client.

SRC is clients/python (its pyproject.toml, README.md and the lockd
package). Both are written with the standard library alone: the package
is pure Python with no dependency, so a wheel is a zip of its modules
and a .dist-info directory (PEP 427, core metadata 2.1), and an sdist a
tarball of the sources with PKG-INFO (PEP 517/643). No setuptools, no
wheel package and no package index are needed to build them, and
`pip install lockd-VERSION-py3-none-any.whl` installs the wheel offline.
VERSION replaces the version of pyproject.toml and of lockd.__version__.

Files are stored in name order with SOURCE_DATE_EPOCH as their time, so
that the same sources give the same bytes.
"""

import base64
import csv
import gzip
import hashlib
import io
import os
import re
import sys
import tarfile
import time
import tomllib
import zipfile


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit("usage: pydist.py SRC VERSION OUT")
    src, version, out = sys.argv[1:]
    with open(os.path.join(src, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    name = project["name"]
    with open(os.path.join(src, project.get("readme", "README.md")), encoding="utf-8") as f:
        readme = f.read()
    files = package_files(src, version)
    metadata = core_metadata(project, version, readme)
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    wheel = write_wheel(out, name, version, files, metadata, epoch)
    sdist = write_sdist(out, src, name, version, files, metadata, epoch)
    print("dist:", os.path.basename(wheel))
    print("dist:", os.path.basename(sdist))


def package_files(src: str, version: str) -> dict:
    """Path in the wheel -> bytes: every file of the lockd package but
    caches, with __version__ set to version."""
    files = {}
    pkg = os.path.join(src, "lockd")
    for dirpath, dirnames, filenames in os.walk(pkg):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(dirpath, fn)
            rel = os.path.relpath(path, src).replace(os.sep, "/")
            with open(path, "rb") as f:
                data = f.read()
            if rel == "lockd/__init__.py":
                data, n = re.subn(rb'^__version__ = "[^"]*"', b'__version__ = "' + version.encode() + b'"', data, flags=re.M)
                if n != 1:
                    sys.exit("pydist.py: lockd/__init__.py has no __version__ line to set")
            files[rel] = data
    if "lockd/__init__.py" not in files:
        sys.exit(f"pydist.py: no lockd package in {src}")
    return files


def core_metadata(project: dict, version: str, readme: str) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {version}",
        f"Summary: {project.get('description', '')}",
    ]
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    lic = project.get("license", {})
    if isinstance(lic, dict) and "text" in lic:
        lines.append(f"License: {lic['text']}")
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + readme


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def zip_entry(zf: zipfile.ZipFile, name: str, data: bytes, epoch: int) -> None:
    stamp = time.gmtime(max(epoch, 315532800))[:6]  # zip cannot hold times before 1980
    info = zipfile.ZipInfo(name, date_time=stamp)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data)


def write_wheel(out: str, name: str, version: str, files: dict, metadata: str, epoch: int) -> str:
    dist_info = f"{name}-{version}.dist-info"
    meta = {
        f"{dist_info}/METADATA": metadata.encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: lockd scripts/pydist.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist_info}/top_level.txt": b"lockd\n",
    }
    entries = dict(sorted(files.items()))
    entries.update(meta)
    record = io.StringIO()
    w = csv.writer(record, lineterminator="\n")
    for path, data in entries.items():
        w.writerow([path, record_hash(data), len(data)])
    w.writerow([f"{dist_info}/RECORD", "", ""])
    path = os.path.join(out, f"{name}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as zf:
        for p, data in entries.items():
            zip_entry(zf, p, data, epoch)
        zip_entry(zf, f"{dist_info}/RECORD", record.getvalue().encode(), epoch)
    return path


def write_sdist(out: str, src: str, name: str, version: str, files: dict, metadata: str, epoch: int) -> str:
    base = f"{name}-{version}"
    with open(os.path.join(src, "pyproject.toml"), encoding="utf-8") as f:
        pyproject, n = re.subn(r'^version = "[^"]*"', f'version = "{version}"', f.read(), flags=re.M)
    if n != 1:
        sys.exit("pydist.py: pyproject.toml has no version line to set")
    with open(os.path.join(src, "README.md"), "rb") as f:
        readme = f.read()
    entries = {"PKG-INFO": metadata.encode(), "pyproject.toml": pyproject.encode(), "README.md": readme}
    entries.update(files)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for rel in sorted(entries):
            data = entries[rel]
            info = tarfile.TarInfo(f"{base}/{rel}")
            info.size, info.mtime, info.mode = len(data), epoch, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tf.addfile(info, io.BytesIO(data))
    path = os.path.join(out, f"{base}.tar.gz")
    # gzip's header holds a time too.
    with open(path, "wb") as f, gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=epoch) as gz:
        gz.write(raw.getvalue())
    return path


if __name__ == "__main__":
    main()
