"""An independent reading of a vLLM /metrics exposition, for comparing what specwatch stores with what the
engine itself counts: prometheus_client's own text parser (not specwatch's backend.scrape), every sample
kept under its exact name and labels.

    snap = EngineSnapshot.of(text)
    later.minus(snap)   # the engine's own counter increases between two snapshots (one process run)"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

SPEC = {"drafts": "vllm:spec_decode_num_drafts_total",
        "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
        "accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total"}
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
HISTOGRAMS = {"itl": "vllm:inter_token_latency_seconds", "tpot": "vllm:request_time_per_output_token_seconds"}


def parsed_spec_counts(parsed) -> dict:
    """The spec-decode counters of specwatch's own parse (a ParsedScrape): each counter's values in order, and
    the accepted tokens by position."""
    counts = {key: [v for n, _, v in parsed.samples if n == name] for key, name in SPEC.items()}
    counts["per_pos"] = {lbl["position"]: v for n, lbl, v in parsed.samples if n == PER_POS}
    return counts


def _le(v: str) -> float:
    return math.inf if v == "+Inf" else float(v)


@dataclass
class EngineSnapshot:
    """One engine's spec-decode counters and ITL/TPOT histograms (summed over its `engine` labels)."""

    counters: dict[str, float] = field(default_factory=dict)
    per_pos: list[float] = field(default_factory=list)
    buckets: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # family -> [(le, cumulative)]
    sums: dict[str, float] = field(default_factory=dict)
    counts: dict[str, float] = field(default_factory=dict)
    created: dict[str, float] = field(default_factory=dict)  # sample base name -> its _created value

    @classmethod
    def of(cls, text: str) -> EngineSnapshot:
        snap = cls()
        pos: dict[int, float] = {}
        les: dict[str, dict[float, float]] = {k: {} for k in HISTOGRAMS}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                for key, name in SPEC.items():
                    if s.name == name:
                        snap.counters[key] = snap.counters.get(key, 0.0) + s.value
                if s.name == PER_POS:
                    p = int(s.labels["position"])
                    pos[p] = pos.get(p, 0.0) + s.value
                for key, name in HISTOGRAMS.items():
                    if s.name == name + "_bucket":
                        le = _le(s.labels["le"])
                        les[key][le] = les[key].get(le, 0.0) + s.value
                    elif s.name == name + "_sum":
                        snap.sums[key] = snap.sums.get(key, 0.0) + s.value
                    elif s.name == name + "_count":
                        snap.counts[key] = snap.counts.get(key, 0.0) + s.value
                if s.name.endswith("_created"):
                    snap.created[s.name.removesuffix("_created")] = s.value
        snap.per_pos = [pos[p] for p in sorted(pos)]
        snap.buckets = {k: sorted(v.items()) for k, v in les.items() if v}
        return snap

    def minus(self, before: EngineSnapshot) -> EngineSnapshot:
        """The increases since `before`, a snapshot of the same engine process (no restart between)."""
        return EngineSnapshot(
            counters={k: v - before.counters.get(k, 0.0) for k, v in self.counters.items()},
            per_pos=[a - b for a, b in zip(self.per_pos, before.per_pos or [0.0] * len(self.per_pos), strict=True)],
            buckets={k: [(le, c - dict(before.buckets.get(k, [])).get(le, 0.0)) for le, c in v]
                     for k, v in self.buckets.items()},
            sums={k: v - before.sums.get(k, 0.0) for k, v in self.sums.items()},
            counts={k: v - before.counts.get(k, 0.0) for k, v in self.counts.items()},
        )

    def plus(self, other: EngineSnapshot) -> EngineSnapshot:
        """Two runs' increases added up (e.g. before and after a restart)."""
        return EngineSnapshot(
            counters={k: v + other.counters.get(k, 0.0) for k, v in self.counters.items()},
            per_pos=[a + b for a, b in zip(self.per_pos, other.per_pos, strict=True)],
            buckets={k: [(le, c + dict(other.buckets.get(k, [])).get(le, 0.0)) for le, c in v]
                     for k, v in self.buckets.items()},
            sums={k: v + other.sums.get(k, 0.0) for k, v in self.sums.items()},
            counts={k: v + other.counts.get(k, 0.0) for k, v in self.counts.items()},
        )

    def alpha(self) -> float:
        """Accepted / draft tokens."""
        return self.counters["accepted_tokens"] / self.counters["draft_tokens"]
