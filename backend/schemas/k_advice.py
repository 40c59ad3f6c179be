"""The K advisor from measured acceptance (GET /k-advice)."""

from datetime import datetime

from pydantic import Field

from backend.schemas.common import WindowRead, Wire


class KRowRead(Wire):
    k: int = Field(description="Candidate draft length K'.")
    tau: float | None = Field(None, description="Expected tokens per step 1 + u_1 + ... + u_K'.")
    eps: float | None = Field(None, description="Modelled step overhead eps(K') = eps0 + K' eps_tok of the "
                              "class; for the mix, the classes' pooled step time (null where tau is).")
    speedup: float | None = Field(None, description="tau / (1 + eps).")
    extrapolated: bool = Field(description="K' above the measured K: p_j beyond K come from the fitted decay.")


class KFitRead(Wire):
    method: str
    positions: list[int] = Field(description="Positions (1-based) the fit used.")
    log_intercept: float | None = None
    log_slope: float | None = None
    decay_per_position: float | None = Field(None, description="exp(log_slope): p_{j+1} / p_j of the fit.")
    rising: bool = False


class KOverheadRead(Wire):
    eps0: float
    eps_tok: float
    source: str
    points: list[dict[str, float]] = Field(default_factory=list, description="(k, eps) measurements used.")
    note: str | None = None


class KAdviceRead(Wire):
    name: str = Field(description="Traffic class, or 'mixed' for the traffic mix.")
    current_k: int
    rows: list[KRowRead]
    best_k: int | None = None
    best_speedup: float | None = None
    current_speedup: float | None = None
    gain: float | None = Field(None, description="best / current speedup - 1.")
    best_is_extrapolated: bool = False
    flags: list[str] = Field(default_factory=list)
    conditional: list[float | None] | None = Field(None, description="Measured p_1..p_K.")
    fit: KFitRead | None = None
    drafts: float | None = None
    output_tokens: float | None = Field(None, description="N + A: the class's weight in the mix.")
    eps_step: float | None = Field(None, description="The class's step overhead at the current K: mean ITL spec / "
                                   "baseline - 1 in its band, or the band default (see eps_step_source); for "
                                   "the mix, its classes' pooled step time at K.")
    eps_step_source: str | None = Field(None, description="measured | default-for-band; 'pooled from classes' "
                                        "for the mix.")
    overhead: KOverheadRead | None = Field(None, description="eps(K) = eps0 + K eps_tok used for these rows "
                                           "(null for the mix: each class keeps its own).")


class KAdviceModeRead(Wire):
    spec_mode: str
    drafter: str | None = None
    k: int | None = Field(None, description="The K every class runs (null when they differ).")
    concurrency_band: str | None = None
    classes: list[KAdviceRead] = Field(default_factory=list)
    mix: KAdviceRead | None = None
    unavailable: dict[str, str] = Field(default_factory=dict, description="Class -> why it has no advice.")
    incomplete: bool = Field(False, description="The mix leaves out classes without a per-position curve.")


class KAdviceSetRead(Wire):
    model_name: str
    window: WindowRead
    generated_at: datetime
    modes: list[KAdviceModeRead]
    note: str
