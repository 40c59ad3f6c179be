"""What the wire models of every resource share: the base, the input forms, errors, windows, provenance."""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

# Input forms, declared once for the OpenAPI document and read by backend.services.windows' parsers, which
# refuse any other form with a sentence saying what was expected. Both match the empty string: an empty
# parameter is an absent one (the default). NO_NUL_PATTERN: text Postgres can hold (no NUL); every string
# input carries it in the document (backend.api.openapi) and is refused with it (backend.api.limits.RefuseNul).
NO_NUL_PATTERN = r"^[^\x00]*$"
INSTANT_PATTERN = (r"^(?:[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])[Tt]"
                   r"(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,9})?)?"
                   r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])?|[0-9]{1,12}(?:\.[0-9]{1,9})?)?$")
DURATION_PATTERN = r"^(?:[0-9]{1,12}[smhdw]?)?$"
INSTANT_FORM = ("An RFC 3339 time such as 2026-11-30T12:00:00Z (seconds, fraction and offset optional; "
                "without an offset it is UTC), or unix seconds; between 1970 and 2200. Empty: the default.")
DURATION_FORM = "A duration: whole seconds or a number of s, m, h, d, w (e.g. 5m, 1h, 24h, 7d). Empty: the default."
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
