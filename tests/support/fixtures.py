"""Fixtures for external processes. Enabled through `pytest_plugins = ["tests.support.fixtures"]` in
tests/conftest.py."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import skips
from tests.support.prometheus import PrometheusServer
from tests.support.slack import SlackReceiver


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    return skips.require_binary("prometheus")


@pytest.fixture(scope="session")
def promtool_bin() -> str:
    return skips.require_binary("promtool")


@pytest.fixture(scope="session")
def chromium_bin() -> str:
    return skips.chromium_path()


@pytest.fixture(scope="session")
def docker_compose_bin() -> str:
    return skips.require_binary("docker-compose")


@pytest.fixture(scope="session")
def helm_bin() -> str:
    """helm on PATH, else the one `make test` fetched into .specwatch/bin (scripts/fetch_helm.py)."""
    fetched = Path(__file__).resolve().parents[2] / ".specwatch" / "bin" / "helm"
    if fetched.is_file() and not shutil.which("helm"):
        return str(fetched)
    return skips.require_binary("helm")


@pytest.fixture
def prometheus_factory(prometheus_bin: str, tmp_path: Path) -> Iterator[Callable[..., PrometheusServer]]:
    """make(targets, **kw) -> a started PrometheusServer; all are stopped after the test."""
    servers: list[PrometheusServer] = []

    def make(targets: list[dict[str, Any]], **kw: Any) -> PrometheusServer:
        kw.setdefault("data_dir", tmp_path / f"prometheus-{len(servers)}")
        server = PrometheusServer(targets, binary=prometheus_bin, **kw)
        servers.append(server)
        return server.start()

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def slack_receiver() -> Iterator[SlackReceiver]:
    with SlackReceiver() as receiver:
        yield receiver
