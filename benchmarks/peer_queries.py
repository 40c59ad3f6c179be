"""The four dashboard questions of the peer benchmark, asked of Prometheus (PromQL over HTTP, JSON decoded,
as a Grafana panel would) and of specwatch (its HTTP API: /acceptance/bulk and /latency, JSON decoded the
same way: orjson on both sides, so the client's decoding weighs little on either), plus the agreement
checks.

Both sides are asked through `KeepAlive`: one persistent HTTP/1.1 connection per server, as a dashboard's
data source keeps one (Grafana's does), on the standard library's http.client. A client that opened a
connection per request, or spent a millisecond of its own per call (requests does, here), would add the
same constant to both sides and so understate the ratio of the faster one.

Windows are the same on both sides: a point at t covers (t - w, t]. specwatch's 1-minute bucket holds the
exact increase of the raw samples in it (the back-fill's default, SPECWATCH_PROMETHEUS_INCREASES=raw);
Prometheus's side sums `increase(x[1m])` per minute, `sum_over_time(increase(x[1m])[W-1m:1m])`
(Prometheus 2.42 subquery ranges are closed at both ends, hence W - 1m for W/1m points), which
extrapolates each minute's samples to the minute's edges. The natural panel queries (`increase(x[30d])`,
`increase(x[7d])`) are timed too (rows marked *). Every answer is set against the history's own
(benchmarks.peer_truth) as well as against the other side's.
"""

from __future__ import annotations

import http.client
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlencode, urlsplit

import orjson

from backend.config import Settings
from backend.domain.histogram import histogram_quantile
from backend.services import analytics, latency
from backend.services.windows import Range
from benchmarks import peer_truth

BY = "model_name, traffic_class, spec_mode"
ACC, DRAFT = "vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_draft_tokens_total"
ITL = "vllm:inter_token_latency_seconds_bucket"
MAX_POINTS = 11000  # Prometheus refuses a range query with more points per series


class KeepAlive:
    """GET/POST over one persistent HTTP/1.1 connection to `base` (http://host:port), reopened once if the
    server closed it; an answer other than 200 raises."""

    def __init__(self, base: str, timeout: float = 600) -> None:
        u = urlsplit(base)
        self.host, self.port, self.timeout = u.hostname, u.port, timeout
        self.conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, params: dict) -> bytes:
        query = urlencode(params, doseq=True)
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                if method == "GET":
                    self.conn.request("GET", f"{path}?{query}")
                else:
                    self.conn.request(method, path, body=query,
                                      headers={"Content-Type": "application/x-www-form-urlencoded"})
                r = self.conn.getresponse()
                body = r.read()
            except (http.client.RemoteDisconnected, ConnectionError):
                self.close()
                if attempt:
                    raise
                continue
            if r.status != 200:
                raise RuntimeError(f"{method} {path}: HTTP {r.status}: {body[:300]!r}")
            return body
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def prom_range(prom: KeepAlive, promql: str, start: int, end: int, step: int) -> tuple[dict, int]:
    """A range query split into requests of at most MAX_POINTS points: ({labels: {t: v}}, requests)."""
    out: dict[tuple, dict[int, float]] = {}
    n = 0
    t = start
    while t <= end:
        stop = min(end, t + (MAX_POINTS - 1) * step)
        body = prom.request("POST", "/api/v1/query_range", {"query": promql, "start": t, "end": stop, "step": step})
        n += 1
        for s in orjson.loads(body)["data"]["result"]:
            key = tuple(sorted(s["metric"].items()))
            out.setdefault(key, {}).update({int(ts): float(v) for ts, v in s["values"]})
        t = stop + step
    return out, n


def prom_instant(prom: KeepAlive, promql: str, at: int) -> dict:
    body = prom.request("POST", "/api/v1/query", {"query": promql, "time": at})
    return {tuple(sorted(s["metric"].items())): float(s["value"][1])
            for s in orjson.loads(body)["data"]["result"]}


def _ratio(expr_a: str, expr_b: str) -> str:
    return f"({expr_a}) / ({expr_b})"


@dataclass
class Question:
    name: str
    title: str
    prom: Callable[[], object]
    specwatch: Callable[[], object]
    check: Callable[[object, object], str]
    truth: Callable[[], dict]  # the history's own answer (peer_truth), {key: {t: value}} or {key: value}
    prom_values: Callable[[object], dict]  # an answer in the truth's shape
    sw_values: Callable[[object], dict]


def _iso(t: int) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _span(seconds: int) -> str:
    """A window's length for a row title: whole days as "30 d", else hours ("6 h" for --quick)."""
    return f"{seconds // 86400} d" if seconds % 86400 == 0 else f"{seconds / 3600:g} h"


def sw_get(api: KeepAlive, path: str, params: dict) -> dict:
    return orjson.loads(api.request("GET", f"/api/v1{path}", params))


def build(*, prom: KeepAlive, api: KeepAlive, factory, settings: Settings, start: int, end: int, pools: list, models: list[str],
          history: Callable[[], list[peer_truth.PoolHistory]]) -> list[Question]:
    """prom: Prometheus; api: specwatch's HTTP API on the same history (a KeepAlive each); the window is
    (start, end], both multiples of an hour. Both sides are timed over HTTP with the JSON decoded in Python.
    history: the generated history (peer_truth.history), read only for the truth, after the timing."""
    day_minutes = (end - start) // 60
    span = _span(end - start)

    def sw_series(by: str, step: int, rolling: int | None = None):
        """/acceptance/bulk in requests of <= max_points_hard points per series (the API's own cap: 50,000 by
        default, so a 30-day 1-minute series is one request where Prometheus, capped at 11,000, needs 4)."""
        out: dict[tuple, Joined] = {}
        t, n = start, 0
        while t <= end:
            stop = min(end, t + (settings.max_points_hard - 1) * step)
            params = {"by": by, "fields": "acceptance_rate", "start": _iso(t), "end": _iso(stop), "step": f"{step}s"}
            if rolling:
                params["window"] = f"{rolling}s"
            body = sw_get(api, "/acceptance/bulk", params)
            n += 1
            for s in body["series"]:
                key = (s["model_name"], s["traffic_class"], s["spec_mode"])
                out.setdefault(key, Joined()).add(body["t"], s["acceptance_rate"])
            t = stop + step
        return out, n

    def q1_prom():
        return prom_range(prom, _ratio(f"sum by ({BY}) (increase({ACC}[1m]))", f"sum by ({BY}) (increase({DRAFT}[1m]))"),
                          start, end, 60)

    def q3_prom():
        return prom_range(prom, _ratio(f"sum by (model_name) (increase({ACC}[1m]))",
                                      f"sum by (model_name) (increase({DRAFT}[1m]))"), start, end, 60)

    def q2_prom_same():
        inner = f"sum by ({BY}, le) (sum_over_time(increase({ITL}[1m])[{day_minutes - 1}m:1m]))"
        return prom_instant(prom, f"histogram_quantile(0.99, {inner})", end)

    def q2_sw():
        body = sw_get(api, "/latency", {"family": "itl", "q": "0.99", "start": _iso(start), "end": _iso(end)})
        return {(r["pool"]["model_name"], r["pool"]["traffic_class"], r["pool"]["spec_mode"]): r for r in body["rows"]}

    def q4_prom(natural: bool):
        def f(metric):
            if natural:
                return f"sum by ({BY}) (increase({metric}[7d]))"
            return f"sum by ({BY}) (sum_over_time(increase({metric}[1m])[{7 * 1440 - 1}m:1m]))"
        return lambda: prom_range(prom, _ratio(f(ACC), f(DRAFT)), start, end, 3600)

    def q2_prom_natural():
        return prom_instant(prom, f"histogram_quantile(0.99, sum by ({BY}, le) (increase({ITL}[{day_minutes}m])))", end)

    def acc_truth(by: str, step: int, window: int):
        return lambda: peer_truth.acceptance(history(), by=by, start=start, end=end, step=step, window=window)

    def p99_truth():
        return peer_truth.p99_itl(history(), start=start, end=end)

    pool_series = (lambda a: _prom_series(a, 3), lambda a: _sw_series(a, 3))
    model_series = (lambda a: _prom_series(a, 1), lambda a: _sw_series(a, 1))
    p99 = (_prom_p99, _sw_p99)
    week = 7 * 86400
    # The mutual checks report the two sides' difference; the verdict is each side's error against the truth.
    return [
        Question("Q1", f"acceptance per pool, {span} @ 1 min", q1_prom, lambda: sw_series("pool", 60),
                 lambda p, s: _check_series(p[0], s[0], key=_pool_key, tol=None), acc_truth("pool", 60, 60),
                 *pool_series),
        Question("Q2", f"P99 ITL per pool over {span} of 1-min buckets", q2_prom_same, q2_sw,
                 lambda p, s: _check_p99(p, s, tol=None), p99_truth, *p99),
        Question("Q3", f"mixed-traffic acceptance per model, {span} @ 1 min", q3_prom, lambda: sw_series("model", 60),
                 lambda p, s: _check_series(p[0], s[0], key=lambda k: (k[0],), tol=None),
                 acc_truth("model", 60, 60), *model_series),
        Question("Q4", f"7-day rolling acceptance per pool, {span} @ 1 h", q4_prom(False),
                 lambda: sw_series("pool", 3600, week),
                 lambda p, s: _check_series(p[0], s[0], key=_pool_key, tol=None), acc_truth("pool", 3600, week),
                 *pool_series),
        Question("Q2*", "as Q2, panel query increase(itl[30d])", q2_prom_natural, q2_sw,
                 lambda p, s: _check_p99(p, s, tol=None), p99_truth, *p99),
        Question("Q4*", "as Q4, panel query increase(x[7d])", q4_prom(True),
                 lambda: sw_series("pool", 3600, week),
                 lambda p, s: _check_series(p[0], s[0], key=_pool_key, tol=None), acc_truth("pool", 3600, week),
                 *pool_series),
    ]


def _prom_series(answer, n: int) -> dict:
    return {_labels(k)[:n]: pts for k, pts in answer[0].items()}


def _sw_series(answer, n: int) -> dict:
    return {k[:n]: dict(zip(res.t, res.acceptance_rate)) for k, res in answer[0].items()}


def _prom_p99(answer) -> dict:
    return {_labels(k): v for k, v in answer.items()}


def _sw_p99(answer) -> dict:
    return {k: (r["quantiles"][0]["value"] if r["quantiles"] else None) for k, r in answer.items()}


class Joined:
    """The chunks of one series, read as one: unix seconds and values."""

    def __init__(self) -> None:
        self.times: list[str] = []
        self.acceptance_rate: list[float | None] = []

    def add(self, t: list[str], values: list[float | None]) -> None:
        self.times += t
        self.acceptance_rate += values

    @property
    def t(self) -> list[int]:  # parsed when checked, not while timed
        return [int(datetime.fromisoformat(x).timestamp()) for x in self.times]


def _pool_key(k: tuple) -> tuple:
    return k[0], k[1], k[2]


def _labels(key: tuple) -> tuple:
    d = dict(key)
    return d.get("model_name"), d.get("traffic_class"), d.get("spec_mode")


def _check_series(prom: dict, sw: dict, *, key, tol: float | None) -> str:
    worst, compared, missing = 0.0, 0, 0
    for k, res in sw.items():
        pts = prom.get(next((pk for pk in prom if _labels(pk)[: len(key(k))] == key(k)), None), {})
        for t, a in zip(res.t, res.acceptance_rate):
            p = pts.get(t)
            if p is None or not math.isfinite(p):
                missing += a is not None
                continue
            if a is None:
                missing += 1
                continue
            worst = max(worst, abs(a - p))
            compared += 1
    ok = missing == 0 and compared > 0 and (tol is None or worst <= tol)
    return f"{_verdict(ok, tol)}max|d|={worst:.1e} over {compared} points" + (f", {missing} one-sided" if missing else "")


def _verdict(ok: bool, tol: float | None) -> str:
    """"OK "/"DIFF " against a tolerance; with none, only "DIFF " when the sides define different points."""
    return "OK " if ok and tol is not None else "" if ok else "DIFF "


def _check_p99(prom: dict, sw: dict, *, tol: float | None) -> str:
    worst, compared, bad = 0.0, 0, 0
    by_labels = {_labels(k): v for k, v in prom.items()}
    for k, m in sw.items():
        mine = m["quantiles"][0]["value"] if m["quantiles"] else None
        theirs = by_labels.get(k)
        if mine is None or theirs is None or not math.isfinite(theirs):
            bad += (mine is None) != (theirs is None or not math.isfinite(theirs))
            continue
        worst = max(worst, abs(mine - theirs) / max(abs(theirs), 1e-300))
        compared += 1
    ok = bad == 0 and compared > 0 and (tol is None or worst <= tol)
    return f"{_verdict(ok, tol)}max rel d={worst:.1e} over {compared} pools" + (f", {bad} one-sided" if bad else "")


def summed_buckets_check(prom: KeepAlive, factory, settings: Settings, pools: list, start: int, end: int) -> str:
    """P99 = histogram_quantile over the same summed buckets: Prometheus's per-le sums over the window
    against specwatch's, and the domain quantile of Prometheus's sums against Prometheus's own."""
    minutes = (end - start) // 60
    sums = prom_instant(prom, f"sum by ({BY}, le) (sum_over_time(increase({ITL}[1m])[{minutes - 1}m:1m]))", end)
    per_pool: dict[tuple, list[tuple[float, float]]] = {}
    for k, v in sums.items():
        le = dict(k)["le"]
        per_pool.setdefault(_labels(k), []).append((math.inf if le == "+Inf" else float(le), v))
    p99 = prom_instant(prom, f"histogram_quantile(0.99, sum by ({BY}, le) (sum_over_time(increase({ITL}[1m])"
                            f"[{minutes - 1}m:1m])))", end)
    worst = 0.0
    for k, v in p99.items():
        mine = histogram_quantile(0.99, sorted(per_pool[_labels(k)])).value
        worst = max(worst, abs(mine - v) / v)
    rng = Range(datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC))
    with factory() as session:
        data = analytics.fetch(session, pools=pools, rng=rng, settings=settings)
    worst_counts = 0.0
    for p in pools:
        h = latency.Histograms(data.hist["itl"].get(p.id, []))
        theirs = [v for _, v in sorted(per_pool.get((p.model_name, p.traffic_class, p.spec_mode), []))]
        for a, b in zip(h.counts or [], theirs):
            worst_counts = max(worst_counts, abs(a - b) / max(1.0, abs(b)))
    return (f"summed ITL buckets specwatch vs Prometheus max rel d={worst_counts:.1e}; domain histogram_quantile "
            f"over Prometheus's sums vs Prometheus's P99 max rel d={worst:.1e}")
