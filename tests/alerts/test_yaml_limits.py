"""Alert rules posted as YAML cannot make the API build a huge document: an alias bomb (a few hundred
bytes, billions of values once expanded), a recursive alias, deep nesting or a huge text is refused with
422 and the reason, before anything is expanded."""

from __future__ import annotations

import pytest
import yaml

from backend.domain import safe_yaml
from tests.alerts.test_api import api  # noqa: F401 - the app with a token per role


def bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        refs = ",".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


def test_the_alias_bomb_is_refused(api):  # noqa: F811
    client, headers = api
    text = bomb()
    assert len(text) < 600
    r = client.post("/api/v1/alerts/rules/check", headers=headers["viewer"], json={"yaml": text})
    assert r.status_code == 422, r.text[:300]
    assert len(r.content) < 2000
    errors = r.json()["detail"]["errors"]
    assert errors and "aliases are expanded" in errors[0]
    r = client.put("/api/v1/alerts/rules", headers=headers["admin"], json={"yaml": text})
    assert r.status_code == 422 and "aliases are expanded" in r.json()["detail"]["errors"][0]


@pytest.mark.parametrize("text,reason", [
    (bomb(), "more than 20000 values once aliases are expanded"),
    ("a: &a [*a]\n", "recursive alias"),
    ("x: " + "[" * 40 + "]" * 40 + "\n", "nested deeper than 32 levels"),
    ("a: &a 1\nb: [" + ",".join(["*a"] * 101) + "]\n", "more than 100 aliases"),
    ("x: '" + "y" * (safe_yaml.MAX_BYTES + 1) + "'\n", "larger than 256 KiB"),
])
def test_limits(text, reason):
    with pytest.raises(safe_yaml.YamlRefused, match=reason):
        safe_yaml.load(text)


def test_ordinary_yaml_with_anchors_still_loads():
    text = "defaults: &d {for: 5m, severity: warning}\nrules:\n  - {<<: *d, name: low-alpha}\n  - {<<: *d, name: x}\n"
    assert safe_yaml.load(text) == yaml.safe_load(text)
    assert safe_yaml.load("") is None
    with pytest.raises(yaml.YAMLError):
        safe_yaml.load("a: [unclosed")
