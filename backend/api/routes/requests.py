"""Per-request acceptance: POST a batch of vLLM per-request records; read what only they show."""

from __future__ import annotations

import csv
import io
import json
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, Response

from backend.api.auth import Ingester
from backend.api.deps import NowDep, ReadSessionDep, SessionDep, SettingsDep
from backend.schemas import ErrorRead
from backend.services import per_request as svc
from backend.services.windows import resolve_range

router = APIRouter(tags=["per-request"])

WINDOW_DOC = "Duration ending at `end` (default now): 5m, 1h, 24h, 7d. Default 1h."
LABEL_DOC = "Only requests carrying this label value, as name=value (repeatable)."


async def bounded_body(request: Request) -> bytes:
    """The request body, refused (413) past requests_max_body_bytes before it is all read."""
    limit = request.app.state.settings.requests_max_body_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"body of {declared} bytes; at most {limit} (requests_max_body_bytes)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, f"body over {limit} bytes (requests_max_body_bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


Body = Annotated[bytes, Depends(bounded_body)]


@router.post("/requests", summary="Ingest per-request acceptance records",
             responses={401: {"model": ErrorRead}, 403: {"model": ErrorRead},
                        413: {"model": ErrorRead, "description": "Too many records or bytes in one batch"},
                        422: {"model": ErrorRead, "description": "Unparseable batch, a label not allowed or past "
                                                                 "its cardinality limit: nothing stored"}})
def post_requests(body: Body, session: SessionDep, settings: SettingsDep, now: NowDep, _: Ingester,
                  spec_mode: Annotated[str | None, Header(alias="X-Specwatch-Spec-Mode", description=(
                      "Spec mode of the engine that served the records that name none (default: the model's "
                      "only spec mode among its engine pools)"))] = None) -> dict:
    """A JSON array or NDJSON of records `{request_id, model, spec_mode, labels: {traffic_class, tenant,
    route}, finish_time (ISO 8601 or unix seconds), output_tokens, speculative_decoding}` (the object vLLM
    returns under `metrics.speculative_decoding` with `--per-request-spec-decode-metrics summary|detailed`).
    `spec_mode` (or the X-Specwatch-Spec-Mode header) names the spec mode of the engine that served the
    request: the records are that pool's per-request source. Without it, the model's only spec mode among
    its engine pools; a model with none or several is refused (422) until it is given.
    Idempotent by request_id. A record breaking a rule (accepted > drafted, histogram not summing to
    steps, K mismatch, negative/NaN counts, ...) is refused and counted by rule; the others are stored.
    Requires a token with role `ingest` (or admin)."""
    try:
        return svc.ingest_body(session, body, settings=settings, now=now, spec_mode=spec_mode).as_dict()
    except svc.BatchTooLarge as exc:
        raise HTTPException(413, str(exc)) from None


def _range(settings, now, window, start, end):
    return resolve_range(now=now, window=window, start=start, end=end,
                         default_seconds=settings.default_window_seconds, max_seconds=settings.max_range_seconds)


@router.get("/requests/acceptance", summary="Per-request α distribution per traffic class",
            responses={404: {"model": ErrorRead}, 422: {"model": ErrorRead}})
def get_distribution(
    session: ReadSessionDep, settings: SettingsDep, now: NowDep,
    model: Annotated[str, Query(description="model_name")],
    traffic_class: Annotated[str | None, Query(description="one class only")] = None,
    label: Annotated[list[str] | None, Query(description=LABEL_DOC)] = None,
    window: Annotated[str | None, Query(description=WINDOW_DOC)] = None,
    start: Annotated[str | None, Query()] = None, end: Annotated[str | None, Query()] = None,
) -> dict:
    """Per class, over the requests that finished in the window: α histogram (20 bins), share of requests
    below the α threshold, P10/P50/P90 of per-request α (linear interpolation), the request-weighted mean α
    next to the draft-token-weighted (pooled, ΣA/ΣD) α, and both by output-length band (powers of two)."""
    return svc.distribution(session, model=model, rng=_range(settings, now, window, start, end), settings=settings,
                            traffic_class=traffic_class, label_filter=svc.parse_label_filter(label, settings))


@router.get("/requests/lowest", summary="Export the lowest-acceptance requests",
            responses={404: {"model": ErrorRead}, 422: {"model": ErrorRead}})
def get_lowest(
    session: ReadSessionDep, settings: SettingsDep, now: NowDep,
    model: Annotated[str, Query(description="model_name")],
    traffic_class: Annotated[str | None, Query()] = None,
    label: Annotated[list[str] | None, Query(description=LABEL_DOC)] = None,
    limit: Annotated[int, Query(description="rows (at most requests_export_max)")] = 100,
    min_draft_tokens: Annotated[int, Query(ge=0, description="skip requests that drafted fewer tokens")] = 1,
    format: Literal["json", "csv"] = "json",
    window: Annotated[str | None, Query(description=WINDOW_DOC)] = None,
    start: Annotated[str | None, Query()] = None, end: Annotated[str | None, Query()] = None,
):
    """Request ids and labels (never prompt text) ordered by α ascending, for drafter fine-tuning."""
    data = svc.lowest_requests(session, model=model, rng=_range(settings, now, window, start, end), settings=settings,
                               limit=limit, min_draft_tokens=min_draft_tokens, traffic_class=traffic_class,
                               label_filter=svc.parse_label_filter(label, settings))
    if format == "json":
        return data
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["request_id", "traffic_class", "labels", "finish_time", "output_tokens", "drafts", "draft_tokens",
                "accepted_tokens", "alpha", "replica"])
    for r in data["requests"]:
        w.writerow([r["request_id"], r["traffic_class"], json.dumps(r["labels"], sort_keys=True),
                    r["finish_time"].isoformat(), r["output_tokens"], r["drafts"], r["draft_tokens"],
                    r["accepted_tokens"], repr(r["alpha"]), r["replica"] or ""])
    return Response(out.getvalue(), media_type="text/csv",
                    headers={"Content-Disposition": 'attachment; filename="lowest-acceptance.csv"'})


@router.get("/requests/reconciliation", summary="Per-request sums vs engine counters",
            responses={404: {"model": ErrorRead}, 422: {"model": ErrorRead}})
def get_reconciliation(
    session: ReadSessionDep, settings: SettingsDep, now: NowDep,
    model: Annotated[str, Query(description="model_name")],
    window: Annotated[str | None, Query(description=WINDOW_DOC)] = None,
    start: Annotated[str | None, Query()] = None, end: Annotated[str | None, Query()] = None,
) -> dict:
    """Drafts, draft tokens and accepted tokens summed from per-request records vs the engine counters of the
    same model over the same buckets, with coverage (per-request ÷ engine; < 1: some requests are not
    reported, e.g. a partial rollout of --per-request-spec-decode-metrics, or n > 1 requests)."""
    return svc.reconciliation(session, model=model, rng=_range(settings, now, window, start, end), settings=settings)
