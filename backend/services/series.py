"""Acceptance time series: counters summed inside each step (or a trailing rolling window), then divided.

Everything is columnar: `backend.db.spec_series` returns the counters as numpy arrays (hour rows carry
their buckets as arrays), `backend.domain.gridsum` sums them on the grid and divides, and the API renders
the columns straight to JSON (backend.api.render). One call computes any number of series on one grid
(all pools of the fleet, or every model's mix) from one statement.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import numpy as np

from backend.config import Settings
from backend.db import pool_list, spec_series
from backend.db.models import Pool
from backend.db.pool_list import PoolRow
from backend.db.session import Reads
from backend.domain import gridsum, pool_rows
from backend.schemas.acceptance import AcceptanceSeriesRead
from backend.schemas.common import PoolRefRead, WindowRead
from backend.schemas.fleet import SparklineRead
from backend.schemas.summary import MIXED
from backend.services.analytics import pick_model, pick_models, pool_ref
from backend.services.errors import InvalidParameter, NotFound, SpecModeRequired
from backend.services.windows import InvalidWindow, Range, auto_step, check_span, make_grid

COLUMNS = ("acceptance_rate", "mean_acceptance_length", "seed_alpha", "drafts", "draft_tokens", "accepted_tokens")
By = Literal["pool", "model"]
AnyPool = Pool | PoolRow
NEEDS = {"drafts": ("drafts",), "draft_tokens": ("draft_tokens",), "accepted_tokens": ("accepted_tokens",),
         "acceptance_rate": ("accepted_tokens", "draft_tokens"),
         "mean_acceptance_length": ("accepted_tokens", "drafts"), "seed_alpha": ("accepted_tokens", "drafts")}


@dataclass
class Head:
    """What one series is: its labels, the pools it sums, and its caveats."""

    model_name: str
    traffic_class: str
    spec_mode: str
    num_spec_tokens: int | None
    pools: list[PoolRefRead]
    incomplete: bool = False
    flags: list[str] = field(default_factory=list)


@dataclass
class SeriesSet:
    """Series on one grid: columns[name] has one row per head, one value per point (NaN = undefined)."""

    window: WindowRead
    grid: gridsum.TimeGrid
    rolling: int | None
    bucket_seconds: int
    heads: list[Head]
    columns: dict[str, np.ndarray]

    def times(self) -> list[datetime]:
        return [datetime.fromtimestamp(int(t), tz=UTC) for t in self.grid.times()]

    def read(self, i: int = 0) -> AcceptanceSeriesRead:
        """Series i as the documented wire model (None where undefined)."""
        h = self.heads[i]
        cols = {name: [None if np.isnan(v) else float(v) for v in self.columns[name][i]] for name in COLUMNS}
        return AcceptanceSeriesRead(
            model_name=h.model_name, traffic_class=h.traffic_class, spec_mode=h.spec_mode,
            num_spec_tokens=h.num_spec_tokens, window=self.window, step_seconds=self.grid.step,
            rolling_window_seconds=self.rolling, bucket_seconds=self.bucket_seconds, pools=h.pools,
            t=self.times(), incomplete=h.incomplete, flags=h.flags, **cols)


def select_pools(pools: list[AnyPool], *, traffic_class: str, spec_mode: str | None, settings: Settings
                 ) -> list[AnyPool]:
    spec = [p for p in pools if p.spec_mode != settings.baseline_mode]
    modes = sorted({p.spec_mode for p in spec})
    if spec_mode is None:
        if len(modes) > 1:
            raise SpecModeRequired(spec[0].model_name, modes)
        if not modes:
            raise NotFound("the model has no speculative-decoding pool", [p.spec_mode for p in pools],
                           code="no_spec_pool")
        spec_mode = modes[0]
    if spec_mode not in modes:
        raise NotFound(f"unknown spec_mode {spec_mode!r}", modes, code="unknown_spec_mode")
    rows = [r for r in pool_rows.rows(pools, baseline_mode=settings.baseline_mode,
                                      default_class=settings.default_class) if r.spec_mode == spec_mode]
    row = next((r for r in rows if r.traffic_class == traffic_class), None)
    if row is None:
        known = sorted(r.traffic_class for r in rows if r.traffic_class != MIXED) + [MIXED]
        raise NotFound(f"unknown traffic_class {traffic_class!r}", known, code="unknown_traffic_class")
    return list(row.pools)


def make_time_grid(rng: Range, *, step: int | None, rolling: int | None, settings: Settings) -> gridsum.TimeGrid:
    """The grid of a series request, validated: step and window multiples of the bucket width, at most
    max_points_hard points (an automatic step gives about max_points)."""
    width = settings.bucket_seconds
    if step is None:
        step = auto_step(rng.seconds, bucket_seconds=width, max_points=settings.max_points)
    check_span(step, name="step", bucket_seconds=width)
    if rolling is not None:
        check_span(rolling, name="window", bucket_seconds=width)
    if rng.seconds / step > settings.max_points_hard:
        raise InvalidWindow(f"step={step}s gives more than {settings.max_points_hard} points; use a larger step")
    g = make_grid(rng, step=step, span=rolling or step)
    return gridsum.TimeGrid(first=g.first, step=g.step, span=g.span, count=g.count)


def compute(session: Reads, groups: Sequence[Sequence[AnyPool]], grid: gridsum.TimeGrid, *,
            settings: Settings, columns: Sequence[str] = COLUMNS) -> dict[str, np.ndarray]:
    """The named columns, one row per group of pools (a group's counters are summed, then divided)."""
    return _compute(session, groups, grid, settings=settings, columns=columns)[0]


def _compute(session: Reads, groups: Sequence[Sequence[AnyPool]], grid: gridsum.TimeGrid, *,
             settings: Settings, columns: Sequence[str], lead: str | None = None
             ) -> tuple[dict[str, np.ndarray], list[tuple] | None]:
    """compute, and the rows of `lead` (spec_series.spec_counters: sent first in the read's round trip)."""
    ids = sorted({p.id for g in groups for p in g})
    key = {pid: i for i, pid in enumerate(ids)}
    names = sorted({c for col in columns for c in NEEDS[col]})
    raw = spec_series.spec_counters(session, pool_ids=ids, a=grid.start, b=grid.last,
                                    bucket_seconds=settings.bucket_seconds, grain=grid.grain, counters=names,
                                    lead=lead)
    members = [[key[p.id] for p in g] for g in groups]
    counters = {}
    # counters reported in the same cells (the usual case) share where points are undefined
    known: list[tuple[np.ndarray, np.ndarray]] = []  # (counts, reported)
    for name, parts in grain_parts(raw, ids, grid, names).items():
        parts = gridsum.combine(parts, members)
        reported = next((r for c, r in known if np.array_equal(c, parts.counts)), None)
        if reported is None:
            reported = gridsum.reported(parts, grid)
            known.append((parts.counts, reported))
        counters[name] = gridsum.point_sums(parts, grid, reported)
    out = {}
    for col in columns:
        if col in ("drafts", "draft_tokens", "accepted_tokens"):
            out[col] = counters[col]
        elif col == "acceptance_rate":
            out[col] = gridsum.acceptance_rate(counters["accepted_tokens"], counters["draft_tokens"])
        elif col == "mean_acceptance_length":
            out[col] = gridsum.mean_acceptance_length(counters["accepted_tokens"], counters["drafts"])
        else:
            out[col] = np.full((len(groups), grid.count), np.nan)
            for i, g in enumerate(groups):
                k = _single_k(g)
                if k:
                    out[col][i] = gridsum.seed_alpha(counters["accepted_tokens"][i], counters["drafts"][i], k)
    return out, raw.lead_rows


Choose = Callable[[list[PoolRow]], list[list[PoolRow]]]


def read_groups(session: Reads, choose: Choose, grid: gridsum.TimeGrid, *, settings: Settings,
                columns: Sequence[str]) -> tuple[list[list[PoolRow]], dict[str, np.ndarray]]:
    """The groups `choose` picks from the pool list (raising NotFound or InvalidParameter), and their
    columns, in one round trip: the pools are chosen from the list this process read last
    (backend.db.pool_list), and the list is read again with the counters. The answer is built from that
    fresh list; if choosing from it gives other pools or another K, the counters are read again for them
    (the guess only ever costs a round trip, never a wrong answer)."""
    try:
        guess = choose(pool_list.recent(session))
        check_cells(guess, grid, settings)
    except (NotFound, InvalidParameter):  # perhaps only the remembered list is behind: decide on the list now
        guess = None
    if guess is not None:
        cols, lead_rows = _compute(session, guess, grid, settings=settings, columns=columns, lead=pool_list.SQL)
        groups = choose(pool_list.fresh(session, lead_rows))
        if _shape(groups) == _shape(guess):
            return groups, cols
    else:
        groups = choose(pool_list.read(session))
    check_cells(groups, grid, settings)
    return groups, _compute(session, groups, grid, settings=settings, columns=columns)[0]


def _shape(groups: Sequence[Sequence[PoolRow]]) -> list[list[tuple[int, int | None]]]:
    """What a read of these groups depends on: each group's pools and their K."""
    return [[(p.id, p.num_spec_tokens) for p in g] for g in groups]


def grain_parts(raw: spec_series.SpecColumns, ids: Sequence[int], grid: gridsum.TimeGrid,
                names: Sequence[str]) -> dict[str, gridsum.GrainSums]:
    """Per counter: the read's values summed per pool (row i: ids[i], sorted) and grain, by
    gridsum.grain_sums: the packed rows placed whole (as gridsum.Run), the flat entries summed by cell;
    routing makes the two disjoint."""
    keys = np.searchsorted(np.asarray(ids, np.int64), raw.pool_id) if ids else raw.pool_id
    run_keys = np.searchsorted(np.asarray(ids, np.int64), [r.pool_id for r in raw.runs]) if raw.runs else []
    cells = gridsum.grain_index(keys, raw.end, n_keys=len(ids), grid=grid)
    out: dict[str, gridsum.GrainSums] = {}
    for name in names:
        i = spec_series.COUNTERS.index(name)
        runs = [gridsum.Run(int(k), r.last_end, r.values[i], r.n) for k, r in zip(run_keys, raw.runs)]
        out[name] = gridsum.grain_sums(keys, raw.end, getattr(raw, name), n_keys=len(ids), grid=grid, cells=cells,
                                       runs=runs)
    return out


def check_cells(groups: Sequence[Sequence[AnyPool]], grid: gridsum.TimeGrid, settings: Settings) -> None:
    """A requested series read's memory bound: pools read x time grains <= max_cells (422 beyond)."""
    n = len({p.id for g in groups for p in g})
    if n * grid.grains > settings.max_cells:
        raise InvalidWindow(f"{n} pools x {grid.grains} time steps of {grid.grain}s exceed {settings.max_cells:,} "
                            "cells per request: use a larger step, a shorter range, or fewer models")


def _single_k(pools: Sequence[AnyPool]) -> int | None:
    ks = {p.num_spec_tokens for p in pools}
    return next(iter(ks)) if len(ks) == 1 else None


def _head(pools: Sequence[AnyPool], *, traffic_class: str, rng: Range) -> Head:
    ks = {p.num_spec_tokens for p in pools}
    missing = [p.traffic_class for p in pools if p.last_seen <= rng.start or p.first_seen > rng.end]
    mixed = traffic_class == MIXED
    return Head(model_name=pools[0].model_name, traffic_class=traffic_class, spec_mode=pools[0].spec_mode,
                num_spec_tokens=_single_k(pools), pools=[pool_ref(p) for p in pools],
                incomplete=mixed and bool(missing),
                flags=([] if len(ks) == 1 else ["k_differs_across_pools"])
                + [f"no data in the range for class {c!r}" for c in missing if mixed])


def _window(rng: Range) -> WindowRead:
    return WindowRead(start=rng.start, end=rng.end, seconds=rng.seconds)


def acceptance_columns(
    session: Reads, *, model_name: str, traffic_class: str, spec_mode: str | None, rng: Range,
    step: int | None, rolling: int | None, now: datetime, settings: Settings,
) -> SeriesSet:
    """One series: a traffic class of a model, or its mix."""
    grid = make_time_grid(rng, step=step, rolling=rolling, settings=settings)

    def choose(pools: list[PoolRow]) -> list[list[PoolRow]]:
        return [select_pools(pick_model(pools, model_name), traffic_class=traffic_class, spec_mode=spec_mode,
                             settings=settings)]

    groups, cols = read_groups(session, choose, grid, settings=settings, columns=COLUMNS)
    return SeriesSet(window=_window(rng), grid=grid, rolling=rolling, bucket_seconds=settings.bucket_seconds,
                     heads=[_head(groups[0], traffic_class=traffic_class, rng=rng)], columns=cols)


def acceptance_series(session: Reads, **kw) -> AcceptanceSeriesRead:
    """acceptance_columns as the wire model."""
    return acceptance_columns(session, **kw).read(0)


def acceptance_set(
    session: Reads, *, by: By, models: Sequence[str] | None, spec_mode: str | None, rng: Range,
    step: int | None, rolling: int | None, now: datetime, settings: Settings,
    columns: Sequence[str] = COLUMNS,
) -> SeriesSet:
    """Many series on one grid in one read: every speculative pool (by="pool"), or every model's mix per
    spec mode (by="model"); optionally only `models` and one spec mode."""
    bad = [c for c in columns if c not in COLUMNS]
    if bad:
        raise InvalidParameter(f"unknown field(s) {bad}; choose from {list(COLUMNS)}")
    grid = make_time_grid(rng, step=step, rolling=rolling, settings=settings)

    def choose(pools: list[PoolRow]) -> list[list[PoolRow]]:
        spec = [p for p in pick_models(pools, models) if p.spec_mode != settings.baseline_mode]
        if spec_mode is not None:
            modes = sorted({p.spec_mode for p in spec})
            spec = [p for p in spec if p.spec_mode == spec_mode]
            if not spec:
                raise NotFound(f"unknown spec_mode {spec_mode!r}", modes, code="unknown_spec_mode")
        by_model: dict[str, list[PoolRow]] = {}
        for p in spec:
            by_model.setdefault(p.model_name, []).append(p)
        groups = []  # the rows surfaces show (pool_rows): class rows by="pool", mixed rows by="model"
        for model in sorted(by_model):
            for r in pool_rows.rows(by_model[model], baseline_mode=settings.baseline_mode,
                                    default_class=settings.default_class):
                if (r.traffic_class == MIXED) == (by == "model"):
                    groups.append(list(r.pools))
        return groups

    groups, cols = read_groups(session, choose, grid, settings=settings, columns=columns)
    heads = [_head(g, traffic_class=g[0].traffic_class if by == "pool" else MIXED, rng=rng) for g in groups]
    return SeriesSet(window=_window(rng), grid=grid, rolling=rolling, bucket_seconds=settings.bucket_seconds,
                     heads=heads, columns=cols)


def sparkline_grid(now: datetime, settings: Settings) -> tuple[gridsum.TimeGrid, int, int]:
    """The sparklines' read grid: fine steps (sparkline_fine_step_seconds) over the last sparkline_seconds,
    the last ending at `now`'s bucket; with the step the older part is summed into (sparkline_step_seconds)
    and how many fine points the recent end keeps (sparkline_fine_seconds). A fine step that does not divide
    the others is narrowed to one that does."""
    width = settings.bucket_seconds
    coarse = max(width, settings.sparkline_step_seconds // width * width)
    fine = max(width, min(settings.sparkline_fine_step_seconds, coarse) // width * width)
    tail = max(0, min(settings.sparkline_fine_seconds, settings.sparkline_seconds))
    fine = math.gcd(coarse, fine, tail) if tail else coarse
    count = max(1, settings.sparkline_seconds // fine)
    end = int(now.timestamp()) // width * width
    return gridsum.TimeGrid(first=end - (count - 1) * fine, step=fine, span=fine, count=count), coarse, tail // fine


def sparklines(session: Reads, groups: Sequence[Sequence[Pool]], *, now: datetime,
               settings: Settings) -> list[SparklineRead]:
    """Acceptance rate over the last `sparkline_seconds`, one line per group, the last point ending at now
    (its bucket): the last sparkline_fine_seconds in sparkline_fine_step_seconds steps (a drop in the last
    minutes shows), the time before in sparkline_step_seconds steps. One read on the fine grid; the coarse
    points sum its counters (A and D), then divide, as any step does."""
    grid, coarse, n_fine = sparkline_grid(now, settings)
    cols = compute(session, groups, grid, settings=settings, columns=("accepted_tokens", "draft_tokens"))
    per = coarse // grid.step
    n_coarse = (grid.count - n_fine) // per
    skip = grid.count - n_fine - n_coarse * per  # fine points before the first whole coarse step: left out
    times = grid.times()

    def merged(a: np.ndarray) -> np.ndarray:
        head = a[:, skip:skip + n_coarse * per].reshape(a.shape[0], n_coarse, per)
        some = ~np.isnan(head).all(axis=2)
        summed = np.where(some, np.nansum(head, axis=2), np.nan)
        return np.concatenate([summed, a[:, grid.count - n_fine:]], axis=1)

    with np.errstate(invalid="ignore"):
        rate = gridsum.acceptance_rate(merged(cols["accepted_tokens"]), merged(cols["draft_tokens"]))
    t_all = np.concatenate([times[skip + per - 1:skip + n_coarse * per:per], times[grid.count - n_fine:]])
    t = [datetime.fromtimestamp(int(x), tz=UTC) for x in t_all]
    since = datetime.fromtimestamp(int(times[grid.count - n_fine - 1]), tz=UTC) if n_fine and grid.count > n_fine \
        else None
    return [SparklineRead(step_seconds=coarse, t=t, acceptance_rate=[None if np.isnan(v) else float(v) for v in row],
                          fine_step_seconds=grid.step if n_fine else None, fine_since=since)
            for row in rate]
