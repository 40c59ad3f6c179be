"""The latency verdict with numpy's own percentiles (np.quantile over every resample) in place of its
shortcut, resample.linear_quantiles, which places only the order statistics it needs and skips the copies
when no resample is empty: the reference tests/domain/test_verdict_reference.py checks the verdicts against,
field for field and float for float."""

from __future__ import annotations

from collections.abc import Sequence
from unittest import mock

import numpy as np

from backend.domain import verdict


def latency_verdicts(spec: Sequence[Sequence[float]], base: Sequence[Sequence[float]], bounds: Sequence[float],
                     qs: Sequence[float], **kw) -> list[verdict.Verdict]:
    with mock.patch.object(verdict, "linear_quantiles", np.quantile):
        return verdict.latency_verdicts(spec, base, bounds, qs, **kw)
