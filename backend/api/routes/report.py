"""The weekly rollout report: JSON for the dashboard, and exports (Markdown, CSV, PDF) of any week."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response
from pydantic import WithJsonSchema

from backend.api.auth import read_aggregate
from backend.api.deps import NowDep, ReadSessionDep, SettingsDep
from backend.services import report, report_export

router = APIRouter(tags=["report"], dependencies=[Depends(read_aggregate)])
# the form the document declares; report.parse_week reads it and refuses any other with a sentence
Week = Annotated[str, WithJsonSchema({"type": "string", "pattern": report.WEEK_PATTERN})]
WeekQuery = Annotated[Week | None, Query(description="ISO week, e.g. 2026-W48; default (or empty): last week")]


@router.get("/reports/weekly")
def get_weekly(session: ReadSessionDep, settings: SettingsDep, now: NowDep,
               week: WeekQuery = None,
               model: str | None = None) -> dict[str, Any]:
    week = week or report.previous_week(report.week_of(now, settings.report_timezone))
    return report.weekly(session, week=week, now=now, settings=settings, model=model)


@router.get("/reports/weekly/export", response_class=Response, responses={200: {
    "description": "The report as a file (Content-Disposition: attachment)",
    "content": {"text/markdown": {"schema": {"type": "string"}}, "text/csv": {"schema": {"type": "string"}},
                "application/pdf": {"schema": {"type": "string", "format": "binary"}}}}})
def export_weekly(session: ReadSessionDep, settings: SettingsDep, now: NowDep,
                  week: WeekQuery = None,
                  format: Literal["md", "csv", "pdf"] = "md", model: str | None = None) -> Response:
    week = week or report.previous_week(report.week_of(now, settings.report_timezone))
    data = report.weekly(session, week=week, now=now, settings=settings, model=model)
    return Response(content=report_export.export(data, format), media_type=report_export.MEDIA[format],
                    headers={"Content-Disposition": f'attachment; filename="specwatch-{week}.{format}"'})
