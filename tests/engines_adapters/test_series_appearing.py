"""A counter series that appears mid-run on a target being scraped continuously started from 0 after the
previous scrape: its first value is an increase, on the direct-scrape path (backend.scrape.assemble) and on the
Prometheus raw path (backend.prom.assemble.series_increases), for every engine. llama-server writes its
per-position counters only once a drafting request has finished; a client library's labelled child appears on
its first increment. Where a restart may lie between the two scrapes (the restart series dropped, changed its
`_created`, is missing, or the interval is longer than max_gap) the first value stays a base, as before.
Hand-computed known answers."""

from __future__ import annotations

from backend.domain.buckets import RawSample, appeared_from, ran_on
from backend.domain.records import PoolKey
from backend.prom.assemble import series_increases
from backend.prom.client import SeriesPoints
from backend.prom.queries import RawQuery
from backend.scrape.assemble import PoolNaming, Scrape, assemble
from backend.scrape.layout import LayoutCache
from backend.scrape.parse import parse

NAMING = PoolNaming("traffic_class", "spec_mode", "default", "on")
WIDTH = 60
BASE = 1_800_000_000  # a bucket boundary
MAX_GAP = 45.0
TARGET = "http://l:8080/metrics"
LLAMA = {"model_name": "tiny", "traffic_class": "chat", "spec_mode": "draft"}
LLAMA_POOL = PoolKey("tiny", "chat", "draft")
PER_POS = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"


def llama(gen: float, accepted: float, per_pos: dict[int, float]) -> str:
    lines = ["# TYPE llamacpp:tokens_predicted_total counter", f"llamacpp:tokens_predicted_total {gen}",
             "# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter",
             f"llamacpp:spec_decode_num_accepted_tokens_total {accepted}"]
    if per_pos:
        lines.append(f"# TYPE {PER_POS} counter")
        lines += [f'{PER_POS}{{position="{p}"}} {v}' for p, v in per_pos.items()]
    return "\n".join(lines) + "\n"


def records(texts: list[tuple[float, str]], labels: dict, *, first: int = BASE, last: int = BASE,
            dip_tolerance: float = 0.0) -> dict:
    layouts = LayoutCache()
    scrapes = [Scrape.of(TARGET, t, parse(text), layouts) for t, text in texts]
    return assemble(scrapes, target_labels={TARGET: labels}, width=WIDTH, first_bucket=first, last_bucket=last,
                    max_gap=MAX_GAP, naming=NAMING, dip_tolerance=dip_tolerance)


# --- the domain rule ----------------------------------------------------------------------------------------

def test_ran_on_needs_no_gap_no_created_change_and_no_reset():
    assert ran_on(RawSample(10, 100), RawSample(20, 100), max_gap=15)
    assert not ran_on(RawSample(10, 100), RawSample(30, 200), max_gap=15)  # longer than max_gap
    assert not ran_on(RawSample(10, 100, 5.0), RawSample(20, 200, 7.0), max_gap=15)  # _created changed
    assert ran_on(RawSample(10, 100, 5.0), RawSample(20, 200, None), max_gap=15)  # one has none: no evidence
    assert not ran_on(RawSample(10, 100), RawSample(20, 99), max_gap=15)  # any drop is a reset at tolerance 0
    assert ran_on(RawSample(10, 100), RawSample(20, 95), max_gap=15, dip_tolerance=0.1)  # a dip, not a reset
    assert not ran_on(RawSample(10, 100), RawSample(20, 89), max_gap=15, dip_tolerance=0.1)


def test_appeared_from_starts_at_the_previous_scrape_or_at_created_between():
    assert appeared_from(RawSample(20, 7), 10) == RawSample(10, 0.0)
    assert appeared_from(RawSample(20, 7, 15.0), 10) == RawSample(15.0, 0.0, 15.0)
    assert appeared_from(RawSample(20, 7, 10.0), 10) is None  # existed at the previous scrape: not 0 then
    assert appeared_from(RawSample(20, 7, 3.0), 10) is None
    assert appeared_from(RawSample(20, 7, float("nan")), 10) is None


# --- the direct-scrape path ----------------------------------------------------------------------------------

def test_llamacpp_per_position_counters_appearing_mid_run_count_from_zero():
    """The per-position family is absent at BASE+10, appears at BASE+20 (positions 0 and 1) and position 2 at
    BASE+30; the server ran on throughout (tokens_predicted 10 -> 50 -> 80). Stored: every value from 0."""
    texts = [(BASE + 10, llama(10, 0, {})),
             (BASE + 20, llama(50, 10, {0: 7, 1: 3})),
             (BASE + 30, llama(80, 14, {0: 9, 1: 4, 2: 1}))]
    rec = records(texts, LLAMA)[(LLAMA_POOL, BASE)]
    assert rec.accepted_tokens == 14
    assert rec.accepted_per_pos == [9, 4, 1]  # before: [2, 1] (the first values dropped)
    assert sum(rec.accepted_per_pos) == rec.accepted_tokens
    assert rec.generation_tokens == 70 and rec.restarts == 0


def test_a_restart_between_the_scrapes_keeps_the_first_value_a_base():
    """tokens_predicted fell 50 -> 5 between BASE+20 and BASE+30: the server restarted, so the per-position
    values first seen at BASE+30 count only from the next scrape on."""
    texts = [(BASE + 10, llama(40, 6, {})),
             (BASE + 20, llama(50, 6, {})),
             (BASE + 30, llama(5, 3, {0: 2, 1: 1})),
             (BASE + 40, llama(25, 8, {0: 5, 1: 3}))]
    rec = records(texts, LLAMA)[(LLAMA_POOL, BASE)]
    assert rec.accepted_per_pos == [3, 2]
    assert rec.restarts == 1
    assert rec.accepted_tokens == 3 + 5  # the reset's new value, then the increase


def test_a_gap_longer_than_max_gap_keeps_the_first_value_a_base():
    texts = [(BASE + 1, llama(10, 0, {})),
             (BASE + 50, llama(50, 10, {0: 7, 1: 3})),  # 49 s > max_gap: no increment at all
             (BASE + 55, llama(60, 12, {0: 8, 1: 4}))]
    rec = records(texts, LLAMA)[(LLAMA_POOL, BASE)]
    assert rec.accepted_per_pos == [1, 1]
    assert rec.accepted_tokens == 2


def test_a_target_whose_first_scrape_has_the_series_counts_it_from_the_next_one():
    texts = [(BASE + 10, llama(10, 10, {0: 7, 1: 3})), (BASE + 20, llama(20, 12, {0: 8, 1: 4}))]
    rec = records(texts, LLAMA)[(LLAMA_POOL, BASE)]
    assert rec.accepted_per_pos == [1, 1]


def vllm(rows: list[tuple[str, dict, float]], created: dict[tuple[str, str], float]) -> str:
    """A vLLM-style exposition: (name, labels, value) rows; `created`: (base, engine) -> _created."""
    out = []
    for name, labels, value in rows:
        lb = ",".join(f'{k}="{v}"' for k, v in {"model_name": "m", **labels}.items())
        out.append(f"{name}{{{lb}}} {value}")
        base = name.removesuffix("_total")
        key = (base, labels.get("engine", "0"), labels.get("position", ""))
        if key in created:
            out.append(f"{base}_created{{{lb}}} {created[key]}")
    return "# TYPE vllm:generation_tokens_total counter\n" + "\n".join(out) + "\n"


GEN, DRAFTS = "vllm:generation_tokens_total", "vllm:spec_decode_num_drafts_total"
VPOS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def test_vllm_a_labelled_child_created_between_scrapes_counts_from_its_created_time():
    """Scrapes at BASE+50 and BASE+70 (buckets BASE and BASE+60). A per-position child created at BASE+65
    holds 8 at BASE+70: all of it accrued after BASE+60, so all in bucket BASE+60 (not split 10:20 across
    the boundary). A child whose `_created` (BASE+40) is before the previous scrape was there but not shown:
    its first value stays a base. The engine's generation counter kept its `_created`: it ran on."""
    gen_created = {("vllm:generation_tokens", "0", ""): BASE - 500.0}
    first = vllm([(GEN, {"engine": "0"}, 100)], gen_created)
    second = vllm([(GEN, {"engine": "0"}, 130), (VPOS, {"engine": "0", "position": "0"}, 8),
                   (VPOS, {"engine": "0", "position": "1"}, 4)],
                  {**gen_created, ("vllm:spec_decode_num_accepted_tokens_per_pos", "0", "0"): BASE + 65.0,
                   ("vllm:spec_decode_num_accepted_tokens_per_pos", "0", "1"): BASE + 40.0})
    got = records([(BASE + 50, first), (BASE + 70, second)], {}, first=BASE, last=BASE + 60)
    pool = PoolKey("m", "default", "on")
    assert got[(pool, BASE + 60)].accepted_per_pos == [8]
    assert got[(pool, BASE)].accepted_per_pos is None
    # the generation counter's 30 split by time: 10 of the 20 s in bucket BASE, 10 in BASE+60
    assert (got[(pool, BASE)].generation_tokens, got[(pool, BASE + 60)].generation_tokens) == (15, 15)


def test_vllm_a_data_parallel_engine_that_joins_late_starts_from_its_first_value():
    """Engine 1's series (its own generation counter among them) first appear at BASE+20: its restart series
    is not in the scrape before, so nothing tells that it ran on; engine 0's counter does not speak for it."""
    first = vllm([(GEN, {"engine": "0"}, 100), (DRAFTS, {"engine": "0"}, 10)], {})
    second = vllm([(GEN, {"engine": "0"}, 110), (DRAFTS, {"engine": "0"}, 12),
                   (GEN, {"engine": "1"}, 500), (DRAFTS, {"engine": "1"}, 50)], {})
    third = vllm([(GEN, {"engine": "0"}, 120), (DRAFTS, {"engine": "0"}, 13),
                  (GEN, {"engine": "1"}, 520), (DRAFTS, {"engine": "1"}, 55)], {})
    got = records([(BASE + 10, first), (BASE + 20, second), (BASE + 30, third)], {})
    rec = got[(PoolKey("m", "default", "on"), BASE)]
    assert rec.generation_tokens == 20 + 20
    assert rec.drafts == 3 + 5


def test_vllm_a_drafts_counter_appearing_with_its_engine_running_on_counts_from_zero():
    first = vllm([(GEN, {"engine": "0"}, 100)], {})
    second = vllm([(GEN, {"engine": "0"}, 110), (DRAFTS, {"engine": "0"}, 6)], {})
    third = vllm([(GEN, {"engine": "0"}, 120), (DRAFTS, {"engine": "0"}, 9)], {})
    rec = records([(BASE + 10, first), (BASE + 20, second), (BASE + 30, third)], {})[
        (PoolKey("m", "default", "on"), BASE)]
    assert rec.drafts == 9


# --- the Prometheus raw path ----------------------------------------------------------------------------------

def _raw(field: str, metric: str, engine: str = "llamacpp", part: str = "value", group: str | None = None) -> RawQuery:
    return RawQuery(field=field, part=part, group=group, selector=f'{{__name__="{metric}"}}', engine=engine)


def test_prometheus_raw_per_position_series_appearing_mid_window_count_from_zero():
    """Prometheus stamps a scrape's samples with one time. The per-position series' first samples at BASE+20
    (positions 0, 1) and BASE+30 (position 2) follow samples of the target's tokens_predicted at BASE+10 and
    BASE+20 that did not drop: their first values are increases from 0."""
    tl = {"instance": "l:8080", "job": "llama", "model_name": "tiny"}
    gen = SeriesPoints({"__name__": "llamacpp:tokens_predicted_total", **tl},
                       [(BASE + 10, 10.0), (BASE + 20, 50.0), (BASE + 30, 80.0)])
    pos = [SeriesPoints({"__name__": PER_POS, "position": "0", **tl}, [(BASE + 20, 7.0), (BASE + 30, 9.0)]),
           SeriesPoints({"__name__": PER_POS, "position": "1", **tl}, [(BASE + 20, 3.0), (BASE + 30, 4.0)]),
           SeriesPoints({"__name__": PER_POS, "position": "2", **tl}, [(BASE + 30, 1.0)])]
    other = SeriesPoints({"__name__": PER_POS, "position": "0", **tl, "instance": "other:8080"},
                         [(BASE + 20, 5.0), (BASE + 30, 6.0)])  # another target: no restart series seen
    answers = [(_raw("generation_tokens", "llamacpp:tokens_predicted_total"), [gen]),
               (_raw("accepted_per_pos", PER_POS, group="position"), [*pos, other])]
    got = {(s.name, s.labels.get("instance"), s.labels.get("position")): s.inc.by_bucket.get(BASE)
           for s in series_increases(answers, width=WIDTH, first_bucket=BASE, last_bucket=BASE, max_gap=MAX_GAP)}
    assert got[(PER_POS, "l:8080", "0")] == 9
    assert got[(PER_POS, "l:8080", "1")] == 4
    assert got[(PER_POS, "l:8080", "2")] == 1
    assert got[(PER_POS, "other:8080", "0")] == 1
    assert got[("llamacpp:tokens_predicted_total", "l:8080", None)] == 70


def test_prometheus_raw_keeps_the_first_value_a_base_after_a_restart_or_at_the_windows_start():
    tl = {"instance": "l:8080", "job": "llama", "model_name": "tiny"}
    gen = SeriesPoints({"__name__": "llamacpp:tokens_predicted_total", **tl},
                       [(BASE + 10, 50.0), (BASE + 20, 5.0), (BASE + 30, 25.0)])  # restarted before BASE+20
    late = SeriesPoints({"__name__": PER_POS, "position": "0", **tl}, [(BASE + 20, 2.0), (BASE + 30, 5.0)])
    early = SeriesPoints({"__name__": PER_POS, "position": "1", **tl}, [(BASE + 10, 2.0), (BASE + 30, 5.0)])
    answers = [(_raw("generation_tokens", "llamacpp:tokens_predicted_total"), [gen]),
               (_raw("accepted_per_pos", PER_POS, group="position"), [late, early])]
    got = {s.labels.get("position"): s.inc.by_bucket.get(BASE)
           for s in series_increases(answers, width=WIDTH, first_bucket=BASE, last_bucket=BASE, max_gap=MAX_GAP)}
    assert got["0"] == 3
    assert got["1"] == 3
