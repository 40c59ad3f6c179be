"""Per-request acceptance: POST a batch of vLLM per-request records; read what only they show."""

from __future__ import annotations

import csv
import io
import json
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, Response
from pydantic import WithJsonSchema

from backend.api.auth import Ingester, Viewer
from backend.api.deps import NowDep, ReadSessionDep, SessionDep, SettingsDep
from backend.api.routes.shared import window_range
from backend.schemas.common import Duration, ErrorRead, Instant
from backend.services import per_request as svc
from backend.services import request_checks, request_ingest

router = APIRouter(tags=["per-request"])

WINDOW_DOC = "Duration ending at `end` (default now): 5m, 1h, 24h, 7d. Default 1h."
LABEL_DOC = "Only requests carrying this label value, as name=value (repeatable)."
# the form the document declares (the name must also be one of SPECWATCH_REQUESTS_LABELS); parse_label_filter
# refuses any other with a sentence
LabelFilter = Annotated[str, WithJsonSchema({"type": "string", "pattern": "^[^=\\x00]+=[^\\x00]+$"})]


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


# the body as the document gives it: parse_body reads any JSON value (an array of records, or NDJSON: one
# value a line); each record is then checked by itself, refused by rule (`refused_by_rule`) or stored
INGEST_BODY = {"required": True, "description": (
    "Records `{request_id, model, labels: {traffic_class, tenant, route}, finish_time, output_tokens, "
    "speculative_decoding}`: a JSON array, or NDJSON (one record a line). A record that breaks a rule (a NUL "
    "character in its text included) is refused and counted by rule; the others are stored."), "content": {
    "application/json": {"schema": {"description": "A JSON array of records (a single value is one record)."}},
    "application/x-ndjson": {"schema": {"description": "Text: one JSON record a line."}}}}


@router.post("/requests", summary="Ingest per-request acceptance records", openapi_extra={"requestBody": INGEST_BODY},
             responses={401: {"model": ErrorRead}, 403: {"model": ErrorRead},
                        413: {"model": ErrorRead, "description": "Too many records or bytes in one batch"},
                        422: {"model": ErrorRead, "description": "Unparseable batch, a label not allowed or past "
                                                                 "its cardinality limit, too many models for the "
                                                                 "sender or pools: nothing stored"}})
def post_requests(who: Ingester, body: Body, session: SessionDep, settings: SettingsDep, now: NowDep,
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
    A batch that would take its sender (the token) past `requests_max_models_per_sender` distinct models in
    `requests_models_window_seconds`, or the pools past `max_pools`, is refused whole (422), nothing stored.
    Requires a token with role `ingest` (or admin), checked before the body is read."""
    try:
        return request_ingest.ingest_body(session, body, settings=settings, now=now, sender=who.sender,
                                          spec_mode=spec_mode).as_dict()
    except request_checks.BatchTooLarge as exc:
        raise HTTPException(413, str(exc)) from None


def _range(settings, now, window, start, end):
    return window_range(settings, now, window, start, end)


@router.get("/requests/acceptance", summary="Per-request α distribution per traffic class",
            responses={404: {"model": ErrorRead}, 422: {"model": ErrorRead}})
def get_distribution(
    _: Viewer, session: ReadSessionDep, settings: SettingsDep, now: NowDep,
    model: Annotated[str, Query(description="model_name")],
    traffic_class: Annotated[str | None, Query(description="one class only")] = None,
    label: Annotated[list[LabelFilter] | None, Query(description=LABEL_DOC)] = None,
    window: Annotated[Duration | None, Query(description=WINDOW_DOC)] = None,
    start: Annotated[Instant | None, Query()] = None, end: Annotated[Instant | None, Query()] = None,
) -> dict:
    """Per class, over the requests that finished in the window: α histogram (20 bins), share of requests
    below the α threshold, P10/P50/P90 of per-request α (linear interpolation), the request-weighted mean α
    next to the draft-token-weighted (pooled, ΣA/ΣD) α, and both by output-length band (powers of two); both α
    with 95 % intervals by context-length band (`by_context_length`) and, with τ, by concurrency band
    (`by_concurrency`: the record's running_requests, else the engine pool's band of that minute; `basis` says
    which), with the bucket-to-bucket dispersion and the `load_stability` finding (the load_instability
    rule's function and parameters)."""
    return svc.distribution(session, model=model, rng=_range(settings, now, window, start, end), settings=settings,
                            traffic_class=traffic_class, label_filter=svc.parse_label_filter(label, settings))


@router.get("/requests/lowest", summary="Export the lowest-acceptance requests",
            responses={404: {"model": ErrorRead}, 422: {"model": ErrorRead}})
def get_lowest(
    _: Viewer, session: ReadSessionDep, settings: SettingsDep, now: NowDep,
    model: Annotated[str, Query(description="model_name")],
    traffic_class: Annotated[str | None, Query()] = None,
    label: Annotated[list[LabelFilter] | None, Query(description=LABEL_DOC)] = None,
    limit: Annotated[int, Query(ge=1, description="rows (at most requests_export_max)")] = 100,
    min_draft_tokens: Annotated[int, Query(ge=0, description="skip requests that drafted fewer tokens")] = 1,
    format: Literal["json", "csv"] = "json",
    window: Annotated[Duration | None, Query(description=WINDOW_DOC)] = None,
    start: Annotated[Instant | None, Query()] = None, end: Annotated[Instant | None, Query()] = None,
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
    _: Viewer, session: ReadSessionDep, settings: SettingsDep, now: NowDep,
    model: Annotated[str, Query(description="model_name")],
    window: Annotated[Duration | None, Query(description=WINDOW_DOC)] = None,
    start: Annotated[Instant | None, Query()] = None, end: Annotated[Instant | None, Query()] = None,
) -> dict:
    """Drafts, draft tokens and accepted tokens summed from per-request records vs the engine counters of the
    same model over the same buckets, with coverage (per-request ÷ engine; < 1: some requests are not
    reported, e.g. a partial rollout of --per-request-spec-decode-metrics, or n > 1 requests)."""
    return svc.reconciliation(session, model=model, rng=_range(settings, now, window, start, end), settings=settings)
