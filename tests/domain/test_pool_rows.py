"""Which pools each row sums, per source: engine classes lead, records add classes the engine does not
label, an unlabelled engine pool is the mixed row, mixed is the engine's; never both sources in one row."""

from __future__ import annotations

from dataclasses import dataclass

from backend.domain.pool_rows import ENGINE, MIXED, RECORDS, repeats_class_row, rows


@dataclass(frozen=True)
class P:
    traffic_class: str
    spec_mode: str = "eagle3"
    origin: str = "engine"
    model_name: str = "m"


def _shape(pools) -> list[tuple]:
    return [(r.traffic_class, r.spec_mode, r.source, sorted((p.traffic_class, p.origin) for p in r.pools),
             len(r.records), len(r.engine)) for r in rows(pools, baseline_mode="off", default_class="default")]


def test_unlabelled_engine_pool_is_the_mixed_row_and_classes_come_from_records() -> None:
    pools = [P("default"), P("default", "off"), P("chat", origin="requests"), P("code", origin="requests")]
    assert _shape(pools) == [
        ("chat", "eagle3", RECORDS, [("chat", "requests")], 2, 1),
        ("code", "eagle3", RECORDS, [("code", "requests")], 2, 1),
        (MIXED, "eagle3", ENGINE, [("default", "engine")], 2, 1)]


def test_engine_classes_lead_and_records_only_add_what_the_engine_does_not_label() -> None:
    pools = [P("chat"), P("code"), P("chat", origin="requests"), P("rag", origin="requests")]
    assert _shape(pools) == [
        ("chat", "eagle3", ENGINE, [("chat", "engine")], 1, 1),  # the records of chat: coverage only
        ("code", "eagle3", ENGINE, [("code", "engine")], 0, 1),
        ("rag", "eagle3", RECORDS, [("rag", "requests")], 2, 2),
        (MIXED, "eagle3", ENGINE, [("chat", "engine"), ("code", "engine")], 2, 2)]


def test_records_only_mode_is_mixed_from_its_records_and_engine_only_is_unchanged() -> None:
    assert _shape([P("chat", origin="requests"), P("code", origin="requests")]) == [
        ("chat", "eagle3", RECORDS, [("chat", "requests")], 2, 0),
        ("code", "eagle3", RECORDS, [("code", "requests")], 2, 0),
        (MIXED, "eagle3", RECORDS, [("chat", "requests"), ("code", "requests")], 2, 0)]
    engine_only = [P("chat"), P("chat", "ngram"), P("summarize", "ngram"), P("chat", "off")]
    assert [(t, m, s) for t, m, s, *_ in _shape(engine_only)] == [
        ("chat", "eagle3", ENGINE), (MIXED, "eagle3", ENGINE),
        ("chat", "ngram", ENGINE), ("summarize", "ngram", ENGINE), (MIXED, "ngram", ENGINE)]


def test_a_mixed_row_that_repeats_its_only_class_row() -> None:
    one = rows([P("chat")], baseline_mode="off", default_class="default")
    assert repeats_class_row(one[-1], one)
    split = rows([P("default"), P("chat", origin="requests")], baseline_mode="off", default_class="default")
    assert [r.traffic_class for r in split] == ["chat", MIXED] and not repeats_class_row(split[-1], split)
