"""Time GET /capacity and /capacity/fleet (the overview's saving column) over N pools x D days.

    python -m benchmarks.capacity_bench [--admin-url URL] [--pools 20] [--days 30] [--repeats 10] [--keep]

The fill of benchmarks.api_bench (pools/4 models x 2 classes x (eagle3, off), one row per pool and minute with
generation tokens and running requests), every pool priced and with one replica; in-process calls (routing,
SQL, bootstrap, JSON), p50/p95 with every hour dirty and after the rollup. `run()` is the entry point for
`make bench`."""

from __future__ import annotations

from backend.api.app import create_app
from backend.api.deps import get_now
from backend.cli.serve import migrate
from backend.config import Settings
from benchmarks import common
from benchmarks.api_bench import NOW, fill, time_calls


def run(admin_url: str | None = None, *, pools: int = 20, days: int = 30, repeats: int = 10,
        keep: bool = False) -> dict[tuple[str, str], tuple[float, float]]:
    with common.scratch(admin_url, "specwatch_capbench", keep=keep) as url:
        migrate(url)
        fill(url, pools=pools, days=days)
        app = create_app(Settings(_env_file=None, database_url=url, gpu_hour_price={"*": 2.0},
                                  pool_replicas={"*": {"*": 1}}, anonymous_read=True))
        app.dependency_overrides[get_now] = lambda: NOW
        calls = {f"capacity model-0 window={w}": ("/api/v1/capacity", {"model": "model-0", "window": w})
                 for w in ("1h", "7d", f"{days}d")}
        calls |= {f"capacity/fleet window={w}": ("/api/v1/capacity/fleet", {"window": w}) for w in ("1h", "24h", "7d")}
        return time_calls(app, url, calls, repeats, width=35)


def main(argv: list[str] | None = None) -> None:
    a = common.parser(__doc__, keep=True, pools=20, days=30, repeats=10).parse_args(argv)
    run(a.admin_url, pools=a.pools, days=a.days, repeats=a.repeats, keep=a.keep)


if __name__ == "__main__":
    main()
