"""The one wording for a figure an engine gives exactly, as an estimate, or not at all.

Every surface (dashboard pages, the weekly report and its exports, alert text) words a pool's figure through
these functions, so "not exposed by llama.cpp" and "estimated" read the same everywhere and a figure an
engine does not expose is never shown as 0 or left blank. Pure: no I/O.

Figures: the spec-decode ones of `FIGURES` (acceptance_rate, accept_length, drafts, ...; exact, estimated or
not exposed, by `figure_basis`) and the latency ones (itl, tpot, ttft: exposed where the engine has the
histogram)."""

from __future__ import annotations

from collections.abc import Iterable

from backend.domain.engines import ENGINE_NAMES, FIGURES, engines, figure_basis

ESTIMATED = "estimated"
NOT_EXPOSED_BY = "not exposed by"
LATENCY = ("itl", "tpot", "ttft")
# the summary's names of the same figures
ALIASES = {"mean_acceptance_length": "accept_length", "tau": "accept_length"}
# figures computed from an exact figure only (never from an estimate): exposed where that one is exact
EXACT_ONLY = {"margin": "acceptance_rate", "seed_alpha": "acceptance_rate", "per_token_acceptance": "accepted_per_pos"}


def engine_label(name: str | None) -> str:
    """As shown: vLLM, llama.cpp, SGLang (an unknown name as given; None: vLLM, the default engine)."""
    found = engines().get(name or "vllm")
    return found.label if found else str(name)


def not_exposed_text(engine_name: str | None) -> str:
    """The text shown in place of a figure the engine does not expose (never 0, never blank)."""
    return f"{NOT_EXPOSED_BY} {engine_label(engine_name)}"


def _figure(figure: str) -> str:
    return ALIASES.get(figure, figure)


def exposed(engine_name: str | None, figure: str) -> bool:
    figure = _figure(figure)
    name = engine_name or "vllm"
    if figure in EXACT_ONLY:
        basis = figure_basis(name, EXACT_ONLY[figure])
        return basis is not None and basis.exact
    if figure in LATENCY:
        return engines()[name].reading(figure) is not None
    if figure in FIGURES:
        return figure_basis(name, figure) is not None
    return True  # figures every engine's pools have (generated tokens, freshness, ...)


def estimated(engine_name: str | None, figure: str) -> bool:
    """True: the engine gives the figure only as an estimate (from gauges), never summed with exact ones."""
    figure = _figure(figure)
    if figure not in FIGURES:
        return False
    basis = figure_basis(engine_name or "vllm", figure)
    return basis is not None and not basis.exact


def basis_text(engine_name: str | None, figure: str) -> str | None:
    """What an estimate rests on (its weighting), or an exact figure's caveat (builds lacking a counter)."""
    figure = _figure(figure)
    if figure not in FIGURES:
        return None
    basis = figure_basis(engine_name or "vllm", figure)
    if basis is None:
        return None
    return basis.estimate_basis if not basis.exact else basis.note


def figure_text(engine_name: str | None, figure: str, value_text: str | None, *, none: str = "—") -> str:
    """A pool's figure as shown: "not exposed by <engine>" where the engine has none, "<value> (estimated)"
    for an estimate, the value otherwise; `none` where an exposed figure has no data in the window."""
    if not exposed(engine_name, figure):
        return not_exposed_text(engine_name)
    if value_text is None:
        return none
    return f"{value_text} ({ESTIMATED})" if estimated(engine_name, figure) else value_text


def estimate_only(engine_names: Iterable[str | None], figure: str) -> bool:
    """True when every engine of a row gives `figure` only as an estimate (its exact sum is then empty)."""
    names = list(engine_names)
    return bool(names) and all(estimated(n, figure) for n in names)


def excluded_text(engine_names: Iterable[str | None], figure: str = "acceptance_rate") -> str | None:
    """For a row summing several pools' exact counts: which engines' pools it leaves out because their
    `figure` is an estimate (None: none left out)."""
    left = sorted({engine_label(n) for n in engine_names if estimated(n, figure)})
    if not left:
        return None
    return f"exact counts only: {', '.join(left)} pools excluded ({ESTIMATED}, not summed with exact figures)"


def engines_text(engine_names: Iterable[str | None]) -> str:
    """A row's engines as shown, in the fixed order vLLM, llama.cpp, SGLang: "vLLM + SGLang"."""
    names = {n or "vllm" for n in engine_names}
    known = [n for n in ENGINE_NAMES if n in names] + sorted(names - set(ENGINE_NAMES))
    return " + ".join(engine_label(n) for n in known)


def row_figure_text(engine_names: Iterable[str | None], figure: str, value_text: str | None, *,
                    none: str = "—") -> str:
    """A row summing pools of several engines: "not exposed by A, B" where none of them exposes the figure,
    "(estimated)" where every one that does gives only an estimate, the value otherwise."""
    names = sorted({n or "vllm" for n in engine_names}) or ["vllm"]
    if len(names) == 1:
        return figure_text(names[0], figure, value_text, none=none)
    showing = [n for n in names if exposed(n, figure)]
    if not showing:
        return f"{NOT_EXPOSED_BY} {engines_text(names).replace(' + ', ', ')}"
    if value_text is None:
        return none
    return f"{value_text} ({ESTIMATED})" if all(estimated(n, figure) for n in showing) else value_text


# the figure each alert rule evaluates on a pool's exact counts (latency rules: the metrics they name)
RULE_FIGURES = {"alpha_low": ("acceptance_rate",), "margin_negative": ("accept_length",),
                "acceptance_drift": ("accepted_per_pos",)}
FIGURE_WORDS = {"acceptance_rate": "acceptance rate", "accept_length": "mean accepted length",
                "accepted_per_pos": "per-position acceptance", "itl": "ITL", "tpot": "TPOT", "ttft": "TTFT"}


def unevaluable_text(engine_names: Iterable[str | None], figures: Iterable[str]) -> str | None:
    """Why an alert rule on a row of these engines reads no data: the row's engines do not give one of the
    figures it evaluates as an exact count (not exposed, or only an estimate, which no rule fires on);
    None: every engine gives them exactly."""
    names = sorted({n or "vllm" for n in engine_names}) or ["vllm"]
    for figure in figures:
        if any(exposed(n, figure) and not estimated(n, figure) for n in names):
            continue
        words = FIGURE_WORDS.get(figure, figure)
        if any(estimated(n, figure) for n in names):
            return (f"{words} {not_exposed_text(names[0]) if len(names) == 1 else 'not exposed'} as a count: "
                    f"only {ESTIMATED} from gauges, not alerted on")
        return f"{words} " + row_figure_text(names, figure, None) + ": not evaluated"
    return None


def is_words(text: str) -> bool:
    """True for a figure shown as words (not exposed, or a value marked estimated): it may wrap."""
    return text.startswith(NOT_EXPOSED_BY) or text.endswith(f"({ESTIMATED})")
