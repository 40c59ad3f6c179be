"""HTTP face of the fleet simulator.

Routes: ``/metrics`` (the whole fleet, with traffic_class/spec_mode target labels),
``/pools/<pool_id>/metrics`` (one pool as a single vLLM server shows it), ``/truth?at=<unix s>[&pool=<id>...]``
(exact cumulative values as JSON; 422 for a future or malformed `at`, 404 for one outside the kept
history or an unknown pool), ``/scenario``, ``/healthz`` and ``/`` (an index).

Wall-clock time drives the simulation: simulated time = (clock() - start) * time_scale. The state is
advanced lazily on every request (under a lock), and a background thread keeps it near "now" so a
request after a long quiet spell does not have to catch up alone. The values never depend on either.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qs, unquote, urlsplit

from backend.client.per_request import record_from_response
from backend.sim.exposition import CONTENT_TYPE, render
from backend.sim.fleet import FleetSim
from backend.sim.fleet_state import PoolState, counters_view
from backend.sim.scenario import load_scenario
from backend.sim.scenario_fields import parse_acceptance
from backend.sim.scenario_model import Scenario


def response_shape(r: dict) -> dict:
    """One simulated request's response as its pool's engine returns it (r["server"]: vllm, llamacpp, sglang),
    with the counts the engine reports per response (no trimmed drafts: draft tokens = K x steps):

    - vllm: an OpenAI chat completion with ``metrics.speculative_decoding`` (summary level);
    - llamacpp: llama-server's OpenAI chat completion with ``timings`` (``draft_n`` and ``draft_n_accepted``
      only when the request drafted, as llama-server leaves them out otherwise);
    - sglang: SGLang's native /generate ``{"text", "meta_info"}`` with spec_verify_ct, spec_accept_token_num,
      spec_draft_token_num (verify steps x K: a chain draft of K tokens), spec_accept_rate and
      spec_accept_length (completion_tokens / spec_verify_ct, as SGLang computes it)."""
    hist, k = r["histogram"], r["k"]
    steps = sum(hist)
    accepted = sum(j * h for j, h in enumerate(hist))
    out_tok, prompt = r["output_tokens"], r.get("prompt_tokens")
    usage = {"prompt_tokens": prompt, "completion_tokens": out_tok,
             "total_tokens": (prompt or 0) + out_tok}
    server = r.get("server", "vllm")
    if server == "sglang":
        meta = {"id": r["request_id"], "finish_reason": {"type": "stop"}, "prompt_tokens": prompt,
                "completion_tokens": out_tok, "cached_tokens": 0, "spec_verify_ct": steps}
        if steps:
            meta.update(spec_accept_rate=accepted / (k * steps), spec_accept_length=out_tok / steps,
                        spec_accept_token_num=accepted, spec_draft_token_num=k * steps)
        return {"text": "", "meta_info": meta}
    base = {"id": r["request_id"], "object": "chat.completion", "model": r["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}],
            "usage": usage}
    if server == "llamacpp":
        timings = {"prompt_n": prompt, "predicted_n": out_tok}
        if k * steps > 0:
            timings.update(draft_n=k * steps, draft_n_accepted=accepted)
        return {**base, "timings": timings}
    return {**base, "metrics": {"speculative_decoding": {
        "num_spec_tokens": k, "num_spec_steps": steps, "num_draft_tokens": k * steps,
        "num_accepted_draft_tokens": accepted, "acceptance_histogram": hist,
        "mean_acceptance_length": 1 + accepted / steps if steps else 1.0,
        "draft_acceptance_rate": accepted / (k * steps) if steps else 0.0}}}


def request_record(r: dict, finish_time: float) -> dict | None:
    """One simulated request's record, read from its engine's response shape by the client helper (as a
    gateway would), with the spec mode of its pool. The finish time is rounded to the microsecond, so float
    noise never moves it past the bucket end it belongs to. None for a llama.cpp request that drafted nothing
    (its response carries no draft counts)."""
    rec = record_from_response(response_shape(r), labels={"traffic_class": r["traffic_class"]},
                               finish_time=finish_time, spec_mode=r["spec_mode"], model=r["model"],
                               engine=r.get("server", "vllm"), running_requests=r.get("running"))
    if rec is not None:
        rec["finish_time"] = round(finish_time, 6)
    return rec


class TruthUnavailable(LookupError):
    """`at` is outside the kept history (too old or before the start)."""


class Simulator:
    """A FleetSim bound to a clock. Thread-safe."""

    def __init__(self, scenario: Scenario | str | Path | dict, *, seed: int = 0,
                 clock: Callable[[], float] | None = None, tick: float | None = None,
                 time_scale: float = 1.0, history_seconds: float | None = None, start: float | None = None):
        self.scenario = load_scenario(scenario)
        self.clock = clock or time.time
        if time_scale <= 0:
            raise ValueError("time_scale must be > 0")
        self.time_scale = float(time_scale)
        self.fleet = FleetSim(self.scenario, seed=seed, tick=tick, history_seconds=history_seconds)
        self.start = float(self.clock() if start is None else start)
        self.lock = threading.Lock()

    # ------------------------------------------------------------------ time

    @property
    def tick(self) -> float:
        return self.fleet.tick

    def tick_at(self, wall: float) -> int:
        """Ticks completed at unix time `wall` (never negative)."""
        sim_t = (wall - self.start) * self.time_scale
        return max(0, math.floor(sim_t / self.tick + 1e-9))

    def wall_of(self, sim_offset: float) -> float:
        return self.start + sim_offset / self.time_scale

    def sync(self) -> int:
        """Advance to now; return the current tick count."""
        with self.lock:
            n = self.tick_at(self.clock())
            self.fleet.advance_to(n)
            return self.fleet.n

    def schedule(self, pool_id: str, at: float, acceptance: Any) -> dict[str, Any]:
        """From unix time `at` (in the future) on, the pool's acceptance is `acceptance` (the scenario
        schema's mapping). Raises KeyError (unknown pool), ScenarioError or ValueError (past, invalid)."""
        with self.lock:
            self.fleet.advance_to(self.tick_at(self.clock()))
            pool = next((p for p in self.fleet.pools if p.spec.id == pool_id), None)
            if pool is None:
                raise KeyError(f"unknown pool {pool_id!r}")
            if not pool.spec.spec:
                raise ValueError(f"pool {pool_id!r} is a baseline pool (spec_mode off): it has no acceptance")
            acc = parse_acceptance(acceptance, "acceptance", pool.spec.k)
            n = self.tick_at(at)
            self.fleet.schedule(pool_id, n, acc)
            return {"pool": pool_id, "at": self.wall_of(n * self.tick), "tick": n}

    # ------------------------------------------------------------------ views

    def request_records(self, *, include_withheld: bool = False) -> list[dict]:
        """Per-request records of the requests finished since the last call, shaped for POST
        /api/v1/requests, read from each pool's engine's response shape (response_shape). Requests the scenario's
        `report_share` withholds are left out unless include_withheld. Ids carry the simulator's start, so a
        later simulator (the live one after a seeded history) never repeats an id already stored."""
        with self.lock:
            self.fleet.advance_to(self.tick_at(self.clock()))
            taken = self.fleet.take_requests()
        run = f"s{int(self.start)}"  # request ids restart at 0 in every simulator: its start keeps them unique
        recs = (request_record(r | {"request_id": f"{run}-{r['request_id']}"}, self.wall_of(r["finish_offset"]))
                for r in taken if r["reported"] or include_withheld)
        return [rec for rec in recs if rec is not None]

    def metrics(self, pool_id: str | None = None) -> bytes:
        with self.lock:
            self.fleet.advance_to(self.tick_at(self.clock()))
            pools, states = self.fleet.pools, self.fleet.states
            if pool_id is not None:
                idx = [i for i, p in enumerate(pools) if p.spec.id == pool_id]
                if not idx:
                    raise KeyError(pool_id)
                pools, states = [pools[idx[0]]], [states[idx[0]]]
            created = [self.wall_of(st.created) for st in states]
            configs = None
            if self.scenario.config_labels and pool_id is None:
                sim_t = self.fleet.n * self.tick
                configs = [{"drafter": self.scenario.drafter_at(p.spec.id, sim_t),
                            "vllm_version": self.scenario.vllm_version_at(p.spec.id, sim_t)} for p in pools]
            return render(pools, states, created_wall=created, with_target_labels=pool_id is None, configs=configs)

    def truth(self, at: float | None = None, pools: list[str] | None = None) -> dict[str, Any]:
        """Exact counters as of unix time `at` (default now), for all pools or the listed pool ids."""
        with self.lock:
            now = self.clock()
            self.fleet.advance_to(self.tick_at(now))
            if at is None:
                at = now
            if at > now + 1e-6:
                raise ValueError(f"at={at!r} is in the future (now {now!r})")
            if at < self.start:
                raise TruthUnavailable(f"at={at!r} is before the simulator started ({self.start!r})")
            n = self.tick_at(at)
            ids = [p.spec.id for p in self.fleet.pools]
            if pools:
                unknown = [p for p in pools if p not in ids]
                if unknown:
                    raise KeyError(f"unknown pool(s) {unknown} (known: {ids})")
            only = None if not pools else [ids.index(p) for p in pools]
            try:
                states = self.fleet.state_at(n, only)
            except LookupError:
                oldest = self.wall_of(self.fleet.oldest_tick() * self.tick)
                raise TruthUnavailable(
                    f"at={at!r} is older than the kept history (oldest answerable {oldest!r}; "
                    f"history_seconds={self.fleet.history_seconds:g})") from None
        return self._truth_doc(at, n, states)

    def _truth_doc(self, at: float, n: int, states: list[PoolState | None]) -> dict[str, Any]:
        sim_t = n * self.tick
        pools = []
        for pool, st in zip(self.fleet.pools, states):
            if st is None:
                continue
            spec, lay = pool.spec, pool.layout
            tot = sum(e.c for e in st.engines)
            cum = sum(e.cum for e in st.engines)
            pools.append({
                "pool_id": spec.id, "model_name": spec.model, "traffic_class": spec.traffic_class,
                "spec_mode": spec.spec_mode, "k": spec.k or None, "labels": spec.labels, "engine": spec.engine,
                "engines": [str(i) for i in range(len(st.engines))],
                "created": self.wall_of(st.created),
                "restarts": [self.wall_of(t) for t in st.restarts],
                "counters": counters_view(tot, lay, spec.spec),
                "cumulative_since_start": counters_view(cum, lay, spec.spec),
                "per_engine": [{"engine": str(i), "counters": counters_view(e.c, lay, spec.spec),
                                "cumulative_since_start": counters_view(e.cum, lay, spec.spec),
                                "running": int(e.occ.sum()), "waiting": e.waiting}
                               for i, e in enumerate(st.engines)],
                "gauges": {"running": int(sum(e.occ.sum() for e in st.engines)),
                           "waiting": float(sum(e.waiting for e in st.engines))},
                "acceptance_conditional": list(st.acc.p) if st.acc is not None else None,
                "drafter": self.scenario.drafter_at(spec.id, sim_t),
                "vllm_version": self.scenario.vllm_version_at(spec.id, sim_t),
            })
        return {"at": at, "tick": self.tick, "ticks": n, "sim_time": sim_t, "state_time": self.wall_of(sim_t),
                "start": self.start, "time_scale": self.time_scale, "seed": self.fleet.seed,
                "scenario": self.scenario.name, "phase": self.scenario.phase_at(sim_t), "pools": pools}

    def scenario_doc(self) -> dict[str, Any]:
        return {"name": self.scenario.name, "description": self.scenario.description, "tick": self.tick,
                "start": self.start, "time_scale": self.time_scale, "seed": self.fleet.seed,
                "pools": [{"pool_id": p.spec.id, "model_name": p.spec.model, "traffic_class": p.spec.traffic_class,
                           "spec_mode": p.spec.spec_mode, "k": p.spec.k or None, "engine": p.spec.engine,
                           "engines": p.spec.engines,
                           "labels": p.spec.labels, "instance": p.spec.instance} for p in self.fleet.pools],
                "source": self.scenario.raw}


# ---------------------------------------------------------------------------------------------- HTTP


def _make_handler(sim: Simulator) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "specwatch-sim"

        def log_message(self, fmt: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, code: int, doc: Any) -> None:
            self._send(code, json.dumps(doc).encode(), "application/json")

        def do_HEAD(self) -> None:
            self.do_GET()

        def do_POST(self) -> None:
            """POST /events {"pool": ID, "in_seconds": S, "acceptance": {...}}: change a pool's acceptance
            S seconds from now (the demo's incident and its recovery)."""
            if urlsplit(self.path).path.rstrip("/") != "/events":
                self._json(404, {"error": f"no route {self.path!r}"})
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                doc = json.loads(self.rfile.read(min(length, 65536)) or b"null") if length <= 65536 else None
                if not isinstance(doc, dict) or set(doc) - {"pool", "in_seconds", "acceptance"}:
                    raise ValueError('body must be {"pool": ID, "in_seconds": S, "acceptance": {...}}')
                wait = doc.get("in_seconds")
                if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 < wait <= 86400:
                    raise ValueError(f"in_seconds must be a number in (0, 86400], got {wait!r}")
                out = sim.schedule(str(doc.get("pool")), sim.clock() + float(wait), doc.get("acceptance"))
            except KeyError as exc:
                self._json(404, {"error": str(exc.args[0]), "pools": [p.spec.id for p in sim.fleet.pools]})
                return
            except (ValueError, TypeError) as exc:  # ScenarioError is a ValueError
                self._json(422, {"error": str(exc)})
                return
            self._json(200, out)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            path = url.path.rstrip("/") or "/"
            try:
                if path == "/metrics":
                    self._send(200, sim.metrics(), CONTENT_TYPE)
                elif path.startswith("/pools/") and path.endswith("/metrics"):
                    pool_id = unquote(path[len("/pools/"):-len("/metrics")])
                    try:
                        body = sim.metrics(pool_id)
                    except KeyError:
                        self._json(404, {"error": f"unknown pool {pool_id!r}",
                                         "pools": [p.spec.id for p in sim.fleet.pools]})
                        return
                    self._send(200, body, CONTENT_TYPE)
                elif path == "/truth":
                    q = parse_qs(url.query)
                    at = None
                    if "at" in q:
                        try:
                            at = float(q["at"][0])
                        except ValueError:
                            self._json(422, {"error": f"at must be unix seconds, got {q['at'][0]!r}"})
                            return
                    try:
                        self._json(200, sim.truth(at, q.get("pool")))
                    except KeyError as exc:
                        self._json(404, {"error": str(exc.args[0])})
                    except TruthUnavailable as exc:
                        self._json(404, {"error": str(exc)})
                    except ValueError as exc:
                        self._json(422, {"error": str(exc)})
                elif path == "/healthz":
                    self._send(200, b"ok\n", "text/plain; charset=utf-8")
                elif path == "/scenario":
                    self._json(200, sim.scenario_doc())
                elif path == "/":
                    links = ["/metrics", "/truth", "/scenario", "/healthz"] + [
                        f"/pools/{p.spec.id}/metrics" for p in sim.fleet.pools]
                    self._json(200, {"scenario": sim.scenario.name, "links": links})
                else:
                    self._json(404, {"error": f"no route {url.path!r}"})
            except (BrokenPipeError, ConnectionResetError):  # pragma: no cover
                pass

    return Handler


@dataclass
class SimHandle:
    url: str
    port: int
    sim: Simulator
    server: ThreadingHTTPServer
    _threads: list[threading.Thread]
    _stop: threading.Event

    def stop(self) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()
        for t in self._threads:
            t.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _keep_up(sim: Simulator, stop: threading.Event, every: float) -> None:
    while not stop.wait(every):
        sim.sync()


def serve(sim: Simulator, host: str = "127.0.0.1", port: int = 0, *, background_sync: float | None = 1.0
          ) -> SimHandle:
    """Start serving `sim` in daemon threads; returns a handle with url and stop()."""
    server = ThreadingHTTPServer((host, port), _make_handler(sim))
    server.daemon_threads = True
    stop = threading.Event()
    threads = [threading.Thread(target=server.serve_forever, name="specwatch-sim-http", daemon=True)]
    if background_sync:
        threads.append(threading.Thread(target=_keep_up, args=(sim, stop, background_sync),
                                        name="specwatch-sim-sync", daemon=True))
    for t in threads:
        t.start()
    real_port = server.server_address[1]
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    return SimHandle(url=f"http://{shown}:{real_port}", port=real_port, sim=sim, server=server,
                     _threads=threads, _stop=stop)


def start_in_thread(scenario: Scenario | str | Path | dict, port: int = 0, seed: int = 0,
                    clock: Callable[[], float] | None = None, tick: float | None = None, *,
                    host: str = "127.0.0.1", time_scale: float = 1.0, history_seconds: float | None = None,
                    start: float | None = None, background_sync: float | None = 1.0) -> SimHandle:
    """Run the simulator's HTTP server in a background thread (for tests and the demo).

    `scenario` is a Scenario, a mapping, a YAML path or a built-in name. With an injected `clock`, time
    only moves when the clock does."""
    sim = Simulator(scenario, seed=seed, clock=clock, tick=tick, time_scale=time_scale,
                    history_seconds=history_seconds, start=start)
    return serve(sim, host=host, port=port, background_sync=background_sync)
