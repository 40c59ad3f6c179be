"""Queue groups: which queues each worker process serves. Plain names only (no Celery here): the CLI
(`specwatch worker`, the demo) and the Celery app (workers.celery_app, workers.schedule, which routes each
task to its queue) read them.

`specwatch worker` runs one process per group, `specwatch worker --queues GROUP` one group (one Deployment per group on Kubernetes). Collection shares
its process with nothing that waits on the outside world or computes for long: a scrape that starts late
puts its counts in a later minute, so nothing may hold up the collect process.

  collect  collection: Prometheus collect, direct scrape (its cadence is the data), back-fills; a
           collection shard's queue joins it (workers.celery_app)
  compute  work on stored data only: rollups, retention, fleet snapshots, alert evaluation, rollout
           derivation, ad-hoc tasks. A late evaluation fires later but reads the same stored minutes
           (its `for` runs on its own clock), so it may wait behind a snapshot; it never waits for a
           receiver (deliver) nor delays a scrape (collect)
  deliver  the outbox: Slack, webhooks, Alertmanager (a receiver may take its whole timeout)
  reports  the weekly digest (renders a week of data; its messages go out through deliver)
"""

from __future__ import annotations

DEFAULT_QUEUE = "celery"
GROUPS: dict[str, tuple[str, ...]] = {
    "collect": ("collect", "backfill"),
    "compute": ("rollup", "fleet", "alerts", "rollout", DEFAULT_QUEUE),
    "deliver": ("outbox",),
    "reports": ("reports",),
}


def queue_names() -> list[str]:
    """Every queue the app declares: the default queue (ad-hoc tasks) first, then the groups' queues (the
    collection shards' queues are added by the shard workers themselves)."""
    return [DEFAULT_QUEUE, *sorted(q for queues in GROUPS.values() for q in queues if q != DEFAULT_QUEUE)]


def shard_queue(index: int, count: int) -> str:
    """The queue of one Prometheus collection shard: only the collect workers configured as that shard
    consume it."""
    return f"collect.shard-{index}-of-{count}"


def group_of(queue: str) -> str:
    """The group whose worker serves `queue` (a collection shard's queue: collect)."""
    if queue.startswith("collect.shard-"):
        return "collect"
    for group, queues in GROUPS.items():
        if queue in queues:
            return group
    raise KeyError(queue)


def resolve_queues(spec: str) -> list[str]:
    """`--queues` as given (comma-separated group or queue names; a group stands for its queues) -> the
    queue names, in order, each once. Unknown names raise ValueError naming the known ones."""
    known = set(queue_names())
    out: list[str] = []
    for raw in spec.split(","):
        name = raw.strip()
        if not name:
            continue
        if name in GROUPS:
            names = list(GROUPS[name])
        elif name in known or name.startswith("collect.shard-"):
            names = [name]
        else:
            raise ValueError(f"unknown queue or group {name!r}: groups {', '.join(GROUPS)}; "
                             f"queues {', '.join(queue_names())}")
        out.extend(n for n in names if n not in out)
    if not out:
        raise ValueError(f"no queue named: give groups {', '.join(GROUPS)} or queue names")
    return out
