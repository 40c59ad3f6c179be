"""docker-compose.yml, Dockerfile and deploy/prometheus.yml: valid, complete, and consistent with the CLI;
every setting reaches every process, and an existing Prometheus can replace the bundled one."""

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
WORKERS = ("worker-collect", "worker-compute", "worker-deliver", "worker-reports")
REQUIRED = {"postgres", "redis", "prometheus", "migrate", *WORKERS, "beat", "api", "dashboard", "sim"}
GATED = (*WORKERS, "beat", "api")  # must wait for the one-shot migrate to complete
# set by docker-compose.yml itself: the addresses inside the project, not taken from .env
COMPOSE_OWN = {"SPECWATCH_BIND_ADDRESS", "SPECWATCH_ENV_FILE"}  # compose's own variables, not settings
WIRING = {"SPECWATCH_DATABASE_URL", "SPECWATCH_REDIS_URL", "SPECWATCH_API_HOST", "SPECWATCH_DASHBOARD_HOST",
          "SPECWATCH_API_BASE_URL", "SPECWATCH_DATA_DIR"}


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


def _render(docker_compose_bin: str, tmp_path: Path, env: dict[str, str], *extra: str,
            env_file: str = "") -> subprocess.CompletedProcess:
    """`docker-compose config` with exactly these variables and this env file (content), used both ways, as
    with `.env`: for the interpolation of docker-compose.yml and, named by SPECWATCH_ENV_FILE in it, as the
    processes' env_file (a stray .env in the checkout cannot help)."""
    path = tmp_path / "test.env"
    path.write_text(f"SPECWATCH_ENV_FILE={path}\n{env_file}")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SPECWATCH_", "COMPOSE_", "POSTGRES_"))}
    return subprocess.run([docker_compose_bin, "--env-file", str(path), "-f", str(COMPOSE), *extra, "config"],
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
    assert services["prometheus"].get("profiles") == ["prometheus", "demo"]
    assert all("profiles" not in s for n, s in services.items() if n not in ("sim", "prometheus"))


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
    for name in ("postgres", "redis", "prometheus", *WORKERS, "api", "dashboard", "sim"):
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
        for key in set(svc["environment"]) - COMPOSE_OWN:
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


# --- settings from the env file, an existing Prometheus, what the bundled Prometheus mounts ---------------

BASE = f"SPECWATCH_SECRET_KEY={SECRET}\nPOSTGRES_PASSWORD=pw\n"


def _enabled(rendered: dict, profiles: set[str]) -> set[str]:
    """The services `docker-compose up` starts with these profiles active: compose's rule (a service
    without `profiles` always, one with them when one is active). docker-compose 1.x's `config` lists
    every service with its profiles, so the rule is applied to what it rendered."""
    return {n for n, s in rendered["services"].items() if not s.get("profiles") or profiles & set(s["profiles"])}


def _profiles(env_text: str) -> set[str]:
    values = [line.split("=", 1)[1] for line in env_text.splitlines() if line.startswith("COMPOSE_PROFILES=")]
    return {p.strip() for p in values[-1].split(",") if p.strip()} if values else set()


@pytest.mark.parametrize("where", ["env file", "environment"])
def test_an_existing_prometheus_reaches_every_process(docker_compose_bin, tmp_path, where):
    """SPECWATCH_PROMETHEUS_URL from .env or from the shell reaches every specwatch process; with the
    profiles emptied the bundled Prometheus is not started, and nothing depends on it."""
    url = "http://my-prom:9090"
    env_text = BASE + "COMPOSE_PROFILES=\n" + (f"SPECWATCH_PROMETHEUS_URL={url}\n" if where == "env file" else "")
    res = _render(docker_compose_bin, tmp_path, {"SPECWATCH_PROMETHEUS_URL": url} if where == "environment" else {},
                  env_file=env_text)
    assert res.returncode == 0, res.stderr
    rendered = yaml.safe_load(res.stdout)
    specwatch = _specwatch_services(rendered)
    assert set(GATED) | {"migrate", "dashboard", "sim"} <= set(specwatch)
    for name, svc in specwatch.items():
        assert svc["environment"]["SPECWATCH_PROMETHEUS_URL"] == url, name
        assert "prometheus" not in svc.get("depends_on", {}), name
    enabled = _enabled(rendered, _profiles(env_text))
    assert "prometheus" not in enabled and "sim" not in enabled
    assert {"postgres", "redis", "migrate", *WORKERS, "beat", "api", "dashboard"} <= enabled


def test_the_bundled_prometheus_by_default(docker_compose_bin, tmp_path):
    """deploy/env.example (copied to .env) runs the bundled Prometheus and points specwatch at it; the demo
    profile runs it too, with the simulator."""
    example = (ROOT / "deploy" / "env.example").read_text()
    env_text = example.replace("SPECWATCH_SECRET_KEY=\n", f"SPECWATCH_SECRET_KEY={SECRET}\n").replace(
        "POSTGRES_PASSWORD=\n", "POSTGRES_PASSWORD=pw\n")
    res = _render(docker_compose_bin, tmp_path, {}, env_file=env_text)
    assert res.returncode == 0, res.stderr
    rendered = yaml.safe_load(res.stdout)
    assert _profiles(env_text) == {"prometheus"}
    assert "prometheus" in _enabled(rendered, _profiles(env_text))
    assert {"prometheus", "sim"} <= _enabled(rendered, {"demo"})
    for name, svc in _specwatch_services(rendered).items():
        assert svc["environment"]["SPECWATCH_PROMETHEUS_URL"] == "http://prometheus:9090", name


def _every_setting_name() -> set[str]:
    from backend.config import Settings
    from dashboard.settings import ENVIRONMENT

    names = {f"SPECWATCH_{f.upper()}" for f in Settings.model_fields} | set(ENVIRONMENT)
    example = (ROOT / "deploy" / "env.example").read_text()
    names |= {m.split("=", 1)[0].lstrip("# ").strip() for m in example.splitlines()
              if m.lstrip("# ").startswith("SPECWATCH_") and "=" in m}
    return names


def test_every_setting_in_the_env_file_reaches_every_process(docker_compose_bin, tmp_path):
    """Each SPECWATCH_* setting (the settings class, the dashboard's variables, deploy/env.example) written in
    the env file arrives unchanged in every specwatch process, except the project's own wiring."""
    names = _every_setting_name()
    assert {"SPECWATCH_EXTRA_MATCHERS", "SPECWATCH_GPU_HOUR_PRICE", "SPECWATCH_PROMETHEUS_URL"} <= names
    values = {n: f"v-{n.lower()}" for n in names if n != "SPECWATCH_SECRET_KEY"}
    values["SPECWATCH_EXTRA_MATCHERS"] = 'namespace="prod",cluster="eu1"'
    values["SPECWATCH_GPU_HOUR_PRICE"] = '{"*": 2.5}'
    values["SPECWATCH_BIND_ADDRESS"] = "127.0.0.2"  # compose's own: where the ports are published
    env_text = BASE + "".join(f"{k}={v}\n" for k, v in values.items())
    res = _render(docker_compose_bin, tmp_path, {}, "--profile", "demo", env_file=env_text)
    assert res.returncode == 0, res.stderr
    rendered = yaml.safe_load(res.stdout)
    for name, svc in _specwatch_services(rendered).items():
        env = svc["environment"]
        for key, value in values.items():
            if key in WIRING:
                assert env[key] != value, f"{name}: {key} is the project's wiring, not .env's"
            else:
                assert env.get(key) == value, f"{name}: {key} = {env.get(key)!r}, .env says {value!r}"
        assert env["SPECWATCH_SECRET_KEY"] == SECRET
    assert _specwatch_services(rendered)["api"]["environment"]["SPECWATCH_REDIS_URL"] == "redis://redis:6379/0"
    assert rendered["services"]["api"]["ports"] == ["127.0.0.2:8000:8000/tcp"]


def test_prometheus_gets_every_file_its_config_reads(compose):
    """deploy/prometheus.yml is mounted, and so is the folder of every file_sd glob it reads (from a folder
    of the repository, which exists)."""
    prom = compose["services"]["prometheus"]
    mounts = {}
    for v in prom["volumes"]:
        source, target = v.split(":")[:2]
        mounts[target] = source
    assert mounts["/etc/prometheus/prometheus.yml"] == "./deploy/prometheus.yml"
    assert "--config.file=/etc/prometheus/prometheus.yml" in prom["command"]
    cfg = yaml.safe_load(PROM_YML.read_text())
    globs = [f for j in cfg["scrape_configs"] for sd in j.get("file_sd_configs", []) for f in sd["files"]]
    globs += cfg.get("rule_files", [])
    assert globs, "deploy/prometheus.yml reads no file_sd files any more: update this test"
    for pattern in globs:
        folder = str(Path(pattern).parent)
        assert folder in mounts, f"{pattern}: {folder} is not mounted into the bundled Prometheus"
        source = mounts[folder]
        assert source.startswith("./") and (ROOT / source).is_dir(), source
    example = yaml.safe_load((ROOT / "deploy" / "targets" / "fleet.yml.example").read_text())
    assert {g["labels"]["__pool_spec_mode"] for g in example} == {"eagle3", "off"}


def queue_groups() -> dict[str, tuple[str, ...]]:
    """The queue groups of backend.queues (what `specwatch worker --queues GROUP` serves)."""
    queues = pytest.importorskip("backend.queues", reason="no queue groups (backend.queues) in this checkout")
    return queues.GROUPS


def test_one_worker_per_queue_group(compose, cli):
    """One worker service per queue group, each serving exactly its group; together they consume every
    queue, each queue once; the groups are the Helm chart's."""
    groups = queue_groups()
    from backend.queues import queue_names, resolve_queues

    served = {}
    for name in WORKERS:
        args = compose["services"][name]["command"]
        spec = args[args.index("--queues") + 1]
        assert spec == name.removeprefix("worker-"), f"{name} serves {spec}"
        served[spec] = resolve_queues(spec)
    assert set(served) == set(groups)
    every = [q for qs in served.values() for q in qs]
    assert sorted(every) == sorted(set(every)), "a queue is consumed by two workers"
    assert set(every) == set(queue_names())
    assert "outbox" not in served["collect"] and "collect" in served["collect"]
    chart = yaml.safe_load((ROOT / "deploy" / "helm" / "specwatch" / "values.yaml").read_text())
    assert {g: w["queues"] for g, w in chart["workers"].items()} == {g: [g] for g in groups}
