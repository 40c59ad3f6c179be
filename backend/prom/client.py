"""The one Prometheus adapter: range queries and raw samples through prometheus-api-client, typed errors,
request and byte counts.

Errors are typed so tasks know what to retry: PromUnavailable (connection refused, timeout, 5xx, 429) is
transient; PromQueryError (4xx: a bad query or a limit such as max points per series) is not."""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry


class PromError(Exception):
    pass


class PromUnavailable(PromError):
    """Transient: Prometheus is down, overloaded or slow. Retry later."""


class PromQueryError(PromError):
    """Permanent for this query: Prometheus refused it."""


@dataclass(frozen=True)
class SeriesPoints:
    labels: dict[str, str]
    points: list[tuple[float, float]]  # (unix seconds, value); NaN/Inf kept as float for validation


_STATUS = re.compile(r"HTTP Status Code (\d+)")


def _refused(exc: PrometheusApiClientException) -> PromError:
    m = _STATUS.search(str(exc))
    status = int(m.group(1)) if m else 0
    if status >= 500 or status in (0, 429):
        return PromUnavailable(f"Prometheus answered {status or 'an error'}")
    return PromQueryError(f"Prometheus refused the query ({status}): {str(exc)[:300]}")


class PromClient:
    def __init__(self, url: str, *, timeout: float = 30.0, max_points: int = 11000,
                 headers: dict[str, str] | None = None) -> None:
        self.url = url.rstrip("/")
        self.max_points = max_points
        self.requests = 0
        self.bytes = 0  # response bodies as sent over the wire (gzip-compressed if Prometheus compressed them)
        self.bytes_decoded = 0  # the same bodies decompressed (the JSON parsed)
        session = requests.Session()
        session.hooks["response"].append(self._count)
        self._prom = PrometheusConnect(url=self.url, headers=headers, disable_ssl=True, session=session,
                                       retry=Retry(total=0), timeout=timeout)

    def _count(self, response, *args, **kwargs):
        self.requests += 1
        # the body as sent (chunked framing removed, still compressed), decoded here: urllib3 counts no
        # wire bytes for a chunked answer, which every large Prometheus answer is
        wire = response.raw.read(decode_content=False)
        encoding = response.headers.get("Content-Encoding", "").strip().lower()
        if encoding == "gzip":
            body = zlib.decompress(wire, 16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            body = zlib.decompress(wire)
        else:
            body = wire
        response._content = body  # what response.content / .json() read from now on
        response._content_consumed = True
        self.bytes += len(wire)
        self.bytes_decoded += len(body)
        return response

    def query_range(self, promql: str, start: float, end: float, step: int) -> list[SeriesPoints]:
        """Evaluate promql at start, start+step, ..., end (unix seconds, whole seconds)."""
        points = math.floor((end - start) / step) + 1
        if points > self.max_points:
            raise PromQueryError(f"{points} points per series exceeds the limit of {self.max_points}")
        return self._matrix(lambda: self._prom.custom_query_range(
            promql, datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC), step=str(step)))

    def query_raw(self, selector: str, at: float, seconds: int) -> list[SeriesPoints]:
        """The raw samples of every series matching `selector` in the `seconds` before `at` (an instant query
        of the range selector `selector[seconds s]`: a matrix, every sample as scraped, labels incl. __name__)."""
        return self._matrix(lambda: self._prom.custom_query(f"{selector}[{int(seconds)}s]",
                                                            params={"time": repr(float(at))}))

    def _matrix(self, query: Callable[[], list[dict]]) -> list[SeriesPoints]:
        """Run a matrix query, its failures as PromUnavailable (retry later) or PromQueryError (refused)."""
        try:
            result = query()
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise PromUnavailable(f"Prometheus at {self.url} unreachable: {type(exc).__name__}") from exc
        except PrometheusApiClientException as exc:
            raise _refused(exc) from exc
        except ValueError as exc:  # JSON decoding
            raise PromUnavailable("Prometheus sent an unreadable answer") from exc
        return [SeriesPoints(dict(r.get("metric", {})), [(float(t), float(v)) for t, v in r.get("values", [])])
                for r in result]

    def label_values(self, label: str, match: str, start: float, end: float) -> list[str]:
        """Values of `label` on the series matching `match` with samples in [start, end] (one request)."""
        try:
            r = self._prom._session.get(f"{self.url}/api/v1/label/{label}/values", timeout=self._prom._timeout,
                                        params={"match[]": match, "start": start, "end": end},
                                        headers=self._prom.headers)
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise PromUnavailable(f"Prometheus at {self.url} unreachable: {type(exc).__name__}") from exc
        if r.status_code >= 500 or r.status_code == 429:
            raise PromUnavailable(f"Prometheus answered {r.status_code}")
        if r.status_code >= 400:
            raise PromQueryError(f"Prometheus refused the label query ({r.status_code}): {r.text[:300]}")
        return sorted(r.json().get("data") or [])

    def ready(self) -> bool:
        try:
            return self._prom.check_prometheus_connection()
        except requests.RequestException:
            return False
