"""The progressive-delivery examples (deploy/argo, deploy/flagger) are valid objects of their CRDs: each is
validated with jsonschema against the OpenAPI schema of the upstream CRD (vendored in tests/fixtures/crds by
scripts/vendor_crd_schemas.py), strictly (an unknown field is an error, as `kubectl apply --validate=strict`
makes it), and the Rollout's pod template against the Kubernetes schemas. And they agree with specwatch:
the gate's paths, the Helm chart's Service, an interval no shorter than the rollout evaluation's."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import jsonschema
import kubernetes_validate.utils as kv
import pytest
import yaml

from backend.config import Settings
from tests.ops.test_helm import FULL

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "tests" / "fixtures" / "crds"
EXAMPLES = {"argo-analysistemplate": "deploy/argo/analysis-template.yaml", "argo-rollout": "deploy/argo/rollout.yaml",
            "flagger-canary": "deploy/flagger/canary.yaml"}
CHART_VALUES = ROOT / "deploy" / "helm" / "specwatch" / "values.yaml"
API_SERVICE = f"{FULL}-api"  # the chart's API Service for release `sw`, as tests/ops/test_helm.py renders it


def _doc(path: str) -> dict:
    (doc,) = [d for d in yaml.safe_load_all((ROOT / path).read_text()) if d]
    return doc


def _strict(schema: dict) -> dict:
    """Every object schema with properties and no rule for other fields refuses unknown fields."""
    out = copy.deepcopy(schema)

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(out)
    return out


def _crd(name: str) -> dict:
    return json.loads((CRDS / f"{name}.schema.json").read_text())


def _errors(name: str, doc: dict) -> list[str]:
    crd = _crd(name)
    validator = jsonschema.Draft7Validator(_strict(crd["schema"]))
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def _seconds(duration: str) -> int:
    m = re.fullmatch(r"(\d+)([smh])", duration)
    assert m, duration
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_example_is_a_valid_object_of_its_crd(name) -> None:
    crd, doc = _crd(name), _doc(EXAMPLES[name])
    assert crd["source"].startswith("https://github.com/") and crd["schema"]["type"] == "object"
    assert doc["apiVersion"] == f"{crd['group']}/{crd['version']}" and doc["kind"] == crd["kind"]
    assert _errors(name, doc) == []


def test_the_validation_is_strict() -> None:
    """A misspelt field, a value outside an enum, a missing required field: each refused."""
    template = _doc(EXAMPLES["argo-analysistemplate"])
    typo = copy.deepcopy(template)
    metric = typo["spec"]["metrics"][0]
    metric["sucessCondition"] = metric.pop("successCondition")
    assert _errors("argo-analysistemplate", typo) == [
        "spec.metrics.0: Additional properties are not allowed ('sucessCondition' was unexpected)"]
    no_url = copy.deepcopy(template)
    del no_url["spec"]["metrics"][0]["provider"]["web"]["url"]
    assert _errors("argo-analysistemplate", no_url) == ["spec.metrics.0.provider.web: 'url' is a required property"]
    canary = _doc(EXAMPLES["flagger-canary"])
    canary["spec"]["analysis"]["webhooks"][0]["type"] = "confirm"
    assert len(errors := _errors("flagger-canary", canary)) == 1 and "is not one of" in errors[0]
    canary["spec"]["analysis"]["webhooks"][0]["type"] = "confirm-rollout"
    canary["spec"]["analysis"]["webhooks"][0]["metadata"]["token"] = 5  # metadata values are strings
    assert _errors("flagger-canary", canary) == ["spec.analysis.webhooks.0.metadata.token: 5 is not of type 'string'"]


@pytest.mark.parametrize("version", ["1.25.0", kv.latest_version()])
def test_the_rollouts_pod_template_is_a_valid_pod_template(version) -> None:
    """The Rollout CRD's `template` is a core PodTemplateSpec (pruned from the vendored schema): checked with
    the Kubernetes schemas, strictly, as a Deployment's."""
    rollout = _doc(EXAMPLES["argo-rollout"])
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "check"},
                  "spec": {"selector": rollout["spec"]["selector"], "template": rollout["spec"]["template"]}}
    kv.validate(deployment, version, strict=True)
    selector = rollout["spec"]["selector"]["matchLabels"]
    assert selector.items() <= rollout["spec"]["template"]["metadata"]["labels"].items()


def test_the_argo_template_reads_the_gate_as_documented() -> None:
    template = _doc(EXAMPLES["argo-analysistemplate"])
    (metric,) = template["spec"]["metrics"]
    web = metric["provider"]["web"]
    assert (metric["successCondition"], metric["failureCondition"], web["jsonPath"]) == (
        'result == "pass"', 'result == "fail"', "{$.decision}")
    assert web["url"].startswith("{{args.specwatch-url}}/api/v1/gate?")
    assert web["headers"] == [{"key": "Authorization", "value": "Bearer {{args.api-token}}"}]
    args = {a["name"]: a for a in template["spec"]["args"]}
    assert args["api-token"]["valueFrom"] == {"secretKeyRef": {"name": "specwatch-gate-token", "key": "token"}}
    port = yaml.safe_load(CHART_VALUES.read_text())["api"]["port"]
    assert args["specwatch-url"]["value"] == f"http://{API_SERVICE}.specwatch.svc:{port}"
    assert _seconds(metric["interval"]) >= Settings(_env_file=None).rollout_eval_interval_seconds
    assert (metric["count"], metric["failureLimit"], metric["inconclusiveLimit"]) == (4, 0, 1)
    # the Rollout's analysis step names the template and gives only arguments it has
    rollout = _doc(EXAMPLES["argo-rollout"])
    (step,) = [s["analysis"] for s in rollout["spec"]["strategy"]["canary"]["steps"] if "analysis" in s]
    assert step["templates"] == [{"templateName": template["metadata"]["name"]}]
    assert {a["name"] for a in step["args"]} <= set(args) and "model" in {a["name"] for a in step["args"]}


def test_the_examples_name_the_charts_api_service() -> None:
    api = (ROOT / "deploy" / "helm" / "specwatch" / "templates" / "api.yaml").read_text()
    assert 'kind: Service\nmetadata:\n  name: {{ include "specwatch.fullname" . }}-api' in api
    assert FULL == "sw-specwatch"


def test_the_flagger_webhooks_call_the_flagger_form() -> None:
    canary = _doc(EXAMPLES["flagger-canary"])
    analysis = canary["spec"]["analysis"]
    assert _seconds(analysis["interval"]) >= Settings(_env_file=None).rollout_eval_interval_seconds
    port = yaml.safe_load(CHART_VALUES.read_text())["api"]["port"]
    for hook in analysis["webhooks"]:
        url = urlsplit(hook["url"])
        assert (url.netloc, url.path) == (f"{API_SERVICE}.specwatch.svc:{port}", "/api/v1/gate/flagger")
        query = parse_qs(url.query)
        assert set(query) == {"model", "scope", "check"} and query["check"][0] in ("alpha", "latency", "all")
        assert set(hook["metadata"]) == {"token"}


def test_the_vendored_schemas_are_what_the_script_writes() -> None:
    """Each fixture names its upstream file and commit and records exactly the subtrees the script prunes,
    each an open object."""
    from scripts.vendor_crd_schemas import CRDS as VENDORED
    from scripts.vendor_crd_schemas import OPEN

    assert sorted(name for name, *_ in VENDORED) == sorted(EXAMPLES)
    for name, repo, path, crd_name, pruned in VENDORED:
        crd = _crd(name)
        assert re.fullmatch(rf"https://github.com/{repo}/blob/[0-9a-f]{{40}}/{path}", crd["source"])
        assert crd["crd"] == crd_name and crd["pruned"] == [".".join(p) for p in pruned]
        for p in pruned:
            node = crd["schema"]
            for step in p:
                node = node["items"] if step == "[]" else node["properties"][step]
            assert OPEN.items() <= node.items()
