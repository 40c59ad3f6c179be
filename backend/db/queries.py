"""Analytics reads over `pool_buckets`: set-based SQL only. Every function sums additive increases inside
Postgres (per pool, per time step, per concurrency band) and returns a bounded number of rows; ratios are
left to `backend.domain`. Array families (per-position, histogram counts) are summed element-wise with
one `sum(col[i])` per element, which keeps the work a plain aggregate scan of the primary-key range.

A bucket row covers (bucket_start, bucket_start + bucket_seconds] and belongs to the step whose interval
holds its END, exactly like a Prometheus point at t covering (t - w, t]. Whole hours that are rolled up
and clean are read from `pool_buckets_hourly` instead (backend.db.routing); the answers are the same sums.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from backend.db import routing
from backend.db.models import HistogramLayout, Pool, Rejection
from backend.db.session import tune
from backend.db.spec_series import binary_rows
from backend.domain.bands import BAND_EDGES

_END = "(extract(epoch FROM bucket_start)::bigint + bucket_seconds)"
_END_B = "(extract(epoch FROM b.bucket_start)::bigint + b.bucket_seconds)"
HISTOGRAM_FAMILIES = ("itl", "tpot", "ttft")


def element_sums(column: str, n: int, alias: str) -> str:
    """`sum(column[i]) AS alias{i}` for i = 1..n: an array column summed element by element (NULL where no row
    has element i)."""
    return ", ".join(f"sum({column}[{i}]) AS {alias}{i}" for i in range(1, n + 1)) or "NULL AS _none"


def _collect(row, alias: str, n: int) -> list[float | None]:
    return [row._mapping[f"{alias}{i}"] for i in range(1, n + 1)]


# --- pools and layouts --------------------------------------------------------------------------------


def list_pools(session: Session, *, model_name: str | None = None) -> list[Pool]:
    stmt = select(Pool).order_by(Pool.model_name, Pool.traffic_class, Pool.spec_mode)
    if model_name is not None:
        stmt = stmt.where(Pool.model_name == model_name)
    return list(session.scalars(stmt))


def newest_sources(session: Session) -> dict[int, str]:
    """{pool id: `pool_buckets.source` of its newest bucket} (how its newest counts were collected)."""
    rows = session.execute(text(
        "SELECT p.id, (SELECT b.source FROM pool_buckets b WHERE b.pool_id = p.id AND b.bucket_start < p.last_seen "
        "AND b.bucket_start >= p.last_seen - interval '1 day' ORDER BY b.bucket_start DESC LIMIT 1) FROM pools p"))
    return {pid: src for pid, src in rows if src is not None}


def model_names(session: Session) -> list[str]:
    return list(session.scalars(select(Pool.model_name).distinct().order_by(Pool.model_name)))


def rejection_counts(session: Session) -> dict[tuple[str, str, str], dict[str, int]]:
    """{(model_name, traffic_class, spec_mode): {rule: rows}} over all recorded rejections."""
    stmt = select(
        Rejection.model_name, Rejection.traffic_class, Rejection.spec_mode, Rejection.rule, func.count()
    ).group_by(Rejection.model_name, Rejection.traffic_class, Rejection.spec_mode, Rejection.rule)
    out: dict[tuple[str, str, str], dict[str, int]] = defaultdict(dict)
    for model, cls, mode, rule, n in session.execute(stmt):
        out[(model, cls, mode)][rule] = n
    return dict(out)


def refused_pools(session: Session, *, rule: str, since: datetime) -> int:
    """Distinct pools refused under `rule` since `since`."""
    pools = (select(Rejection.model_name, Rejection.traffic_class, Rejection.spec_mode).distinct()
             .where(Rejection.rule == rule, Rejection.created_at >= since).subquery())
    return session.execute(select(func.count()).select_from(pools)).scalar_one()


def layout_bounds(session: Session) -> dict[int, tuple[float, ...]]:
    return {i: tuple(b) for i, b in session.execute(select(HistogramLayout.id, HistogramLayout.bounds))}


def count_width(layouts: Mapping[int, Sequence[float]]) -> int:
    """The longest count array of these layouts (its bounds and the +Inf count); 0 without layouts."""
    return max((len(b) + 1 for b in layouts.values()), default=0)


# --- window totals ------------------------------------------------------------------------------------



@dataclass
class TotalsRow:
    """Sums for one pool and concurrency band (band_index None: running requests not reported)."""

    pool_id: int
    band_index: int | None
    buckets: int
    drafts: float | None
    draft_tokens: float | None
    accepted_tokens: float | None
    drafts_with_per_pos: float | None
    per_pos: list[float | None]
    per_pos_len: int | None
    generation_tokens: float | None
    finished_requests: float | None
    running_sum: float | None
    running_n: int
    itl_sum: float | None
    itl_count: float | None
    tpot_sum: float | None
    tpot_count: float | None
    restarts: int | None
    last_end: datetime | None


def window_totals(
    session: Session, *, pool_ids: Sequence[int], start: datetime, end: datetime, bucket_seconds: int,
    n_pos: int, band_edges: Sequence[float],
) -> list[TotalsRow]:
    """Sums per pool and concurrency band over the buckets ending in (start, end]."""
    if not pool_ids:
        return []
    band = "CASE WHEN running_mean IS NULL OR running_mean <= 0 THEN NULL " + " ".join(
        f"WHEN running_mean <= :e{i} THEN {i}" for i in range(len(band_edges))
    ) + f" ELSE {len(band_edges)} END"
    hours = routing.whole_hours(start.timestamp(), end.timestamp()) if tuple(band_edges) == BAND_EDGES else None
    if hours is None:
        sql = f"""
        SELECT pool_id, {band} AS band_index, count(*) AS buckets,
               sum(drafts) AS drafts, sum(draft_tokens) AS draft_tokens, sum(accepted_tokens) AS accepted,
               sum(drafts) FILTER (WHERE accepted_per_pos IS NOT NULL) AS drafts_pp,
               max(cardinality(accepted_per_pos)) AS pp_len, {element_sums("accepted_per_pos", n_pos, "p")},
               sum(generation_tokens) AS gen, sum(finished_requests) AS fin,
               sum(running_mean) AS run_sum, count(running_mean) AS run_n,
               sum(itl_sum) AS itl_sum, sum(itl_count) AS itl_count,
               sum(tpot_sum) AS tpot_sum, sum(tpot_count) AS tpot_count,
               sum(restarts) AS restarts, max({_END}) AS last_end
        FROM pool_buckets
        WHERE pool_id = ANY(:ids) AND bucket_start > :lo AND bucket_start <= :hi
        GROUP BY pool_id, band_index
        """
        extra: dict = {}
    else:
        src, extra = routing.source(routing.TOTALS_RAW.format(band=band.replace("running_mean", "b.running_mean")),
                                    routing.TOTALS_HOURLY, hours, width=bucket_seconds)
        sql = f"""
        SELECT pool_id, band_index, sum(n) AS buckets, sum(drafts) AS drafts, sum(draft_tokens) AS draft_tokens,
               sum(accepted_tokens) AS accepted, sum(drafts_pp) AS drafts_pp, max(pp_len) AS pp_len,
               {element_sums("pp", n_pos, "p")}, sum(gen) AS gen, sum(fin) AS fin, sum(run_sum) AS run_sum,
               sum(run_n) AS run_n, sum(itl_sum) AS itl_sum, sum(itl_count) AS itl_count,
               sum(tpot_sum) AS tpot_sum, sum(tpot_count) AS tpot_count, sum(restarts) AS restarts,
               max(last_end) AS last_end
        FROM ({src}) AS s
        GROUP BY pool_id, band_index
        """
    params = {f"e{i}": float(e) for i, e in enumerate(band_edges)}
    params |= {"ids": list(pool_ids), "lo": start - timedelta(seconds=bucket_seconds),
               "hi": end - timedelta(seconds=bucket_seconds)} | extra
    rows = []
    tune(session)
    for r in session.execute(text(sql), params):
        m = r._mapping
        rows.append(TotalsRow(
            pool_id=m["pool_id"], band_index=m["band_index"], buckets=m["buckets"], drafts=m["drafts"],
            draft_tokens=m["draft_tokens"], accepted_tokens=m["accepted"], drafts_with_per_pos=m["drafts_pp"],
            per_pos=_collect(r, "p", n_pos), per_pos_len=m["pp_len"], generation_tokens=m["gen"],
            finished_requests=m["fin"], running_sum=m["run_sum"], running_n=m["run_n"],
            itl_sum=m["itl_sum"], itl_count=m["itl_count"], tpot_sum=m["tpot_sum"],
            tpot_count=m["tpot_count"], restarts=m["restarts"],
            last_end=datetime.fromtimestamp(m["last_end"], tz=UTC) if m["last_end"] is not None else None,
        ))
    return rows



@dataclass
class LatencyBinRow:
    """ITL and TPOT _sum/_count increases of one pool, concurrency band and time bin."""

    pool_id: int
    band_index: int | None
    bin: int  # floor((bucket end - 1) / bin_seconds): the bin holding ends in (bin*w, (bin+1)*w]
    itl_sum: float | None
    itl_count: float | None
    tpot_sum: float | None
    tpot_count: float | None


def latency_bins(
    session: Session, *, pool_ids: Sequence[int], start: datetime, end: datetime, bucket_seconds: int,
    target_bins: int, band_edges: Sequence[float] = BAND_EDGES,
) -> list[LatencyBinRow]:
    """ITL and TPOT sums per pool, concurrency band and time bin over the buckets ending in (start, end],
    read like `window_totals`; their sum over the bins is window_totals' ITL and TPOT. The bins are about
    `target_bins` equal spans on the epoch grid: a multiple of an hour when the window holds two whole hours
    (which may come from the rollups: an hour's row then falls in one bin), else of the bucket width. The
    bins do not depend on whether rollups are read, so the answer is the same either way."""
    if not pool_ids:
        return []
    if target_bins < 1:
        raise ValueError(f"target_bins must be >= 1, got {target_bins}")
    band = "CASE WHEN b.running_mean IS NULL OR b.running_mean <= 0 THEN NULL " + " ".join(
        f"WHEN b.running_mean <= :e{i} THEN {i}" for i in range(len(band_edges))
    ) + f" ELSE {len(band_edges)} END"
    hours = routing.whole_hours(start.timestamp(), end.timestamp()) if tuple(band_edges) == BAND_EDGES else None
    a, b = start.timestamp(), end.timestamp()
    whole = math.floor(b / routing.HOUR) - math.ceil(a / routing.HOUR) >= 2
    unit = routing.HOUR if whole else bucket_seconds
    bin_seconds = unit * max(1, math.ceil((end - start).total_seconds() / target_bins / unit))
    src, extra = routing.select(routing.TOTALS_RAW.format(band=band), routing.TOTALS_HOURLY, hours,
                                width=bucket_seconds)
    sql = f"""
    SELECT pool_id, band_index, floor((last_end - 1) / :bin)::bigint AS bin, sum(itl_sum) AS itl_sum,
           sum(itl_count) AS itl_count, sum(tpot_sum) AS tpot_sum, sum(tpot_count) AS tpot_count
    FROM ({src}) AS s
    WHERE itl_count IS NOT NULL OR tpot_count IS NOT NULL
    GROUP BY pool_id, band_index, bin
    """
    params = {f"e{i}": float(e) for i, e in enumerate(band_edges)}
    params |= {"ids": list(pool_ids), "lo": start - timedelta(seconds=bucket_seconds),
               "hi": end - timedelta(seconds=bucket_seconds), "bin": bin_seconds} | extra
    tune(session)
    return [LatencyBinRow(pool_id=m["pool_id"], band_index=m["band_index"], bin=m["bin"], itl_sum=m["itl_sum"],
                          itl_count=m["itl_count"], tpot_sum=m["tpot_sum"], tpot_count=m["tpot_count"])
            for m in (r._mapping for r in session.execute(text(sql), params))]

# --- histogram samples --------------------------------------------------------------------------------


@dataclass
class HistogramBin:
    """Summed increases of one histogram family for one pool, layout and time bin."""

    pool_id: int
    layout_id: int
    bin_end: int
    counts: list[float] = field(default_factory=list)
    sum: float | None = None
    count: float | None = None


@dataclass
class HistogramBlock:
    """One pool's bins of one histogram family on one layout, as arrays in bin order: what HistogramBin
    holds per bin, without a Python object per bin (a 6 h window of 1,000 pools has 180,000 bins)."""

    pool_id: int
    layout_id: int
    ends: np.ndarray  # (n,) int64: each bin's end, epoch seconds
    counts: np.ndarray  # (n, le) per-`le` cumulative counts summed over the bin
    sums: np.ndarray  # (n,) the histogram's _sum increases (NaN: none stored)
    totals: np.ndarray  # (n,) its _count increases (NaN: none stored)

    def bins(self) -> list[HistogramBin]:
        def nan(x: float) -> float | None:
            return None if math.isnan(x) else x

        return [HistogramBin(self.pool_id, self.layout_id, e, c, nan(s), nan(t)) for e, c, s, t in
                zip(self.ends.tolist(), self.counts.tolist(), self.sums.tolist(), self.totals.tolist(), strict=True)]

    @classmethod
    def of(cls, b: HistogramBin) -> HistogramBlock:
        """A one-bin block (bins from a stored baseline snapshot, or built by hand)."""
        nan = math.nan
        return cls(b.pool_id, b.layout_id, np.array([b.bin_end], dtype=np.int64),
                   np.array([b.counts], dtype=float).reshape(1, len(b.counts)),
                   np.array([nan if b.sum is None else b.sum]), np.array([nan if b.count is None else b.count]))


HISTOGRAM_CHUNK = 250  # pools per statement of histogram_blocks


def histogram_blocks(
    session: Session, *, pool_ids: Sequence[int], families: Sequence[str], start: datetime, end: datetime,
    bucket_seconds: int, bin_seconds: int, n_counts: int,
) -> dict[str, dict[int, list[HistogramBlock]]]:
    """Per-`le` cumulative counts summed per pool, layout and bin of bin_seconds (buckets ending in
    (start, end]), for several families in one scan: {family: {pool_id: [block per layout]}}; the bins are
    the samples of the latency verdict, their sum the window's histogram. The rows come back as one float
    array (NULL: NaN) and are cut into blocks with numpy, never a Python object per bin. The pools are read
    HISTOGRAM_CHUNK at a time (the same statement, prepared once): a fleet's bins in one statement outgrow
    work_mem, and its aggregate and the sort by pool then spill to disk."""
    if any(f not in HISTOGRAM_FAMILIES for f in families):
        raise ValueError(f"unknown histogram family in {families!r}")
    out: dict[str, dict[int, list[HistogramBlock]]] = {f: {} for f in families}
    if not pool_ids or n_counts <= 0 or not families:
        return out
    cols = ", ".join(f"{element_sums(f'{f}_buckets', n_counts, f'{f}_c')}, sum({f}_sum) AS {f}_hsum, "
                     f"sum({f}_count) AS {f}_hcount" for f in families)
    layouts = ", ".join(f"{f}_layout_id AS {f}_layout" for f in families)
    present = " OR ".join(f"b.{f}_buckets IS NOT NULL" for f in families)
    params = {"bin": bin_seconds,  # "ids": per statement, below
              "lo": start - timedelta(seconds=bucket_seconds), "hi": end - timedelta(seconds=bucket_seconds)}
    fam_cols = ", ".join(f"b.{f}_buckets, b.{f}_sum, b.{f}_count" for f in families)
    raw = (f"b.pool_id, {', '.join(f'b.{f}_layout_id' for f in families)}, "
           f"({_END_B} + :bin - 1) / :bin AS gi, {fam_cols}")
    hourly = (f"b.pool_id, {', '.join(f'NULLIF(b.{f}_layout_id, 0) AS {f}_layout_id' for f in families)}, "
              f"(extract(epoch FROM b.hour_start)::bigint + 3600 + :bin - 1) / :bin AS gi, {fam_cols}")
    hours = routing.whole_hours(start.timestamp(), end.timestamp()) if bin_seconds % routing.HOUR == 0 else None
    src, extra = routing.select(raw, hourly, hours, width=bucket_seconds, where=present)
    params |= extra
    names = ["pool_id", *(f"{f}_layout" for f in families), "gi"]
    names += [c for f in families for c in (*(f"{f}_c{i}" for i in range(1, n_counts + 1)), f"{f}_hsum", f"{f}_hcount")]
    row = ", ".join(f"coalesce(g.{c}::float8, 'NaN')" for c in names)
    sql = f"""
        SELECT g.pool_id, array_agg(ARRAY[{row}] ORDER BY g.gi) AS v
        FROM (SELECT pool_id, {layouts}, gi, {cols}
              FROM ({src}) AS s
              GROUP BY pool_id, {", ".join(f"{f}_layout_id" for f in families)}, gi) AS g
        GROUP BY g.pool_id
        ORDER BY g.pool_id
    """
    ids = sorted(set(pool_ids))
    rows = [r for i in range(0, len(ids), HISTOGRAM_CHUNK)
            for r in binary_rows(session, sql, params | {"ids": ids[i:i + HISTOGRAM_CHUNK]})]
    if not rows:
        return out
    # one 2-D float8[] per pool (its bins in order; NULL sent as NaN), decoded by frombuffer, not per value;
    # ids and bin numbers are far below 2**53: exact
    arr = np.concatenate([v.reshape(-1, len(names)) for _, v in rows])
    n_fam = n_counts + 2  # counts, sum, count per family, after pool_id, the layouts and gi
    base = 2 + len(families)
    pool_col, gi = arr[:, 0], arr[:, 1 + len(families)]
    for j, f in enumerate(families):
        at = base + j * n_fam
        counts = arr[:, at:at + n_counts]
        layout = arr[:, 1 + j]
        keep = ~np.isnan(layout) & ~np.isnan(counts).all(axis=1)
        if not keep.any():
            continue
        idx = np.flatnonzero(keep)
        # rows come ordered by pool and bin; a stable sort by (pool, layout) keeps each block in bin order
        idx = idx[np.lexsort((layout[idx], pool_col[idx]))]
        key = np.stack((pool_col[idx], layout[idx]), axis=1)
        cuts = np.flatnonzero((key[1:] != key[:-1]).any(axis=1)) + 1
        per_pool = out[f]
        for part in np.split(idx, cuts):
            block = counts[part]
            has = ~np.isnan(block).all(axis=0)  # the layout's width: columns beyond it are NULL
            pid, lid = int(pool_col[part[0]]), int(layout[part[0]])
            per_pool.setdefault(pid, []).append(HistogramBlock(
                pid, lid, gi[part].astype(np.int64) * bin_seconds, block[:, has],
                arr[part, at + n_counts], arr[part, at + n_counts + 1]))
    return out


def histogram_bins(
    session: Session, *, pool_ids: Sequence[int], families: Sequence[str], start: datetime, end: datetime,
    bucket_seconds: int, bin_seconds: int, n_counts: int,
) -> dict[str, list[HistogramBin]]:
    """histogram_blocks as one HistogramBin per pool, layout and bin (pool by pool, each in bin order)."""
    blocks = histogram_blocks(session, pool_ids=pool_ids, families=families, start=start, end=end,
                              bucket_seconds=bucket_seconds, bin_seconds=bin_seconds, n_counts=n_counts)
    return {f: [b for pool in per_pool.values() for blk in pool for b in blk.bins()] for f, per_pool in blocks.items()}


@dataclass
class EstimateSums:
    """One pool's sums of the estimate's parts over a window (backend.domain.engines.estimate)."""

    pool_id: int
    est_weight_tokens: float | None
    est_verify_steps: float | None
    est_accepted_tokens: float | None
    est_draft_tokens: float | None


def estimate_sums(session: Session, *, pool_ids: Sequence[int], start: datetime, end: datetime,
                  bucket_seconds: int) -> dict[int, EstimateSums]:
    """Per pool, the sums of the estimate parts over the buckets ending in (start, end]: the raw buckets only
    (the hourly rollups keep no estimate; raw buckets are kept `raw_retention_days`). None: no bucket has it."""
    if not pool_ids:
        return {}
    rows = session.execute(text(
        "SELECT pool_id, sum(est_weight_tokens), "
        "sum(est_verify_steps), sum(est_accepted_tokens), sum(est_draft_tokens) FROM pool_buckets "
        "WHERE pool_id = ANY(:ids) AND bucket_start > :lo AND bucket_start <= :hi GROUP BY pool_id"),
        {"ids": list(pool_ids), "lo": start - timedelta(seconds=bucket_seconds),
         "hi": end - timedelta(seconds=bucket_seconds)})
    return {r[0]: EstimateSums(*r) for r in rows}
