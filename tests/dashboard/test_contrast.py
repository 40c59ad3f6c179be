"""WCAG 2.1 AA by construction: every text tone (dashboard/assets/specwatch.css) against every background of
its theme (00-base.css) is >= 4.5:1, every state/verdict/phase has a tone, and every icon the dashboard
writes is a glyph of a font Debian's Chromium has (fc-list; "ⓘ" was a box)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dashboard import alerts_view
from dashboard import components as c
from dashboard import formatting as fm

ASSETS = Path(c.__file__).resolve().parent / "assets"


def _vars(css: str, selector: str) -> dict[str, str]:
    block = re.search(re.escape(selector) + r"\s*\{([^}]*)\}", css)
    assert block, selector
    return dict(re.findall(r"(--[\w-]+):\s*(#[0-9a-fA-F]{6})", block.group(1)))


def _lum(hex_colour: str) -> float:
    rgb = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((_lum(a), _lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_contrast_formula_matches_the_wcag_examples():
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#E69F00", "#ffffff") == pytest.approx(2.25, abs=0.01)  # the old "below threshold" text


@pytest.mark.parametrize("theme,tones_sel,base_sel", [
    ("light", ":root, [data-bs-theme=light]", ":root, [data-bs-theme=light]"),
    ("dark", "html[data-bs-theme=dark]", "[data-bs-theme=dark]"),
])
def test_every_text_tone_reaches_aa_on_every_background_of_its_theme(theme, tones_sel, base_sel):
    tones = {k: v for k, v in _vars((ASSETS / "specwatch.css").read_text(), tones_sel).items()
             if k.startswith("--sw-t-")}
    base = _vars((ASSETS / "00-base.css").read_text(), base_sel)
    backgrounds = [base[k] for k in ("--bs-body-bg", "--bs-tertiary-bg", "--bs-card-bg", "--bs-input-bg")]
    assert len(tones) == 7
    low = {(name, bg): round(contrast(colour, bg), 2) for name, colour in tones.items() for bg in backgrounds
           if contrast(colour, bg) < 4.5}
    assert low == {}, f"{theme}: {low}"
    muted = [base["--bs-muted"]]
    assert all(contrast(muted[0], bg) >= 4.5 for bg in backgrounds)


def test_every_state_verdict_and_phase_has_a_tone_class():
    for table in (fm.STATES, fm.VERDICTS, alerts_view.PHASES):
        for _icon, _text, colour in table.values():
            assert colour in fm.TONES, colour
    css = (ASSETS / "specwatch.css").read_text()
    for tone in set(fm.TONES.values()):
        assert f".sw-tone-{tone} {{" in css


def test_every_icon_is_in_an_installed_font():
    if not shutil.which("fc-list"):
        pytest.skip("fc-list (fontconfig) missing")
    icons = {icon for table in (fm.STATES, fm.VERDICTS, alerts_view.PHASES) for icon, _, _ in table.values()}
    icons |= {"⚠", "↻", "⚑", "❚", "▶", "☰", "▲", "—", "×", "Δ", "τ", "α", "ε"}
    missing = [ch for ch in sorted(icons) if ord(ch) > 0x7F and not subprocess.run(
        ["fc-list", f":charset={ord(ch):x}", "family"], capture_output=True, text=True, timeout=30, check=False).stdout.strip()]
    assert missing == []
    source = "".join(p.read_text() for p in Path(c.__file__).resolve().parent.rglob("*.py"))
    assert "ⓘ" not in source  # no font Debian's Chromium has draws it
