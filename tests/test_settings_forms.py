"""Every list setting accepts the forms the docs show, from the environment as a service reads it: comma-
separated, a JSON list, and empty (`=` alone: none). pydantic-settings JSON-decodes list fields by default,
which stopped the services at start-up on the comma forms."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from backend.config import Settings

TARGETS = ("http://a:8000/metrics|traffic_class=chat;spec_mode=eagle3,"
           "http://b:8000/metrics|traffic_class=chat;spec_mode=off")


@pytest.mark.parametrize(("env", "value", "field", "expected"), [
    # docs/deployment-security.md: one proxy, several, and the "secret alone" set-up (empty)
    ("SPECWATCH_AUTH_TRUSTED_PROXIES", "10.0.3.7/32", "auth_trusted_proxies", ["10.0.3.7/32"]),
    ("SPECWATCH_AUTH_TRUSTED_PROXIES", "10.0.3.7/32, ::1/128", "auth_trusted_proxies", ["10.0.3.7/32", "::1/128"]),
    ("SPECWATCH_AUTH_TRUSTED_PROXIES", "", "auth_trusted_proxies", []),
    ("SPECWATCH_AUTH_TRUSTED_PROXIES", '["10.0.0.0/8"]', "auth_trusted_proxies", ["10.0.0.0/8"]),
    # README: labels a per-request record may carry
    ("SPECWATCH_REQUESTS_LABELS", "traffic_class,tenant", "requests_labels", ["traffic_class", "tenant"]),
    ("SPECWATCH_REQUESTS_LABELS", '["traffic_class"]', "requests_labels", ["traffic_class"]),
    # docs/scale.md: the precomputed /fleet windows
    ("SPECWATCH_FLEET_SNAPSHOT_WINDOWS", "3600,86400", "fleet_snapshot_windows", [3600, 86400]),
    ("SPECWATCH_FLEET_SNAPSHOT_WINDOWS", "[3600]", "fleet_snapshot_windows", [3600]),
    ("SPECWATCH_FLEET_SNAPSHOT_WINDOWS", "", "fleet_snapshot_windows", []),
])
def test_list_setting_forms(monkeypatch, env, value, field, expected):
    monkeypatch.setenv(env, value)
    assert getattr(Settings(), field) == expected


def test_scrape_targets_short_form(monkeypatch):
    """README: `url|label=value;label=value`, comma-separated."""
    monkeypatch.setenv("SPECWATCH_SCRAPE_TARGETS", TARGETS)
    targets = Settings().scrape_targets
    assert [(t.url, t.labels) for t in targets] == [
        ("http://a:8000/metrics", {"traffic_class": "chat", "spec_mode": "eagle3"}),
        ("http://b:8000/metrics", {"traffic_class": "chat", "spec_mode": "off"}),
    ]


@pytest.mark.parametrize(("env", "value", "message"), [
    ("SPECWATCH_AUTH_TRUSTED_PROXIES", "10.0.3.7/32,not-an-address", "not an address or CIDR"),
    ("SPECWATCH_FLEET_SNAPSHOT_WINDOWS", "3600,an-hour", "fleet_snapshot_windows"),
    ("SPECWATCH_REQUESTS_LABELS", "tenant", "requests_class_label must be one of requests_labels"),
])
def test_bad_list_values_are_refused_clearly(monkeypatch, env, value, message):
    monkeypatch.setenv(env, value)
    with pytest.raises(ValidationError, match=message):
        Settings()
