"""Trusted-header mode believes X-Forwarded-User / X-Forwarded-Role only from an allowlisted proxy address
or with the shared proxy secret: a forged admin header sent straight to the API is refused (it used to
create an admin token)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from backend.config import Settings
from backend.db.models_alerts import ApiToken
from dashboard.auth import api_headers
from dashboard.settings import DashboardSettings
from tests.alerts.test_api import make_client

FORGED = {"X-Forwarded-User": "mallory", "X-Forwarded-Role": "admin"}


def _client(db, now, peer: str, **settings):
    return make_client(db, now, peer, auth_mode="trusted-header", **settings)


def _tokens(db) -> int:
    return db.scalar(select(func.count()).select_from(ApiToken))


def test_a_forged_role_header_from_an_unlisted_address_is_refused(db, now):
    client = _client(db, now, "203.0.113.9")
    r = client.post("/api/v1/tokens", json={"name": "pwn", "role": "admin"}, headers=FORGED)
    assert r.status_code == 401, r.text
    assert "SPECWATCH_AUTH_TRUSTED_PROXIES" in r.json()["detail"]
    assert _tokens(db) == 0
    assert client.get("/api/v1/whoami", headers=FORGED).status_code == 401


@pytest.mark.parametrize("peer,proxies,ok", [
    ("127.0.0.1", None, True),  # loopback is the default allowlist
    ("::1", None, True),
    ("10.1.2.3", "10.0.0.0/8", True),
    ("10.1.2.3", "10.0.0.0/16", False),
    ("::ffff:10.1.2.3", "10.0.0.0/8", True),  # an IPv4 peer on a dual-stack socket
    ("testclient", None, False),  # not an address at all
])
def test_the_allowlist(db, now, peer, proxies, ok):
    extra = {} if proxies is None else {"auth_trusted_proxies": proxies}
    r = _client(db, now, peer, **extra).get("/api/v1/whoami", headers=FORGED)
    assert (r.status_code == 200) is ok, r.text
    if ok:
        assert r.json() == {"name": "mallory", "role": "admin"}


def test_the_shared_secret_works_from_anywhere_and_only_when_right(db, now):
    client = _client(db, now, "198.51.100.7", auth_trusted_proxies="", auth_proxy_secret="s3cret-s3cret")
    assert client.get("/api/v1/whoami", headers=FORGED).status_code == 401
    assert client.get("/api/v1/whoami", headers=FORGED | {"X-Specwatch-Proxy-Secret": "wrong"}).status_code == 401
    r = client.get("/api/v1/whoami", headers=FORGED | {"X-Specwatch-Proxy-Secret": "s3cret-s3cret"})
    assert r.status_code == 200 and r.json()["name"] == "mallory"
    # an empty allowlist trusts no address, loopback included
    local = _client(db, now, "127.0.0.1", auth_trusted_proxies="", auth_proxy_secret="s3cret-s3cret")
    assert local.get("/api/v1/whoami", headers=FORGED).status_code == 401


def test_bad_allowlist_entries_refuse_to_start():
    with pytest.raises(ValueError, match="not an address or CIDR"):
        Settings(_env_file=None, auth_trusted_proxies="10.0.0.0/8,example.com")
    assert Settings(_env_file=None, auth_trusted_proxies="10.0.0.0/8, 192.168.0.1").auth_trusted_proxies == [
        "10.0.0.0/8", "192.168.0.1"]


def test_the_dashboard_forwards_the_secret_with_the_proxy_headers():
    settings = DashboardSettings(auth="trusted-header", proxy_secret="s3cret-s3cret")
    assert api_headers(settings, None, {"X-Forwarded-User": "ann"}) == {
        "X-Forwarded-User": "ann", "X-Specwatch-Proxy-Secret": "s3cret-s3cret"}
    assert api_headers(settings, None, {}) == {}  # no user from the proxy: nothing to vouch for
