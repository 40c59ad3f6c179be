"""docker-compose.yml, Dockerfile and deploy/prometheus.yml: valid, complete, and consistent with the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import click
import pytest
import typer
import yaml

from tests.support.deadline import deadline
from tests.support.prometheus import PrometheusServer

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
PROM_YML = ROOT / "deploy" / "prometheus.yml"
REQUIRED = {"postgres", "redis", "prometheus", "migrate", "worker", "beat", "api", "dashboard", "sim"}
GATED = ("worker", "beat", "api")  # must wait for the one-shot migrate to complete


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def cli() -> click.Group:
    from backend.cli import _register, app

    if not app.registered_commands:
        _register()
    return typer.main.get_command(app)


def _specwatch_services(compose: dict) -> dict[str, dict]:
    return {n: s for n, s in compose["services"].items() if "build" in s or s.get("image") == "specwatch:local"}


SECRET = "hV3TqTGm1mX0q6bqXh7GJ6zD0q1z0lW3mW7Hc4mC2dE="  # a Fernet key, for rendering only


def _render(docker_compose_bin: str, tmp_path: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    """`docker-compose config` with exactly these variables (an empty env file: a stray .env cannot help)."""
    env_file = tmp_path / "empty.env"
    env_file.write_text("")
    clean = {k: v for k, v in os.environ.items() if k not in ("SPECWATCH_SECRET_KEY", "POSTGRES_PASSWORD")}
    return subprocess.run([docker_compose_bin, "--env-file", str(env_file), "-f", str(COMPOSE), *extra, "config"],
                          check=False, cwd=ROOT, capture_output=True, text=True, timeout=deadline(300),
                          env={**clean, **env})


@pytest.fixture(scope="module")
def rendered(docker_compose_bin, tmp_path_factory) -> dict:
    res = _render(docker_compose_bin, tmp_path_factory.mktemp("compose"),
                  {"SPECWATCH_SECRET_KEY": SECRET, "POSTGRES_PASSWORD": "pw"}, "--profile", "demo")
    assert res.returncode == 0, res.stderr
    return yaml.safe_load(res.stdout)


def test_compose_config_validates(docker_compose_bin, tmp_path):
    for extra in ([], ["--profile", "demo"]):
        res = _render(docker_compose_bin, tmp_path, {"SPECWATCH_SECRET_KEY": SECRET, "POSTGRES_PASSWORD": "pw"}, *extra)
        assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("missing", ["SPECWATCH_SECRET_KEY", "POSTGRES_PASSWORD"])
def test_compose_refuses_to_start_without_the_secrets(docker_compose_bin, tmp_path, missing):
    env = {k: v for k, v in {"SPECWATCH_SECRET_KEY": SECRET, "POSTGRES_PASSWORD": "pw"}.items() if k != missing}
    res = _render(docker_compose_bin, tmp_path, env)
    assert res.returncode != 0 and missing in res.stderr and ".env" in res.stderr, res.stderr


def test_safe_by_default(rendered):
    """Production mode, the secret key from .env, the rules file the image carries, a dashboard login, and
    only the dashboard and the API published, on 127.0.0.1 unless SPECWATCH_BIND_ADDRESS says otherwise."""
    services = rendered["services"]
    for name, svc in _specwatch_services(rendered).items():
        env = svc["environment"]
        assert env["SPECWATCH_ENVIRONMENT"] == "prod", name
        assert env["SPECWATCH_SECRET_KEY"] == SECRET, name
        assert env["SPECWATCH_ALERT_RULES_FILE"] == "/etc/specwatch/alerts.yaml", name
        assert env["SPECWATCH_AUTH_MODE"] == "token", name
    assert services["dashboard"]["environment"]["SPECWATCH_DASHBOARD_AUTH"] == "token"
    published = {n: s["ports"] for n, s in services.items() if s.get("ports")}
    assert set(published) == {"api", "dashboard"}, published
    assert published["api"] == ["127.0.0.1:8000:8000/tcp"] and published["dashboard"] == ["127.0.0.1:8050:8050/tcp"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "COPY alerts.example.yaml /etc/specwatch/alerts.yaml" in dockerfile
    from backend.config import Settings
    from backend.domain.alert_config import parse_config
    from backend.services.alerts import load_file

    parse_config(load_file(ROOT / "alerts.example.yaml"))  # the file the image carries is valid
    s = Settings(environment="prod", secret_key=SECRET)  # and production mode accepts the key
    assert s.secret_key == SECRET
    example = (ROOT / "deploy" / "env.example").read_text()
    assert "SPECWATCH_SECRET_KEY=" in example and "POSTGRES_PASSWORD=" in example


def test_required_services_and_demo_profile(compose):
    services = compose["services"]
    assert REQUIRED <= set(services)
    assert services["sim"].get("profiles") == ["demo"]
    assert all("profiles" not in s for n, s in services.items() if n != "sim")


def test_exactly_one_beat(compose):
    beat = compose["services"]["beat"]
    assert beat.get("deploy", {}).get("replicas", 1) == 1
    assert beat.get("scale", 1) == 1


def test_migrate_is_one_shot_and_gates_the_rest(compose):
    services = compose["services"]
    assert services["migrate"]["command"] == ["migrate"]
    assert services["migrate"].get("restart") == "no"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in GATED:
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name
    assert services["dashboard"]["depends_on"]["api"]["condition"] == "service_healthy"


def test_healthchecks(compose):
    for name in ("postgres", "redis", "prometheus", "worker", "api", "dashboard", "sim"):
        assert compose["services"][name].get("healthcheck", {}).get("test"), f"{name} has no healthcheck"


def test_commands_are_real_specwatch_commands(compose, cli):
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["specwatch"]' in dockerfile
    services = _specwatch_services(compose)
    assert set(GATED) | {"migrate", "dashboard", "sim"} <= set(services)
    for name, svc in services.items():
        args = [str(a) for a in svc["command"]]
        sub = cli.commands.get(args[0])
        assert sub is not None, f"{name}: `specwatch {args[0]}` is not a command (have {sorted(cli.commands)})"
        try:
            sub.make_context(args[0], args[1:])  # unknown options / bad values raise
        except click.ClickException as exc:
            pytest.fail(f"{name}: `specwatch {' '.join(args)}` does not parse: {exc.format_message()}")


def test_environment_names_real_settings(rendered):
    from backend.config import Settings
    from dashboard.settings import ENVIRONMENT

    for name, svc in _specwatch_services(rendered).items():
        for key in svc["environment"]:
            assert key.startswith("SPECWATCH_"), f"{name}: {key}"
            known = key.removeprefix("SPECWATCH_").lower() in Settings.model_fields or key in ENVIRONMENT
            assert known, f"{name}: {key} is no setting"


def test_prometheus_yml_relabels_pool_identity(compose):
    cfg = yaml.safe_load(PROM_YML.read_text())
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    targets = {r.get("target_label") for j in jobs.values() for r in j.get("relabel_configs", [])}
    assert {"traffic_class", "spec_mode"} <= targets
    assert jobs["specwatch-sim"]["honor_labels"] is True  # the sim's series carry the labels already
    assert jobs["specwatch-sim"]["static_configs"][0]["targets"] == ["sim:9400"]
    assert "./deploy/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in compose["services"]["prometheus"]["volumes"]
    assert "spec_mode: off" not in PROM_YML.read_text().replace('"off"', ""), 'quote "off"'


def test_promtool_accepts_prometheus_yml(promtool_bin):
    res = subprocess.run([promtool_bin, "check", "config", str(PROM_YML)], check=False, capture_output=True, text=True,
                         timeout=deadline(300))
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.prometheus
def test_relabeling_really_attaches_pool_labels(prometheus_bin, tmp_path):
    """Run the shipped config (targets pointed at a local exporter): the fleet job's series gain
    traffic_class/spec_mode, a target without pool labels is dropped, the sim job keeps its labels."""
    body = (b"# TYPE vllm:num_requests_running gauge\n"
            b'vllm:num_requests_running{model_name="m",traffic_class="code",spec_mode="eagle3"} 2\n')

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    host = f"127.0.0.1:{srv.server_address[1]}"
    try:
        cfg = yaml.safe_load(PROM_YML.read_text())
        cfg["global"]["scrape_interval"] = "1s"
        jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
        jobs["specwatch-sim"]["static_configs"] = [{"targets": [host]}]
        (tmp_path / "targets").mkdir()
        jobs["vllm"]["file_sd_configs"] = [{"files": [str(tmp_path / "targets" / "*.yml")]}]
        jobs["vllm"]["honor_labels"] = False
        (tmp_path / "targets" / "fleet.yml").write_text(json.dumps([
            {"targets": [host], "labels": {"__pool_traffic_class": "chat", "__pool_spec_mode": "off"}},
            {"targets": ["127.0.0.1:1"]},  # no pool identity: must not be scraped at all
        ]))
        prom = PrometheusServer([], config=cfg, data_dir=tmp_path / "prom", binary=prometheus_bin)
        with prom:
            fleet = prom.wait_for_samples('vllm:num_requests_running{job="vllm"}')
            assert fleet[0]["metric"]["traffic_class"] == "chat" and fleet[0]["metric"]["spec_mode"] == "off"
            assert fleet[0]["metric"]["exported_spec_mode"] == "eagle3"  # scraped label renamed, not mixed
            assert len(prom.wait_for_samples('up{job="vllm"}')) == 1
            sim = prom.wait_for_samples('vllm:num_requests_running{job="specwatch-sim"}')
            assert sim[0]["metric"]["spec_mode"] == "eagle3"
    finally:
        srv.shutdown()
        srv.server_close()
