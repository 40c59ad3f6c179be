"""The direct-scrape source against bad targets on loopback: one target's labels, slowness, size, dipping
counters or cardinality never stop or spoil the collection of the others (real Postgres, real HTTP)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from backend.config import Settings
from backend.db import scrape_repo
from backend.db.session import session_scope
from backend.notify.delivery import SecretBox
from backend.services import alerts, dispatch, outbox, scrape
from tests.support.hostile import ExpositionServer, counters, exposition, huge, many, trickle, wait_for
from tests.support.stack import factory_for

WIDTH = 1


def settings(url: str, targets: dict[str, str], **kw) -> Settings:
    base = {"database_url": url, "source": "scrape", "bucket_seconds": WIDTH, "settle_seconds": 0,
            "scrape_interval_seconds": 1, "initial_lookback_seconds": 600,
            "scrape_targets": [{"url": u, "labels": {"traffic_class": klass}} for u, klass in targets.items()]}
    return Settings(**{**base, **kw})


def cycle(url: str, s: Settings, scrapes: int = 3) -> tuple[list[dict], dict]:
    """`scrapes` scrapes of every target, then one finalize just far enough ahead that every bucket scraped
    so far is complete (the scrape instants are the real clock's); returns once the clock has passed the
    cursor, so the next scrapes fall in buckets still open."""
    factory = factory_for(url)
    out = [scrape.scrape_targets(factory, s, now=datetime.now(UTC)) for _ in range(scrapes)]
    done = scrape.finalize(factory, s, now=datetime.now(UTC) + timedelta(seconds=WIDTH + 1)).as_dict()
    with factory() as session:
        cursor = session.execute(text("select extract(epoch from last_bucket_end)::float8 from collector_cursors "
                                      "where name = 'scrape'")).scalar()
    wait_for(lambda: cursor is None or time.time() > cursor)
    return out, done


def stored(url: str) -> dict[str, float]:
    """Drafts stored per model."""
    with factory_for(url)() as session:
        return dict(session.execute(text(
            "select p.model_name, sum(b.drafts) from pool_buckets b join pools p on p.id = b.pool_id "
            "group by 1")).all())


def rejections(url: str) -> list[tuple[str, str, str]]:
    with factory_for(url)() as session:
        return [tuple(r) for r in session.execute(text(
            "select rule, model_name, detail from rejections order by id")).all()]


def test_a_label_too_long_is_refused_for_its_target_and_the_others_are_stored(fresh_db_url):
    with ExpositionServer() as srv:
        targets = {srv.route("/a", counters("model-a")): "chat",
                   srv.route("/long", counters("m" * 400)): "chat",
                   srv.route("/class", counters("model-c")): "c" * 130,
                   srv.route("/b", counters("model-b")): "batch"}
        s = settings(fresh_db_url, targets)
        _, summary = cycle(fresh_db_url, s)
        # two scrapes after the first: 2 x 100 drafts for each storable target
        assert stored(fresh_db_url) == {"model-a": 200.0, "model-b": 200.0}
        refused = {(rule, name[:10]) for rule, name, _ in rejections(fresh_db_url)}
        assert refused == {("label_too_long", "m" * 10), ("label_too_long", "model-c")}
        long_row = next(r for r in rejections(fresh_db_url) if r[1].startswith("mmm"))
        assert len(long_row[1]) == 300 and long_row[1].endswith("[400 chars]")
        assert "model_name is 400 characters (at most 300)" in long_row[2]
        assert summary["rows_written"] > 0
        with factory_for(fresh_db_url)() as session:
            cursor = session.execute(text("select last_bucket_end from collector_cursors where name = 'scrape'"))
            assert cursor.scalar_one() is not None
            assert session.execute(text("select status from collection_runs")).scalars().all() == ["ok"]
        # the cursor moves on: the next cycle stores the next increases of the good targets
        cycle(fresh_db_url, s, scrapes=1)
        assert stored(fresh_db_url) == {"model-a": 300.0, "model-b": 300.0}


def test_a_trickling_and_a_huge_target_are_cut_while_the_others_are_collected(fresh_db_url):
    with ExpositionServer() as srv:
        trickling = srv.route("/trickle", trickle(every=2.0))
        chunked = srv.route("/huge", huge(65 * 10**6))
        announced = srv.route("/huge-announced", huge(65 * 10**6, announce=True))
        targets = {srv.route("/a", counters("model-a")): "chat", trickling: "chat", chunked: "chat",
                   announced: "chat", srv.route("/b", counters("model-b")): "batch"}
        # 3 s per target in total (the trickle would take for ever); 1 MiB per body
        s = settings(fresh_db_url, targets, scrape_timeout_seconds=3, scrape_max_body_bytes=2**20,
                     scrape_concurrency=2)
        # a cycle that waited on the trickle would never return: pytest-timeout is the hang deadline
        scrapes, _ = cycle(fresh_db_url, s)
        for one in scrapes:
            assert (one["targets"], one["stored"], one["failed"]) == (5, 2, 3)
            assert "deadline" in one["errors"][scrape.redact(trickling)]
            assert "over the 1048576-byte limit" in one["errors"][scrape.redact(chunked)]
            assert "65000000 bytes announced" in one["errors"][scrape.redact(announced)]
        assert stored(fresh_db_url) == {"model-a": 200.0, "model-b": 200.0}
        rules = {(rule, name) for rule, name, _ in rejections(fresh_db_url)}
        assert rules == {("scrape_deadline", f"(target {scrape.redact(trickling)})"),
                         ("scrape_too_large", f"(target {scrape.redact(chunked)})"),
                         ("scrape_too_large", f"(target {scrape.redact(announced)})")}
        # the huge body was cut, not read to its end: the server saw its client go
        wait_for(lambda: "/huge" in srv.aborted)


def restarts(url: str) -> dict[str, int]:
    with factory_for(url)() as session:
        return dict(session.execute(text(
            "select p.model_name, coalesce(sum(b.restarts), 0) from pool_buckets b join pools p on p.id = b.pool_id "
            "group by 1")).all())


def test_a_dipping_counter_is_not_stored_as_resets_and_a_real_reset_still_counts(fresh_db_url):
    with ExpositionServer() as srv:
        # every counter 0.01 % lower at each scrape (today each dip reads as a reset: ~2 x 1e6 drafts)
        dipping = srv.route("/dip", lambda k: exposition("model-dip", 10_000 - k, created=1000.0))
        # restarted before the third scrape: with a new _created, and without any _created
        created = srv.route("/reset", lambda k: exposition("model-reset", 10 + k if k < 2 else 1,
                                                           created=1000.0 if k < 2 else 2000.0))
        bare = srv.route("/reset-bare", lambda k: exposition("model-bare", 10 + k if k < 2 else 1))
        s = settings(fresh_db_url, {dipping: "chat", created: "chat", bare: "chat"})
        cycle(fresh_db_url, s)
        # dips: increase 0, never a reset; resets: one step before (100) and the value after (100)
        assert stored(fresh_db_url) == {"model-dip": 0.0, "model-reset": 200.0, "model-bare": 200.0}
        assert restarts(fresh_db_url) == {"model-dip": 0, "model-reset": 1, "model-bare": 1}
        flags = [(rule, name, detail) for rule, name, detail in rejections(fresh_db_url)]
        assert {(rule, name) for rule, name, _ in flags} == {("counter_dip", "model-dip")}
        assert all("vllm:spec_decode_num_drafts_total x" in d and "vllm:generation_tokens_total x" in d
                   for _, _, d in flags)
        # the dips were counted: two per counter series over the cycle
        dips = sum(int(d.split("vllm:spec_decode_num_drafts_total x")[1].split(",")[0]) for _, _, d in flags)
        assert dips == 2


def test_past_the_pool_limit_new_pools_are_refused_stored_ones_go_on_and_an_alert_fires(fresh_db_url,
                                                                                       slack_receiver, tmp_path):
    with ExpositionServer() as srv:
        good = {srv.route("/a", counters("model-a")): "chat", srv.route("/b", counters("model-b")): "batch"}
        cycle(fresh_db_url, settings(fresh_db_url, good, max_pools=5))
        assert stored(fresh_db_url) == {"model-a": 200.0, "model-b": 200.0}
        # a target that invents a model per request (here 12 at once): 3 fit under the limit of 5
        flood = [f"flood-{i:02d}" for i in range(12)]
        s = settings(fresh_db_url, {**good, srv.route("/flood", many(flood)): "chat"}, max_pools=5,
                     alert_rules_file=tmp_path / "none.yaml")
        cycle(fresh_db_url, s)
        cycle(fresh_db_url, s, scrapes=1)
        # stored pools go on (a and b: +100 per scrape after their first, 7 scrapes); 3 new ones admitted
        # (4 scrapes of the flood)
        assert stored(fresh_db_url) == {"model-a": 600.0, "model-b": 600.0, "flood-00": 300.0, "flood-01": 300.0,
                                        "flood-02": 300.0}
        refused = {name for rule, name, _ in rejections(fresh_db_url) if rule == "pool_limit"}
        assert refused == set(flood[3:])
        assert all("limit of 5 pools" in d for rule, _, d in rejections(fresh_db_url) if rule == "pool_limit")
        with factory_for(fresh_db_url)() as session:
            assert session.execute(text("select count(*) from pools")).scalar_one() == 5

    # the pool_limit rule fires on the collection-wide target and is delivered like any alert
    factory = factory_for(fresh_db_url)
    now = datetime.now(UTC)
    with session_scope(factory) as session:
        alerts.store_config(session, {"version": 1, "rules": [
            {"name": "pool-limit", "kind": "pool_limit", "lookback": 900, "for": 0, "keep_firing_for": 0}]}, source="test", by="test",
            now=now)
        outbox.create_channel(session, name="slack-main", kind="slack", url=slack_receiver.webhook_url, token=None,
                              options={}, matchers={}, box=SecretBox(s.secret_key), now=now)
        counts = alerts.evaluate(session, settings=s, now=now)
    assert counts["notifications"] == 1
    with factory() as session:
        [(rule, labels, phase, value)] = session.execute(text(
            "select rule, labels, phase, last_value from alert_states")).all()
    assert (rule, labels["model"], phase, value) == ("pool-limit", "(collection)", "firing", 9.0)
    dispatch.deliver_due(factory, s, max_run=5)
    [msg] = slack_receiver.delivered
    text_ = str(msg.json)
    assert "pool-limit" in text_ and "the collection (all pools)" in text_ and "9 new pools refused" in text_
    # nothing refused any more within the lookback: it resolves
    with session_scope(factory) as session:
        alerts.evaluate(session, settings=s, now=now + timedelta(seconds=1000))
    with factory() as session:
        assert session.execute(text("select phase from alert_states")).scalar_one() == "resolved"


def test_runs_left_running_by_a_killed_worker_are_closed_by_the_next_cycle(fresh_db_url):
    now = datetime.now(UTC)
    with session_scope(factory_for(fresh_db_url)) as session:
        for started in (now - timedelta(hours=2), now - timedelta(seconds=10)):  # dead, and one still live
            session.execute(text("insert into collection_runs (kind, source, started_at, status, pools, "
                                 "rows_written, rejected, requests) values ('collect', 'scrape', :t, 'running', "
                                 "0, 0, 0, 0)"), {"t": started})
    with ExpositionServer() as srv:
        cycle(fresh_db_url, settings(fresh_db_url, {srv.route("/a", counters("model-a")): "chat"},
                                     task_time_limit_seconds=1800))
    with factory_for(fresh_db_url)() as session:
        runs = session.execute(text("select status, error, finished_at is not null from collection_runs "
                                    "order by id")).all()
    assert runs[0] == ("abandoned", "abandoned: still running 1800s after its start (its process died)", True)
    assert runs[1] == ("running", None, False)  # younger than the task time limit: may still be alive
    assert runs[2][0] == "ok"


def test_a_series_written_twice_is_refused_for_its_target_and_the_others_are_stored(fresh_db_url):
    def twice(k: int) -> str:  # the drafts line again with its labels in another order
        text = exposition("model-twice", k, klass="chat")
        line = next(x for x in text.splitlines() if x.startswith("vllm:spec_decode_num_drafts_total{"))
        return text + line.replace('model_name="model-twice",traffic_class="chat"',
                                   'traffic_class="chat",model_name="model-twice"') + "\n"

    with ExpositionServer() as srv:
        s = settings(fresh_db_url, {srv.route("/ok", counters("model-ok")): "chat", srv.route("/twice", twice): "chat"})
        cycle(fresh_db_url, s)
        assert stored(fresh_db_url) == {"model-ok": 200.0}
        refused = rejections(fresh_db_url)
        assert refused and {rule for rule, _, _ in refused} == {"malformed_exposition"}
        assert all("vllm:spec_decode_num_drafts_total" in d and "appears twice" in d for _, _, d in refused)
        with factory_for(fresh_db_url)() as session:
            assert session.execute(text("select count(*) from raw_scrapes where target like '%/twice'")).scalar() == 0


def test_layouts_are_stored_once_and_pruned_with_the_last_scrape_using_them(fresh_db_url):
    with ExpositionServer() as srv:
        a, b = srv.route("/a", counters("model-a")), srv.route("/b", counters("model-b"))
        s = settings(fresh_db_url, {a: "chat", b: "chat"}, raw_retention_seconds=60)
        factory = factory_for(fresh_db_url)
        t0 = datetime.now(UTC)
        for k in range(3):
            scrape.scrape_targets(factory, s, now=t0 + timedelta(seconds=k))

        def layouts() -> tuple[int, int, int]:
            with factory() as session:
                return tuple(session.execute(text(
                    "select (select count(*) from raw_scrapes), (select count(distinct layout_id) from raw_scrapes), "
                    "(select count(*) from scrape_layouts)")).one())

        assert layouts() == (6, 2, 2)  # 6 scrapes, 2 layouts stored once each
        with session_scope(factory) as session:  # an hour later nothing refers to them any more
            scrape_repo.prune_raw_scrapes(session, before=t0 + timedelta(hours=1))
        assert layouts() == (0, 0, 0)
