"""Wire models: the API <-> dashboard contract, by resource; this module holds what every resource shares.

Undefined values are `null`, never 0. Stable names: fields may be added, never renamed. Time series are columnar
(one list per field, aligned with `t`), which is what plotly wants and keeps the JSON small.
"""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

MIXED = "mixed"

# Input forms: one declaration for the OpenAPI document and the validation.
# Text the database can hold: no NUL character (Postgres refuses it). Every string input of the API carries
# this pattern in the OpenAPI document (backend.api.openapi) and is refused with it (backend.api.limits.RefuseNul).
NO_NUL_PATTERN = r"^[^\x00]*$"
# An instant: RFC 3339 (`T`, seconds and fraction optional, `Z` or an offset; without one it is UTC), or unix
# seconds. The time must also exist and lie between 1970 and 2200 (backend.services.windows.parse_instant).
INSTANT_PATTERN = (r"^(?:[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])[Tt]"
                   r"(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,9})?)?"
                   r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])?|[0-9]{1,12}(?:\.[0-9]{1,9})?)?$")
# A duration: whole seconds, or a number of s, m, h, d or w (`90s`, `5m`, `1h`, `7d`, `2w`); positive
# (backend.services.windows.parse_duration).
DURATION_PATTERN = r"^(?:[0-9]{1,12}[smhdw]?)?$"
# Both patterns match the empty string too: an empty parameter is an absent one (the default).
INSTANT_FORM = ("An RFC 3339 time such as 2026-11-30T12:00:00Z (seconds, fraction and offset optional; "
                "without an offset it is UTC), or unix seconds; between 1970 and 2200. Empty: the default.")
DURATION_FORM = "A duration: whole seconds or a number of s, m, h, d, w (e.g. 5m, 1h, 24h, 7d). Empty: the default."
# Declared here for the document; read by the parsers named above, which refuse any other form with a sentence
# saying what was expected (a pattern mismatch from the validation layer would only repeat the expression).
Instant = Annotated[str, WithJsonSchema({"type": "string", "pattern": INSTANT_PATTERN})]
Duration = Annotated[str, WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN})]


class Wire(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class ErrorRead(Wire):
    detail: str
    code: str | None = Field(default=None, description="What was refused, stable for clients: e.g. unknown_model, "
                                                        "unknown_traffic_class, unknown_spec_mode, spec_mode_required, "
                                                        "invalid_parameter.")
    known_models: list[str] | None = Field(default=None, description="Set on 404 for an unknown model.")
    known: list[str] | None = Field(default=None, description="Set on 404 for another unknown name, and on 422 "
                                                              "spec_mode_required: the model's spec modes.")


class WindowRead(Wire):
    start: datetime
    end: datetime
    seconds: float


class PoolRefRead(Wire):
    """Where a number was measured (provenance)."""

    id: int
    model_name: str
    traffic_class: str
    spec_mode: str
    num_spec_tokens: int | None = None


class ReadsRead(Wire):
    """Where this answer's data was read, when a read replica is configured: its age beyond the rows'
    freshness is the replica's lag."""

    reads_from: Literal["standby", "primary"]
    lag_seconds: float | None = Field(default=None, description="The standby's replication lag (see /ready).")
    fallback: str | None = Field(default=None, description="Why the primary was read instead of the standby.")
