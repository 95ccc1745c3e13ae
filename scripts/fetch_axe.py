"""Fetch axe-core's axe.min.js from the npm registry into .venv/axe-core/ for tests/test_browser_axe.py; the
tarball is checked against its pinned sha256 (the registry is the only source, no npm client needed)."""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
import urllib.request
from pathlib import Path

VERSION = "4.14.1"
SHA256 = "e6b0ce02b84d892e2e33e403485e7f3d6c29e2be6df65daf44d89ba564139745"
URL = f"https://registry.npmjs.org/axe-core/-/axe-core-{VERSION}.tgz"
OUT = Path(__file__).resolve().parent.parent / ".venv" / "axe-core" / "axe.min.js"


def main() -> int:
    if OUT.is_file():
        return 0
    data = urllib.request.urlopen(URL, timeout=60).read()
    got = hashlib.sha256(data).hexdigest()
    if got != SHA256:
        print(f"error: {URL} has sha256 {got}, expected {SHA256}", file=sys.stderr)
        return 1
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        script = tar.extractfile("package/axe.min.js")
        if script is None:
            print(f"error: {URL} holds no package/axe.min.js", file=sys.stderr)
            return 1
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_bytes(script.read())
    print(f"axe-core {VERSION} → {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
