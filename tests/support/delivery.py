"""How the progressive-delivery controllers read specwatch's gate, re-implemented from their sources for the
forms deploy/argo and deploy/flagger use (docs/progressive-delivery.md), so that tests can run the shipped
manifests against the real API:

* Argo Rollouts (metricproviders/webmetric/webmetric.go, utils/evaluate/evaluate.go): `{{args.x}}`
  substitution; a GET with the template's headers; a non-2xx answer is an Error measurement; the body's
  value at `jsonPath` (Kubernetes JSONPath: this implements the `{$.a.b}` / `{.a.b}` field chains only, and
  a missing field is an error, as client-go's is); successCondition / failureCondition as expr-lang
  expressions (this implements `result == "..."` / `result != "..."` joined by `&&` or `||`, no
  parentheses); EvaluateResult's rule: a true failure condition is Failed, a true success condition
  Successful, neither Inconclusive.
* Flagger (pkg/controller/webhook.go): a POST of the CanaryWebhookPayload (name, namespace, phase,
  checksum, metadata) to the webhook's URL; any status above 202 is a failed webhook.

Anything outside these forms raises NotImplementedError: a manifest changed to use more must extend this
module (and so be checked) rather than pass unchecked."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from fastapi.testclient import TestClient

_ARG = re.compile(r"\{\{\s*args\.([A-Za-z0-9_.-]+)\s*\}\}")
_JSONPATH = re.compile(r"^\{\$?((?:\.[A-Za-z_][A-Za-z0-9_-]*)+)\}$")
_COMPARISON = re.compile(r'^result\s*(==|!=)\s*"([^"\\]*)"$')


def substitute(text: str, args: dict[str, str]) -> str:
    def one(m: re.Match) -> str:
        if m.group(1) not in args:
            raise KeyError(f"argument {m.group(1)!r} not given")
        return args[m.group(1)]

    return _ARG.sub(one, text)


def template_args(template: dict, given: dict[str, str]) -> dict[str, str]:
    """The template's args with their defaults, `given` (values and resolved valueFrom) winning."""
    out = {a["name"]: a["value"] for a in template["spec"].get("args", []) if "value" in a}
    out.update(given)
    missing = [a["name"] for a in template["spec"].get("args", []) if a["name"] not in out]
    if missing:
        raise KeyError(f"args without a value: {missing}")
    return out


def jsonpath(expr: str, data: Any) -> Any:
    m = _JSONPATH.match(expr.strip())
    if m is None:
        raise NotImplementedError(f"JSONPath form not implemented here: {expr!r}")
    value = data
    for field in m.group(1).split(".")[1:]:
        if not isinstance(value, dict) or field not in value:
            raise LookupError(f"{field} is not found")  # client-go: an error, so an Error measurement
        value = value[field]
    return value


def condition(expr: str, result: Any) -> bool:
    for joiner, combine in (("||", any), ("&&", all)):
        if joiner in expr:
            if "||" in expr and "&&" in expr:
                raise NotImplementedError(f"mixed && and || not implemented here: {expr!r}")
            return combine(condition(part, result) for part in expr.split(joiner))
    m = _COMPARISON.match(expr.strip())
    if m is None:
        raise NotImplementedError(f"condition form not implemented here: {expr!r}")
    equal = result == m.group(2)
    return equal if m.group(1) == "==" else not equal


def evaluate_result(result: Any, success: str, failure: str) -> str:
    """utils/evaluate.EvaluateResult with both conditions given."""
    failed, succeeded = condition(failure, result), condition(success, result)
    if failed:
        return "Failed"
    return "Successful" if succeeded else "Inconclusive"


def argo_measure(client: TestClient, template: dict, args: dict[str, str]) -> tuple[str, Any]:
    """One measurement of the template's (only) web metric through `client`: (phase, value)."""
    (metric,) = template["spec"]["metrics"]
    web = metric["provider"]["web"]
    if web.get("method", "GET") != "GET" or set(web) - {"url", "headers", "jsonPath", "timeoutSeconds"}:
        raise NotImplementedError(f"web provider fields not implemented here: {sorted(web)}")
    url = urlsplit(substitute(web["url"], args))
    headers = {h["key"]: substitute(h["value"], args) for h in web.get("headers", [])}
    r = client.get(f"{url.path}?{url.query}", headers=headers)
    if not 200 <= r.status_code < 300:
        return "Error", r.status_code
    try:
        value = jsonpath(web.get("jsonPath", "{$}"), r.json())
    except LookupError as exc:
        return "Error", str(exc)
    return evaluate_result(value, metric["successCondition"], metric["failureCondition"]), value


def flagger_call(client: TestClient, canary: dict, webhook: dict, phase: str = "Progressing") -> tuple[bool, Any]:
    """One call of a Canary's webhook through `client`, as Flagger's CallWebhook makes it: (passed, answer)."""
    url = urlsplit(webhook["url"])
    payload = {"name": canary["metadata"]["name"], "namespace": canary["metadata"].get("namespace", "default"),
               "phase": phase, "checksum": "0123456789abcdef", "metadata": webhook.get("metadata") or {}}
    r = client.post(f"{url.path}?{url.query}", json=payload, headers={"Content-Type": "application/json"})
    return r.status_code <= 202, r
