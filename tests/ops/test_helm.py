"""The Helm chart (deploy/helm/specwatch): `helm lint --strict` and `helm template` with the real helm binary,
every rendered manifest validated against the Kubernetes JSON schemas (kubernetes-validate, strict: an
unknown field is an error) for the oldest and the newest Kubernetes the chart supports, and what a
deployment needs checked on the rendered objects: one worker Deployment per queue group, probes and
resources on every container, every secret from the Secret, the ServiceMonitor on the API's /metrics.
The probes are then run against the real processes started with the rendered arguments and environment."""

from __future__ import annotations

import base64
import copy
import os
import re
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import kubernetes_validate.utils as kv
import pytest
import typer
import yaml

from tests.support.deadline import deadline
from tests.support.procs import Proc, free_port, wait_for_http

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "specwatch"
CI_VALUES = CHART / "ci" / "test-values.yaml"
RELEASE = "sw"
FULL = "sw-specwatch"
SECRET_SETTINGS = {"SPECWATCH_SECRET_KEY", "SPECWATCH_DATABASE_URL", "SPECWATCH_REDIS_URL",
                   "SPECWATCH_DATABASE_READ_URL", "SPECWATCH_AUTH_PROXY_SECRET", "SPECWATCH_DASHBOARD_API_TOKEN"}
REQUIRED_SECRETS = {"SPECWATCH_SECRET_KEY", "SPECWATCH_DATABASE_URL", "SPECWATCH_REDIS_URL"}
KUBE_VERSIONS = ("1.25.0", kv.latest_version())  # Chart.yaml's kubeVersion floor, and the newest schema


def _helm(helm_bin: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELM_")}
    return subprocess.run([helm_bin, *args], check=False, capture_output=True, text=True, timeout=deadline(300),
                          env={**env, "HELM_CACHE_HOME": "/nonexistent", "HELM_CONFIG_HOME": "/nonexistent"})


def _template(helm_bin: str, *args: str) -> list[dict]:
    res = _helm(helm_bin, "template", RELEASE, str(CHART), "--namespace", "specwatch", *args)
    assert res.returncode == 0, res.stderr
    return [d for d in yaml.safe_load_all(res.stdout) if d]


def _by(docs: list[dict], kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _containers(deploy: dict, init: bool = False) -> list[dict]:
    spec = deploy["spec"]["template"]["spec"]
    return spec["containers"] + (spec.get("initContainers", []) if init else [])


@pytest.fixture(scope="module")
def rendered(helm_bin) -> list[dict]:
    return _template(helm_bin, "-f", str(CI_VALUES))


@pytest.fixture(scope="module")
def values() -> dict:
    return yaml.safe_load((CHART / "values.yaml").read_text())


@pytest.fixture(scope="module")
def cli() -> click.Group:
    from backend.cli import _register, app

    if not app.registered_commands:
        _register()
    return typer.main.get_command(app)


def _worker_deploys(docs: list[dict]) -> dict[str, dict]:
    return {d["metadata"]["labels"]["specwatch.io/queue-group"]: d for d in _by(docs, "Deployment").values()
            if d["metadata"]["labels"].get("app.kubernetes.io/component") == "worker"}


# --- helm itself --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra", [["-f", "ci/test-values.yaml"], ["--set", "secret.existingSecret=mine"]])
def test_helm_lint_strict(helm_bin, extra):
    res = _helm(helm_bin, "lint", "--strict", str(CHART), *[str(CHART / e) if e.startswith("ci/") else e for e in extra])
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 chart(s) failed" in res.stdout and "[ERROR]" not in res.stdout and "[WARNING]" not in res.stdout


def test_chart_versions_and_image(values, rendered):
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert chart["apiVersion"] == "v2" and chart["appVersion"] == project["version"]
    images = {c["image"] for d in _by(rendered, "Deployment").values() for c in _containers(d, init=True)}
    assert images == {f"specwatch:{project['version']}"}
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["specwatch"]' in dockerfile  # so a container's args are specwatch's arguments
    uid = int(re.search(r"--uid (\d+)", dockerfile).group(1))
    for d in _by(rendered, "Deployment").values():
        assert d["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == uid


# --- the rendered manifests are valid Kubernetes objects -----------------------------------------------------

@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_every_manifest_validates_against_the_kubernetes_schemas(rendered, version):
    kinds = set()
    for doc in rendered:
        kinds.add(doc["kind"])
        if doc["kind"] == "ServiceMonitor":  # a CRD: checked in test_service_monitor_scrapes_the_api
            continue
        kv.validate(doc, version, strict=True)
    assert kinds == {"ConfigMap", "Secret", "Service", "Deployment", "ServiceMonitor"}  # Ingress: test_ingress


def test_the_validator_is_strict(rendered):
    """A typo in a container field or a wrong type fails validation (the check above really checks)."""
    api = copy.deepcopy(_by(rendered, "Deployment")[f"{FULL}-api"])
    api["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {"httpGet": {"path": "/", "port": 80}}
    with pytest.raises(kv.ValidationError):
        kv.validate(api, KUBE_VERSIONS[-1], strict=True)
    api = copy.deepcopy(_by(rendered, "Deployment")[f"{FULL}-api"])
    api["spec"]["replicas"] = "two"
    with pytest.raises(kv.ValidationError):
        kv.validate(api, KUBE_VERSIONS[-1], strict=True)


# --- the parts --------------------------------------------------------------------------------------------

def test_api_dashboard_beat_and_one_worker_per_queue_group(rendered, values, cli):
    from tests.ops.test_compose import queue_groups

    groups = queue_groups()
    from backend.queues import queue_names, resolve_queues

    deploys = _by(rendered, "Deployment")
    workers = _worker_deploys(rendered)
    assert set(workers) == set(values["workers"]) == set(groups) == {"collect", "compute", "deliver", "reports"}
    assert set(deploys) == {f"{FULL}-api", f"{FULL}-dashboard", f"{FULL}-beat",
                            *(f"{FULL}-worker-{g}" for g in values["workers"])}
    consumed = []
    for group, d in workers.items():
        (c,) = _containers(d)
        args = c["args"]
        assert args[0] == "worker"
        cli.commands["worker"].make_context("worker", args[1:])  # a real `specwatch worker` command line
        spec = args[args.index("--queues") + 1]
        assert spec == group  # the Deployment serves its group
        consumed += resolve_queues(spec)
    assert sorted(consumed) == sorted(set(consumed)), "a queue is consumed by two Deployments"
    assert set(consumed) == set(queue_names())
    assert "collect" in resolve_queues("collect") and "outbox" not in resolve_queues("collect")
    for name in ("api", "dashboard", "beat"):
        (c,) = _containers(deploys[f"{FULL}-{name}"])
        cli.commands[c["args"][0]].make_context(c["args"][0], c["args"][1:])
    beat = deploys[f"{FULL}-beat"]
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"]["type"] == "Recreate"


def test_queue_groups_are_values(helm_bin, tmp_path):
    """Groups come from values: two groups give two worker Deployments with those queues."""
    path = tmp_path / "groups.yaml"
    path.write_text(yaml.safe_dump({"workers": {
        "collect": {"queues": ["collect"], "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}},
        "rest": {"queues": ["compute", "deliver", "reports"], "concurrency": 3,
                 "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}}}))
    docs = _template(helm_bin, "-f", str(CI_VALUES), "-f", str(path))
    workers = _worker_deploys(docs)
    assert set(workers) == {"collect", "compute", "deliver", "reports", "rest"}  # values merge per key
    args = workers["rest"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["worker", "--queues", "compute,deliver,reports", "--concurrency", "3"]


def test_a_sharded_collection(helm_bin, tmp_path):
    """A collection sharded in two: two collect groups, each with its own SPECWATCH_SHARD_INDEX (the chart's
    per-group env), the count in the shared config; valid objects, and settings the workers accept."""
    from backend.config import Settings

    res = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    path = tmp_path / "shards.yaml"
    path.write_text(yaml.safe_dump({"config": {"SPECWATCH_SHARD_COUNT": 2}, "workers": {
        "collect": None,
        **{f"collect-{i}": {"queues": ["collect"], "env": {"SPECWATCH_SHARD_INDEX": str(i)}, "resources": res}
           for i in range(2)}}}))
    docs = _template(helm_bin, "-f", str(CI_VALUES), "-f", str(path))
    workers = _worker_deploys(docs)
    assert set(workers) == {"collect-0", "collect-1", "compute", "deliver", "reports"}
    config = _by(docs, "ConfigMap")[FULL]["data"]
    for i in range(2):
        d = workers[f"collect-{i}"]
        kv.validate(d, KUBE_VERSIONS[-1], strict=True)
        env = {k: e["value"] for k, e in _env(_containers(d)[0]).items() if "value" in e}
        s = Settings(_env_file=None, shard_count=int(config["SPECWATCH_SHARD_COUNT"]),
                     shard_index=int(env["SPECWATCH_SHARD_INDEX"]))
        assert (s.shard_index, s.shard_count) == (i, 2)
    assert "SPECWATCH_SHARD_INDEX" not in _env(_containers(workers["compute"])[0])


def test_probes_and_resources_on_every_container(rendered):
    for name, d in _by(rendered, "Deployment").items():
        for c in _containers(d, init=True):
            for part in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(c["resources"].get(part, {})), f"{name}/{c['name']}: {part}"
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
        for c in _containers(d):
            assert c.get("livenessProbe"), f"{name}/{c['name']} has no liveness probe"
            if c.get("ports"):  # served: not sent traffic before it is ready
                assert c.get("readinessProbe") and c.get("startupProbe"), f"{name}/{c['name']}"
                port_names = {p["name"] for p in c["ports"]}
                for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
                    assert c[kind]["httpGet"]["port"] in port_names
    deploys = _by(rendered, "Deployment")
    api = _containers(deploys[f"{FULL}-api"])[0]
    assert api["readinessProbe"]["httpGet"]["path"] == "/api/v1/ready"
    assert api["livenessProbe"]["httpGet"]["path"] == "/api/v1/health"
    assert [c["args"] for c in deploys[f"{FULL}-api"]["spec"]["template"]["spec"]["initContainers"]] == [["migrate"]]
    for name in ("dashboard", "beat", *(f"worker-{g}" for g in ("collect", "compute", "deliver", "reports"))):
        (wait,) = deploys[f"{FULL}-{name}"]["spec"]["template"]["spec"]["initContainers"]
        assert f"http://{FULL}-api:8000/api/v1/ready" in wait["command"][-1], name


def _env(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def test_every_secret_comes_from_the_secret(rendered):
    secret = _by(rendered, "Secret")[FULL]
    ci = yaml.safe_load(CI_VALUES.read_text())["secret"]["values"]
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == ci
    config = _by(rendered, "ConfigMap")[FULL]["data"]
    assert not SECRET_SETTINGS & set(config)
    for name, d in _by(rendered, "Deployment").items():
        for c in _containers(d, init=True):
            if c["name"] == "wait-for-api":
                continue
            env = _env(c)
            assert REQUIRED_SECRETS <= set(env), f"{name}/{c['name']}"
            for key, e in env.items():
                if key in SECRET_SETTINGS:
                    ref = e["valueFrom"]["secretKeyRef"]
                    assert ref["name"] == FULL and ref["key"] == key, f"{name}/{c['name']}: {key}"
                    assert ref.get("optional", False) is (key not in REQUIRED_SECRETS)
                else:
                    assert e.get("value") not in ci.values(), f"{name}/{c['name']}: {key} holds a secret"
            assert c["envFrom"] == [{"configMapRef": {"name": FULL}}]
    for doc in rendered:  # no secret value anywhere but in the Secret (base64 there)
        if doc["kind"] != "Secret":
            text = yaml.safe_dump(doc)
            assert not [v for v in ci.values() if v in text], doc["metadata"]["name"]


def test_an_existing_secret(helm_bin):
    docs = _template(helm_bin, "--set", "secret.existingSecret=mine")
    assert not _by(docs, "Secret")
    refs = {e["valueFrom"]["secretKeyRef"]["name"] for d in _by(docs, "Deployment").values()
            for c in _containers(d, init=True) for e in c.get("env", []) if "valueFrom" in e}
    assert refs == {"mine"}
    (sm,) = _by(docs, "ServiceMonitor").values()
    assert sm["spec"]["endpoints"][0]["authorization"]["credentials"] == {"name": "mine", "key": "metrics-token"}


@pytest.mark.parametrize(("args", "says"), [
    ([], "set secret.existingSecret"),
    (["--set", "secret.values.SPECWATCH_SECRET_KEY=k", "--set", "secret.values.SPECWATCH_DATABASE_URL=u"],
     "secret.values.SPECWATCH_REDIS_URL is required"),
    (["--set", "secret.existingSecret=mine", "--set", "config.SPECWATCH_SECRET_KEY=k"],
     "invalid propertyName 'SPECWATCH_SECRET_KEY'"),
    (["--set", "secret.existingSecret=mine", "--set", "config.SPECWATCH_DATABASE_URL=postgresql://u:p@h/d"],
     "invalid propertyName 'SPECWATCH_DATABASE_URL'"),
    (["--set", "secret.existingSecret=mine", "--set", "config.PROMETHEUS_URL=x"], "invalid propertyName"),
    (["--set", "secret.existingSecret=mine", "--set", "config.SPECWATCH_API_BASE_URL=http://elsewhere"],
     "invalid propertyName 'SPECWATCH_API_BASE_URL'"),
    (["--set", "secret.existingSecret=mine", "--set", "workers.deliver.env.SPECWATCH_SECRET_KEY=k"],
     "invalid propertyName 'SPECWATCH_SECRET_KEY'"),
    (["--set", "secret.existingSecret=mine", "--set", "workers.collect.queues=null"], "workers/collect"),
    (["--set", "secret.existingSecret=mine", "--set", "api.replica=3"], "'replica' not allowed"),
])
def test_refuses_what_would_not_run_or_would_leak(helm_bin, args, says):
    """No secret at all, a missing required one, a secret in the plain ConfigMap or a worker's env, a name
    that is no setting, the processes' wiring, a worker without queues, a misspelt value: `helm template`
    fails and says why."""
    res = _helm(helm_bin, "template", RELEASE, str(CHART), *args)
    assert res.returncode != 0 and says in res.stderr, res.stderr


def test_settings_reach_every_process(helm_bin):
    """A setting in values.config (an existing Prometheus, here) is in the ConfigMap every container reads;
    the ConfigMap's names are real settings."""
    from backend.config import Settings
    from dashboard.settings import ENVIRONMENT

    docs = _template(helm_bin, "--set", "secret.existingSecret=mine",
                     "--set", "config.SPECWATCH_PROMETHEUS_URL=http://my-prom:9090",
                     "--set-string", "config.SPECWATCH_EXTRA_MATCHERS=namespace=\"prod\"")
    config = _by(docs, "ConfigMap")[FULL]["data"]
    assert config["SPECWATCH_PROMETHEUS_URL"] == "http://my-prom:9090"
    assert config["SPECWATCH_EXTRA_MATCHERS"] == 'namespace="prod"'
    for key in config:
        assert key.removeprefix("SPECWATCH_").lower() in Settings.model_fields or key in ENVIRONMENT, key
    for d in _by(docs, "Deployment").values():
        for c in _containers(d, init=True):
            if c["name"] != "wait-for-api":
                assert c["envFrom"] == [{"configMapRef": {"name": FULL}}]
    dash = _env(_containers(_by(docs, "Deployment")[f"{FULL}-dashboard"])[0])
    assert dash["SPECWATCH_API_BASE_URL"]["value"] == f"http://{FULL}-api:8000"
    assert dash["SPECWATCH_DASHBOARD_AUTH"]["value"] == "token"
    assert dash["SPECWATCH_DASHBOARD_SECURE_COOKIE"]["value"] == "true"


def test_config_values_of_every_yaml_type_reach_the_settings(helm_bin, tmp_path, monkeypatch):
    """Numbers and booleans written unquoted in a values file arrive as the settings' values (YAML numbers
    reach the templates as floats: 16777216 must not become 1.6777216e+07)."""
    from backend.config import Settings

    path = tmp_path / "config.yaml"
    path.write_text("config:\n  SPECWATCH_SCRAPE_MAX_BODY_BYTES: 16777216\n"
                    "  SPECWATCH_FLEET_SNAPSHOT_REFRESH_FRACTION: 0.005\n  SPECWATCH_API_ACCESS_LOG: false\n"
                    "  SPECWATCH_COLLECT_INTERVAL_SECONDS: 30\n")
    docs = _template(helm_bin, "-f", str(CI_VALUES), "-f", str(path))
    config = _by(docs, "ConfigMap")[FULL]["data"]
    secrets = yaml.safe_load(CI_VALUES.read_text())["secret"]["values"]
    for key in [k for k in os.environ if k.startswith("SPECWATCH_")]:
        monkeypatch.delenv(key)
    for key, value in {**config, **{k: v for k, v in secrets.items() if k.startswith("SPECWATCH_")}}.items():
        monkeypatch.setenv(key, value)
    s = Settings(_env_file=None)
    assert s.scrape_max_body_bytes == 16777216 and s.fleet_snapshot_refresh_fraction == 0.005
    assert s.api_access_log is False and s.collect_interval_seconds == 30
    assert s.environment == "prod" and s.auth_mode == "token" and s.secret_key == secrets["SPECWATCH_SECRET_KEY"]


def test_service_monitor_scrapes_the_api(rendered, helm_bin):
    from backend.api.routes import metrics

    services = _by(rendered, "Service")
    api_svc = services[f"{FULL}-api"]
    (sm,) = _by(rendered, "ServiceMonitor").values()
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(sm["spec"]) == {"selector", "endpoints"}
    selector = sm["spec"]["selector"]["matchLabels"]
    assert selector.items() <= api_svc["metadata"]["labels"].items()
    assert not selector.items() <= services[f"{FULL}-dashboard"]["metadata"]["labels"].items()
    (ep,) = sm["spec"]["endpoints"]
    assert set(ep) == {"port", "path", "interval", "scrapeTimeout", "authorization"}
    assert ep["port"] in {p["name"] for p in api_svc["spec"]["ports"]}
    assert ep["path"] == "/metrics" and "/metrics" in {r.path for r in metrics.router.routes}
    assert re.fullmatch(r"\d+[smh]", ep["interval"]) and re.fullmatch(r"\d+[smh]", ep["scrapeTimeout"])
    assert ep["authorization"] == {"type": "Bearer", "credentials": {"name": FULL, "key": "metrics-token"}}
    api_pods = _by(rendered, "Deployment")[f"{FULL}-api"]["spec"]["template"]["metadata"]["labels"]
    assert api_svc["spec"]["selector"].items() <= api_pods.items()
    assert not _by(_template(helm_bin, "-f", str(CI_VALUES), "--set", "serviceMonitor.enabled=false"), "ServiceMonitor")


# --- the probes against the real processes ------------------------------------------------------------------

def _process_env(container: dict, secrets: dict[str, str], config: dict[str, str], **over: str) -> dict[str, str]:
    """The environment Kubernetes would give the container: the ConfigMap, the Secret's keys, the values."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECWATCH_")}
    env.update(config)
    for key, e in _env(container).items():
        if "value" in e:
            env[key] = e["value"]
        elif e["valueFrom"]["secretKeyRef"]["key"] in secrets:
            env[key] = secrets[e["valueFrom"]["secretKeyRef"]["key"]]
    env.update(over)
    return env


def _specwatch(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "backend.cli", *args]


def _probe_url(container: dict, kind: str, port: int) -> str:
    return f"http://127.0.0.1:{port}{container[kind]['httpGet']['path']}"


def test_api_and_dashboard_probes_answer(rendered, fresh_db_url, redis_url, tmp_path):
    """The API and the dashboard, started with their rendered arguments and environment (the database and
    the ports are this test's), answer their startup, liveness and readiness probes."""
    deploys = _by(rendered, "Deployment")
    config = _by(rendered, "ConfigMap")[FULL]["data"]
    ci = yaml.safe_load(CI_VALUES.read_text())["secret"]["values"]
    secrets = {**ci, "SPECWATCH_DATABASE_URL": fresh_db_url, "SPECWATCH_REDIS_URL": redis_url}
    api_c = _containers(deploys[f"{FULL}-api"])[0]
    dash_c = _containers(deploys[f"{FULL}-dashboard"])[0]
    api_port, dash_port = free_port(), free_port()
    common = {"SPECWATCH_DATA_DIR": str(tmp_path / "data"), "SPECWATCH_ALERT_RULES_FILE": str(ROOT / "alerts.example.yaml")}
    assert api_c["args"] == ["api", "--host", "0.0.0.0", "--port", "8000"]
    assert dash_c["args"] == ["dashboard", "--host", "0.0.0.0", "--port", "8050"]
    api_args = ["api", "--host", "127.0.0.1", "--port", str(api_port)]  # loopback and a free port here
    api = Proc("api", _specwatch(api_args), tmp_path / "api.log", cwd=ROOT,
               env=_process_env(api_c, secrets, config, **common))
    dash_args = ["dashboard", "--host", "127.0.0.1", "--port", str(dash_port)]
    dash = Proc("dashboard", _specwatch(dash_args), tmp_path / "dashboard.log", cwd=ROOT,
                env=_process_env(dash_c, secrets, config, **common,
                                 SPECWATCH_API_BASE_URL=f"http://127.0.0.1:{api_port}"))
    try:
        api.start()
        dash.start()
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            wait_for_http(_probe_url(api_c, kind, api_port), timeout=120, proc=api)
            wait_for_http(_probe_url(dash_c, kind, dash_port), timeout=120, proc=dash)
    finally:
        api.stop()
        dash.stop()


def test_worker_liveness_probe_answers(rendered, redis_url, fresh_db_url, tmp_path):
    """A worker started with the collect group's rendered arguments answers its liveness command (a broker
    ping addressed to celery@<hostname>); nothing answers it for another name."""
    from tests.support.stack import flush_redis

    flush_redis(redis_url)
    deploy = _worker_deploys(rendered)["collect"]
    c = _containers(deploy)[0]
    config = _by(rendered, "ConfigMap")[FULL]["data"]
    ci = yaml.safe_load(CI_VALUES.read_text())["secret"]["values"]
    secrets = {**ci, "SPECWATCH_DATABASE_URL": fresh_db_url, "SPECWATCH_REDIS_URL": redis_url}
    host = socket.gethostname()
    env = _process_env(c, secrets, config, SPECWATCH_DATA_DIR=str(tmp_path / "data"), HOSTNAME=host,
                       SPECWATCH_ALERT_RULES_FILE=str(ROOT / "alerts.example.yaml"),
                       PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    worker = Proc("worker", _specwatch(c["args"]), tmp_path / "worker.log", cwd=ROOT, env=env)
    probe = c["livenessProbe"]["exec"]["command"]
    try:
        worker.start()
        ok = False
        for _ in range(int(deadline(12))):  # each ping waits up to its own --timeout for the answer
            res = subprocess.run(probe, check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=deadline(120))
            if res.returncode == 0:
                ok = True
                break
            assert worker.alive(), worker.tail()
        assert ok, worker.tail()
        other = subprocess.run(probe, check=False, cwd=ROOT, env={**env, "HOSTNAME": "not-this-pod"},
                               capture_output=True, text=True, timeout=deadline(120))
        assert other.returncode != 0
    finally:
        worker.stop()


@pytest.mark.parametrize("mode", ["trusted-header", "none"])
def test_dashboard_probes_answer_in_every_login_mode(helm_bin, mode, tmp_path):
    """The dashboard's probe path needs no session in the other login modes either (the API need not be up
    for the dashboard to be alive)."""
    docs = _template(helm_bin, "-f", str(CI_VALUES), "--set", f"dashboard.auth={mode}")
    c = _containers(_by(docs, "Deployment")[f"{FULL}-dashboard"])[0]
    assert _env(c)["SPECWATCH_DASHBOARD_AUTH"]["value"] == mode
    config = _by(docs, "ConfigMap")[FULL]["data"]
    secrets = yaml.safe_load(CI_VALUES.read_text())["secret"]["values"]
    port = free_port()
    dash = Proc("dashboard", _specwatch(["dashboard", "--host", "127.0.0.1", "--port", str(port)]),
                tmp_path / "dashboard.log", cwd=ROOT,
                env=_process_env(c, secrets, config, SPECWATCH_DATA_DIR=str(tmp_path / "data"),
                                 SPECWATCH_API_BASE_URL=f"http://127.0.0.1:{free_port()}"))
    try:
        dash.start()
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            wait_for_http(_probe_url(c, kind, port), timeout=120, proc=dash)
    finally:
        dash.stop()


def test_beat_liveness_probe(rendered, redis_url, fresh_db_url, tmp_path):
    """Beat started with its rendered arguments (its data folder here a temporary one) passes its liveness
    command once it has written its schedule file; a schedule file older than the probe allows fails it."""
    from tests.support.stack import flush_redis, wait_until

    flush_redis(redis_url)
    c = _containers(_by(rendered, "Deployment")[f"{FULL}-beat"])[0]
    assert c["args"] == ["beat", "--schedule-file", "/data/celerybeat-schedule"]
    data = tmp_path / "data"
    data.mkdir()
    config = _by(rendered, "ConfigMap")[FULL]["data"]
    ci = yaml.safe_load(CI_VALUES.read_text())["secret"]["values"]
    secrets = {**ci, "SPECWATCH_DATABASE_URL": fresh_db_url, "SPECWATCH_REDIS_URL": redis_url}
    env = _process_env(c, secrets, config, SPECWATCH_DATA_DIR=str(data),
                       SPECWATCH_ALERT_RULES_FILE=str(ROOT / "alerts.example.yaml"))
    (shell, flag, script) = c["livenessProbe"]["exec"]["command"]
    assert "/data" in script
    probe = [shell, flag, script.replace("/data", str(data))]

    def passes() -> bool:
        return subprocess.run(probe, check=False, capture_output=True, timeout=deadline(60)).returncode == 0

    assert not passes()  # no schedule file yet
    beat = Proc("beat", _specwatch(["beat", "--schedule-file", str(data / "celerybeat-schedule")]),
                tmp_path / "beat.log", cwd=ROOT, env=env)
    try:
        beat.start()
        wait_until(passes, timeout=120, what="beat's schedule file", procs=(beat,))
    finally:
        beat.stop()
    for f in data.glob("celerybeat-schedule*"):
        os.utime(f, (f.stat().st_atime, f.stat().st_mtime - 11 * 60))  # as if beat had hung 11 minutes ago
    assert not passes()


def test_ingress(helm_bin):
    """Off by default; on, a valid Ingress to the dashboard (and the API under /api/) with TLS; without a
    host it refuses."""
    assert not _by(_template(helm_bin, "-f", str(CI_VALUES)), "Ingress")
    docs = _template(helm_bin, "-f", str(CI_VALUES), "--set", "ingress.enabled=true", "--set",
                     "ingress.host=sw.example.com", "--set", "ingress.tlsSecret=sw-tls", "--set", "ingress.api=true")
    (ing,) = _by(docs, "Ingress").values()
    for version in KUBE_VERSIONS:
        kv.validate(ing, version, strict=True)
    assert ing["spec"]["tls"] == [{"hosts": ["sw.example.com"], "secretName": "sw-tls"}]
    services = _by(docs, "Service")
    routes = {p["path"]: p["backend"]["service"] for p in ing["spec"]["rules"][0]["http"]["paths"]}
    assert routes == {"/api/": {"name": f"{FULL}-api", "port": {"name": "http"}},
                      "/": {"name": f"{FULL}-dashboard", "port": {"name": "http"}}}
    for svc in routes.values():
        assert "http" in {p["name"] for p in services[svc["name"]]["spec"]["ports"]}
    res = _helm(helm_bin, "template", RELEASE, str(CHART), "-f", str(CI_VALUES), "--set", "ingress.enabled=true")
    assert res.returncode != 0 and "ingress.host is required" in res.stderr
