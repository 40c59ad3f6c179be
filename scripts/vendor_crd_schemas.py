"""Vendor the OpenAPI schemas of the CRDs the progressive-delivery examples use (deploy/argo, deploy/flagger)
into tests/fixtures/crds, from the upstream CRD YAML files, so that tests validate the examples offline.

    python -m scripts.vendor_crd_schemas --argo ARGO_ROLLOUTS_CHECKOUT --argo-ref COMMIT \\
        --flagger FLAGGER_CHECKOUT --flagger-ref COMMIT

Reads manifests/crds/{analysis-template,rollout}-crd.yaml of argoproj/argo-rollouts and
artifacts/flagger/crd.yaml of fluxcd/flagger. Two subtrees are pruned to an open object, each recorded
in the file's `pruned` list, because they are large copies of core Kubernetes schemas: the AnalysisTemplate's
`job` provider (a Job spec) and the Rollout's pod `template` (tests validate the example's pod template
with the Kubernetes schemas instead)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "crds"
OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}

# (output name, repository, path in it, CRD name, pruned paths in the schema (property names))
CRDS = [
    ("argo-analysistemplate", "argoproj/argo-rollouts", "manifests/crds/analysis-template-crd.yaml",
     "analysistemplates.argoproj.io", [("spec", "metrics", "[]", "provider", "job")]),
    ("argo-rollout", "argoproj/argo-rollouts", "manifests/crds/rollout-crd.yaml", "rollouts.argoproj.io",
     [("spec", "template")]),
    ("flagger-canary", "fluxcd/flagger", "artifacts/flagger/crd.yaml", "canaries.flagger.app", []),
]


def _prune(schema: dict, path: tuple[str, ...]) -> None:
    node = schema
    for step in path[:-1]:
        node = node["items"] if step == "[]" else node["properties"][step]
    node["properties"][path[-1]] = {**OPEN, "description": "pruned when vendored (scripts/vendor_crd_schemas.py)"}


def vendor(checkouts: dict[str, tuple[Path, str]]) -> list[Path]:
    OUT.mkdir(parents=True, exist_ok=True)
    written = []
    for name, repo, path, crd_name, pruned in CRDS:
        root, ref = checkouts[repo]
        (crd,) = [d for d in yaml.safe_load_all((root / path).read_text()) if d and d["metadata"]["name"] == crd_name]
        (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
        schema = version["schema"]["openAPIV3Schema"]
        for p in pruned:
            _prune(schema, p)
        doc = {"source": f"https://github.com/{repo}/blob/{ref}/{path}", "crd": crd_name,
               "group": crd["spec"]["group"], "kind": crd["spec"]["names"]["kind"], "version": version["name"],
               "pruned": [".".join(p) for p in pruned], "schema": schema}
        target = OUT / f"{name}.schema.json"
        target.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        written.append(target)
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--argo", type=Path, required=True, help="a checkout of argoproj/argo-rollouts")
    ap.add_argument("--argo-ref", required=True, help="its commit")
    ap.add_argument("--flagger", type=Path, required=True, help="a checkout of fluxcd/flagger")
    ap.add_argument("--flagger-ref", required=True, help="its commit")
    a = ap.parse_args()
    for p in vendor({"argoproj/argo-rollouts": (a.argo, a.argo_ref), "fluxcd/flagger": (a.flagger, a.flagger_ref)}):
        print(p.relative_to(ROOT))


if __name__ == "__main__":
    main()
