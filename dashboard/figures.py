"""Figures (and the graph holding one): schema models in, plotly out. No I/O; null stays a gap, never 0."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import plotly.graph_objects as go
from dash import dcc, html

from backend.schemas.acceptance import AcceptanceSeriesRead
from backend.schemas.calc import CalcRead
from backend.schemas.summary import ClassSummaryRead, SummaryRead
from dashboard.api_client import Annotation
from dashboard.formatting import OKABE_ITO, SERIES_COLOURS, fmt_eps_step

DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
ITL_HINT = ("ITL is observed once per request per engine step (one streamed chunk). With speculative decoding "
            "a step emits up to K+1 tokens, so per-step latency normally RISES while per-token latency falls.")
TPOT_HINT = ("TPOT is the time per output token of each finished request (one value per request): the "
             "per-token latency, which speculative decoding should lower.")


# The legend sits above the plot area (plotly grows the top margin to fit its rows), clear of the x title.
LEGEND = {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"}


def _base(theme: str, **layout) -> go.Figure:
    opts = {"template": "plotly_dark" if theme == "dark" else "plotly_white",
            "margin": {"l": 55, "r": 20, "t": 20, "b": 45}, "height": 340, "hovermode": "x unified",
            "paper_bgcolor": "rgba(0,0,0,0)", "legend": LEGEND,
            "xaxis": {"automargin": True}, "yaxis": {"automargin": True}}
    for axis in ("xaxis", "yaxis"):
        opts[axis] = {**opts[axis], **layout.pop(axis, {})}
    opts.update(layout)
    return go.Figure(layout=opts)


def empty(message: str, theme: str = "light") -> go.Figure:
    fig = _base(theme)
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font={"size": 14})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def chart(id: str, title: str, hint: str | None = None, figure=None) -> html.Div:
    """A graph under an HTML heading (it wraps on a phone; a plotly title is clipped there)."""
    heading = html.Span(title, title=hint, className="sw-help") if hint else title
    return html.Div([html.H6(heading, className="sw-chart-title"),
                     dcc.Graph(id=id, figure=figure or empty("loading…"), config={"displaylogo": False})],
                    className="sw-section sw-chart")


def _hline(fig: go.Figure, y: float | None, text: str, colour: str, dash: str, where: str = "top left") -> None:
    if y is None:
        return
    fig.add_hline(y=y, line={"color": colour, "dash": dash, "width": 1.5}, annotation_text=text,
                  annotation_position=where, annotation_font_color=colour)


CLASS_COLOURS = ("#0072B2", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#999999")  # no orange: the threshold's
CLASS_DASHES = ("solid", "dash", "longdash", "dashdot", "longdashdot")  # "dot" is the break-even lines' own


def acceptance_over_time(series: Sequence[AcceptanceSeriesRead], *, threshold: float | None,
                         break_even: Sequence[tuple[str, float | None, str | None]] = (),
                         annotations: Sequence[Annotation] = (), theme: str = "light",
                         thresholds: Mapping[str, float] | None = None) -> go.Figure:
    """Acceptance rate r = A/D per traffic class and the pooled mix, with the threshold, every class's
    break-even line (label, ε_step/K, ε_step with its source) and restart / version-change markers.

    The mix is drawn first, wide and translucent, so a class that tracks it (chat, most of the traffic)
    stays visible on top. Break-even lines are dotted, in their class's colour, and are legend entries of
    their own; class lines are never dotted, so a class at α = 0 does not read as a break-even line (the
    y axis starts just below 0 to keep it off the axis line)."""
    fig = _base(theme, yaxis={"title": "acceptance rate r", "range": [-0.03, 1.02]})
    ordered = sorted(series, key=lambda s: s.traffic_class != "mixed")
    colours: dict[str, str] = {}
    for i, s in enumerate(x for x in ordered if x.traffic_class != "mixed"):
        colours[s.traffic_class] = CLASS_COLOURS[i % len(CLASS_COLOURS)]
    mixed_colour = "#FFFFFF" if theme == "dark" else OKABE_ITO["black"]
    for i, s in enumerate(x for x in ordered):
        mixed = s.traffic_class == "mixed"
        k = f" K={s.num_spec_tokens}" if s.num_spec_tokens else ""
        fig.add_trace(go.Scatter(
            x=s.t, y=s.acceptance_rate, name=f"{s.traffic_class} (pooled){k}" if mixed else f"{s.traffic_class}{k}",
            mode="lines", connectgaps=False, hovertemplate="%{y:.3f}", opacity=0.45 if mixed else 1.0,
            line={"color": mixed_colour if mixed else colours[s.traffic_class], "width": 5 if mixed else 1.8,
                  "dash": "solid" if mixed else CLASS_DASHES[i % len(CLASS_DASHES)]}))
    by_value: dict[float, list[str]] = {}
    for cls, value in (thresholds or {}).items():  # per class (the alert rules'): one line per distinct value
        by_value.setdefault(round(value, 6), []).append(cls)
    if len(by_value) > 1:
        places = ("bottom left", "top left", "top right", "bottom right")  # close lines' labels do not overlap
        for i, (value, classes) in enumerate(sorted(by_value.items())):
            _hline(fig, value, f"threshold r = {value:.2f} ({', '.join(classes)})", OKABE_ITO["orange"], "dash",
                   where=places[i % len(places)])
    elif by_value:
        value = next(iter(by_value))
        _hline(fig, value, f"threshold r = {value:.2f}", OKABE_ITO["orange"], "dash")
    elif threshold is not None:
        _hline(fig, threshold, f"threshold r = {threshold:.2f}", OKABE_ITO["orange"], "dash")
    times = [t for s in series for t in s.t]
    for label, value, source in break_even:
        if value is None or not times:
            continue
        src = f", {source}" if source else ""
        colour = mixed_colour if label == "mixed" else colours.get(label, OKABE_ITO["vermillion"])
        fig.add_trace(go.Scatter(
            x=[min(times), max(times)], y=[value, value], mode="lines", name=f"break-even {label} {value:.3f}",
            line={"color": colour, "dash": "dot", "width": 2}, hoverinfo="skip",
            meta=f"α = ε_step/K = {value:.3f}{src}"))
    for a in annotations:
        fig.add_vline(x=a.t, line={"color": OKABE_ITO["purple"], "dash": "dot", "width": 1})
        fig.add_annotation(x=a.t, y=1.0, yref="y", text="↻" if a.kind == "restart" else "⚑", hovertext=a.text,
                           showarrow=False, font={"color": OKABE_ITO["purple"], "size": 14})
    return fig


def tau_over_time(series: Sequence[AcceptanceSeriesRead], theme: str = "light") -> go.Figure:
    fig = _base(theme, height=260,
                yaxis={"title": "τ"})
    for i, s in enumerate(series):
        mixed = s.traffic_class == "mixed"
        fig.add_trace(go.Scatter(x=s.t, y=s.mean_acceptance_length, name=s.traffic_class, mode="lines",
                                 line={"color": OKABE_ITO["grey"] if mixed else SERIES_COLOURS[i % 7],
                                       "width": 2.5 if mixed else 1.4}, hovertemplate="%{y:.2f}"))
    return fig


def per_position(cls: ClassSummaryRead, theme: str = "light") -> go.Figure:
    """Conditional p_i (decay with depth = drift), unconditional u_i, and the i.i.d. reference a^(i+1)."""
    p, u = cls.per_position_conditional or [], cls.per_position_unconditional or []
    if not p:
        return empty("no per-position data in this window", theme)
    pos = list(range(len(p)))
    fig = _base(theme, hovermode="x",
                xaxis={"title": "draft position i", "tickmode": "linear", "dtick": 1},
                yaxis={"title": "acceptance", "range": [0, 1.05]})
    fig.add_trace(go.Bar(x=pos, y=p, name="conditional p_i = P_i/P_(i−1)", marker_color=OKABE_ITO["blue"],
                         hovertemplate="p_%{x} = %{y:.3f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=pos, y=u, name="unconditional u_i = P_i/N", mode="lines+markers",
                             marker={"symbol": "diamond", "size": 9}, line={"color": OKABE_ITO["orange"]},
                             hovertemplate="u_%{x} = %{y:.3f}<extra></extra>"))
    a = cls.per_token_acceptance
    if a is not None:
        fig.add_trace(go.Scatter(x=pos, y=[a ** (i + 1) for i in pos], name=f"i.i.d. a^(i+1), a = {a:.3f}",
                                 mode="lines", line={"color": OKABE_ITO["grey"], "dash": "dot"},
                                 hovertemplate="%{y:.3f}<extra>assumes position-independent acceptance</extra>"))
    return fig


def acceptance_vs_concurrency(slices: Sequence[SummaryRead], theme: str = "light") -> go.Figure:
    """One point per time slice and class: acceptance rate against mean running requests."""
    by_class: dict[str, tuple[list, list, list]] = {}
    for s in slices:
        for c in s.classes:
            if c.running_mean is None or c.acceptance_rate is None:
                continue
            xs, ys, texts = by_class.setdefault(c.traffic_class, ([], [], []))
            xs.append(c.running_mean)
            ys.append(c.acceptance_rate)
            texts.append(f"{s.window.start:%b %d %H:%M}, band {c.concurrency_band}")
    if not by_class:
        return empty("no concurrency data in this window", theme)
    top = max(max(xs) for xs, _, _ in by_class.values())
    fig = _base(theme, hovermode="closest",
                xaxis={"title": "mean running requests per time slice", "range": [0, max(top, 36) * 1.08]},
                yaxis={"title": "acceptance rate r"})
    symbols = ("circle", "square", "diamond", "triangle-up", "x")
    for i, (name, (xs, ys, texts)) in enumerate(sorted(by_class.items())):
        fig.add_trace(go.Scatter(x=xs, y=ys, text=texts, mode="markers", name=name,
                                 marker={"color": SERIES_COLOURS[i % 7], "symbol": symbols[i % 5], "size": 9},
                                 hovertemplate="r = %{y:.3f} at %{x:.1f} running<br>%{text}<extra></extra>"))
    fig.add_vline(x=32, line={"color": OKABE_ITO["vermillion"], "dash": "dot"}, annotation_text="batch > 32")
    return fig


def latency_over_time(slices: Sequence[SummaryRead], traffic_class: str, metric: str,
                      theme: str = "light") -> go.Figure:
    """P99 (and P50) spec vs baseline per time slice. metric: 'itl' (per engine step) or 'tpot' (per token)."""
    label = "ITL per engine step (chunk)" if metric == "itl" else "TPOT per token"
    t, series = [], {"spec P99": [], "baseline P99": [], "spec P50": [], "baseline P50": []}
    for s in slices:
        c = next((c for c in s.classes if c.traffic_class == traffic_class), None)
        m = getattr(c, metric) if c else None
        t.append(s.window.end)
        qs = {q.q: q for q in (m.quantiles if m else [])}
        for q, tag in ((0.99, "P99"), (0.5, "P50")):
            qv = qs.get(q)
            series[f"spec {tag}"].append(qv.spec.value * 1000 if qv and qv.spec.value is not None else None)
            base = qv.baseline.value if qv and qv.baseline else None
            series[f"baseline {tag}"].append(base * 1000 if base is not None else None)
    if not any(v is not None for vs in series.values() for v in vs):
        return empty(f"no {label} data in this window", theme)
    fig = _base(theme, yaxis={"title": f"{label}, ms"})
    styles = {"spec P99": (OKABE_ITO["blue"], "solid"), "baseline P99": (OKABE_ITO["orange"], "dash"),
              "spec P50": (OKABE_ITO["blue"], "dot"), "baseline P50": (OKABE_ITO["orange"], "dot")}
    for name, ys in series.items():
        colour, dash = styles[name]
        fig.add_trace(go.Scatter(x=t, y=ys, name=name, mode="lines+markers", line={"color": colour, "dash": dash},
                                 hovertemplate=f"{name}: %{{y:.1f}} ms<extra>{label}</extra>"))
    return fig


def speedup_bars(summary: SummaryRead, theme: str = "light") -> go.Figure:
    """Measured (TPOT baseline/spec, same band) vs estimated τ/(1+ε_step) speedup per class; 1× = break-even.
    Each bar carries its value; the y axis leaves headroom above the tallest bar for the labels. A summary
    with several spec modes labels each bar with its mode ("mixed · eagle3"): two bars never share a column."""
    several = len({c.spec_mode for c in summary.classes}) > 1
    names = [f"{c.traffic_class} · {c.spec_mode}" if several else c.traffic_class for c in summary.classes]
    values = [v for c in summary.classes for v in (c.measured_speedup, c.estimated_speedup) if v is not None]
    top = max([1.0, *values]) * 1.22
    fig = _base(theme, hovermode="x", yaxis={"title": "speedup ×", "range": [0, top]}, barmode="group")
    common = {"texttemplate": "%{y:.2f}×", "textposition": "outside", "cliponaxis": False}
    fig.add_trace(go.Bar(x=names, y=[c.measured_speedup for c in summary.classes], name="measured (TPOT ratio)",
                         marker_color=OKABE_ITO["blue"], hovertemplate="%{y:.2f}×<extra>measured</extra>", **common))
    fig.add_trace(go.Bar(x=names, y=[c.estimated_speedup for c in summary.classes],
                         name="estimated τ/(1+ε_step)", marker_color=OKABE_ITO["orange"], marker_pattern_shape="/",
                         customdata=[fmt_eps_step(c.eps_step, c.eps_step_source, c.concurrency_band)
                                     for c in summary.classes],
                         hovertemplate="%{y:.2f}×<extra>estimated, %{customdata}</extra>", **common))
    fig.add_hline(y=1, line={"color": OKABE_ITO["vermillion"], "dash": "dot"}, annotation_text="1× (break-even)",
                  annotation_position="bottom left")
    return fig


LABEL_ROWS = (0.98, 0.86, 0.74, 0.62, 0.50)  # paper heights of stacked vertical-line labels


def speedup_curve(alphas: Sequence[float], speedups: Sequence[float | None], *, alpha: float, k: int, eps: float,
                  break_even: float | None, targets: dict[float, float | None], theme: str = "light") -> go.Figure:
    """S(α) = (1 + Kα)/(1 + ε) from the calc API, with the break-even α and the α needed for 2× / 3×. The
    vertical lines' labels sit on rows of their own (left to right, top down): close lines never overlap."""
    fig = _base(theme, hovermode="x",
                xaxis={"title": "α (accepted per draft / K)", "range": [0, 1]}, yaxis={"title": "speedup ×"})
    fig.add_trace(go.Scatter(x=list(alphas), y=list(speedups), mode="lines", name=f"S(α), K={k}, ε={eps:.2f}",
                             line={"color": OKABE_ITO["blue"], "width": 2.5}, hovertemplate="%{y:.2f}×"))
    fig.add_hline(y=1, line={"color": OKABE_ITO["vermillion"], "dash": "dot"}, annotation_text="1×")
    lines = [(alpha, f"α = {alpha:.2f}", OKABE_ITO["orange"], "solid")]
    if break_even is not None and break_even <= 1:
        lines.append((break_even, f"break-even {break_even:.3f}", OKABE_ITO["vermillion"], "dot"))
    lines += [(a, f"{target:g}× needs {a:.3f}", OKABE_ITO["green"], "dash") for target, a in targets.items()
              if a is not None and 0 < a <= 1]
    for row, (x, text, colour, dash) in enumerate(sorted(lines, key=lambda line: line[0])):
        fig.add_vline(x=x, line={"color": colour, "dash": dash, "width": 2 if dash == "solid" else 1.5})
        right = x > 0.6  # labels of lines near the right edge go left of the line
        fig.add_annotation(x=x, y=LABEL_ROWS[row % len(LABEL_ROWS)], yref="paper", text=text, showarrow=False,
                           xanchor="right" if right else "left", xshift=-4 if right else 4,
                           font={"color": colour, "size": 12}, bgcolor="rgba(127,127,127,0.12)")
    return fig


def mix_bars(result: CalcRead, theme: str = "light") -> go.Figure:
    """Class alphas, the correct pooled alpha and the naive mean (labelled wrong when they differ)."""
    classes = result.inputs.get("classes") or []
    names = [c["name"] for c in classes] + ["mixed (pooled)", "share-weighted mean (wrong)"]
    ys = [c["alpha"] for c in classes] + [result.values.get("mixed_alpha"),
                                          result.values.get("share_weighted_mean_of_class_alphas")]
    mixed = "#FFFFFF" if theme == "dark" else OKABE_ITO["black"]
    colours = [SERIES_COLOURS[i % 7] for i in range(len(classes))] + [mixed, OKABE_ITO["grey"]]
    fig = _base(theme, hovermode="x", height=300, yaxis={"title": "α", "range": [0, 1.12]},
                xaxis={"title": f"classes and the mix ({result.inputs.get('basis', '')} shares)"})
    fig.add_trace(go.Bar(x=names, y=ys, marker_color=colours, texttemplate="%{y:.3f}", textposition="outside",
                         cliponaxis=False,
                         hovertemplate="%{x}: %{y:.3f}<extra></extra>"))
    return fig


def last_time(series: Sequence[AcceptanceSeriesRead]) -> datetime | None:
    """End of the newest step with a value, over all series (for 'no data since')."""
    best = None
    for s in series:
        for t, v in zip(s.t, s.acceptance_rate):
            if v is not None and (best is None or t > best):
                best = t
    return best
