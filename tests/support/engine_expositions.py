"""The llama.cpp and SGLang exposition fixtures (tests/fixtures/llamacpp-*.prom, sglang-*.prom) at a given scrape:
every counter scaled, named samples set to given values."""

from __future__ import annotations

import re

from tests.support.paths import FIXTURES

SAMPLE_LINE = re.compile(r"(?m)^(?!#)(\S+?)(\{[^}]*\})? (\S+)$")


def exposition(file: str, *, scale: float = 1.0, values: dict[str, float] | None = None,
               model: str | None = None) -> str:
    """The fixture with every sample but `_created` and gauges named in `values` multiplied by `scale`, the
    samples named in `values` (by metric name, any labels) set to that value, and the SGLang model renamed."""
    values = values or {}

    def one(m: re.Match) -> str:
        name, labels, number = m.group(1), m.group(2) or "", m.group(3)
        if name in values:
            number = repr(float(values[name]))
        elif not name.endswith("_created"):
            number = repr(float(number) * scale)
        return f"{name}{labels} {number}"

    text = SAMPLE_LINE.sub(one, (FIXTURES / file).read_text())
    return text.replace('model_name="qwen-7b"', f'model_name="{model}"') if model else text
