"""Accessibility and layout checks run inside a page in headless Chromium: axe-core (vendored by
`make test-assets` from the npm registry into tests/support/vendor, injected from that file: never a CDN)
and the geometry checks of the layout tests (what must be inside the viewport, no sideways scrolling)."""

from __future__ import annotations

from pathlib import Path

from tests.support.skips import skip_missing

AXE_JS = Path(__file__).resolve().parents[1] / "support" / "vendor" / "axe.min.js"
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
BLOCKING = ("serious", "critical")


def axe_source() -> str:
    if not AXE_JS.exists():
        skip_missing("axe-core", "`make test-assets` (npm pack axe-core into tests/support/vendor; needs npm)")
    return AXE_JS.read_text()


def axe_violations(page, source: str) -> list[dict]:
    """axe-core's WCAG 2.1 A/AA violations of the page as it is now: [{id, impact, help, nodes: [...]}]."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        # evaluated over the DevTools protocol, which the page's Content-Security-Policy does not govern (an
        # injected <script> would be refused by it, as it should be)
        page.evaluate("() => {\n" + source + "\n}")
        if not page.evaluate("() => typeof window.axe !== 'undefined'"):
            raise RuntimeError("axe-core did not load into the page")
    return page.evaluate("""async (tags) => {
        const r = await axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']});
        return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.slice(0, 5).map(n => ({target: n.target.join(' '), summary: n.failureSummary}))}));
    }""", AXE_TAGS)


def blocking(violations: list[dict]) -> list[dict]:
    return [v for v in violations if v["impact"] in BLOCKING]


def horizontal_overflow(page) -> int:
    """How many CSS pixels the document is wider than the viewport (0: no sideways scrolling)."""
    return page.evaluate("() => Math.max(0, document.documentElement.scrollWidth - window.innerWidth)")


def outside_viewport(page, selector: str, *, uncut: bool = True) -> list[str]:
    """The elements matching `selector` that are not wholly inside the viewport horizontally or (`uncut`)
    whose text is cut (its content wider than its box); described by their text and sizes."""
    return page.evaluate("""([sel, uncut]) => [...document.querySelectorAll(sel)].filter(e => {
        const r = e.getBoundingClientRect();
        if (r.width === 0 && r.height === 0) return false;
        return r.left < -0.5 || r.right > window.innerWidth + 0.5 || (uncut && e.scrollWidth > e.clientWidth + 1);
    }).map(e => `${e.getAttribute('col-id') || ''}:${e.innerText.trim().slice(0, 40)} ` +
                `[${Math.round(e.getBoundingClientRect().left)}..${Math.round(e.getBoundingClientRect().right)}` +
                ` content ${e.scrollWidth} box ${e.clientWidth}]`)""", [selector, uncut])


def sideways_scrollers(page) -> list[str]:
    """Elements (outside the overview's grid, which scrolls its detail columns by design) whose content is
    wider than their box and scrolls sideways: a table in a .table-responsive wrapper that does not fit."""
    return page.evaluate("""() => [...document.querySelectorAll('body *')].filter(e => {
        if (e.closest('.ag-root-wrapper') || e.closest('.js-plotly-plot')) return false;
        const ox = getComputedStyle(e).overflowX;
        return (ox === 'auto' || ox === 'scroll') && e.getBoundingClientRect().width > 0
            && e.scrollWidth > e.clientWidth + 1;
    }).map(e => `${e.tagName.toLowerCase()}.${[...e.classList].join('.')}#${e.id}: content ${e.scrollWidth} ` +
                `box ${e.clientWidth}`)""")


def stacked_pairs(page, table: str) -> list[list[dict]]:
    """The rows of a stacked table (components.stacked) as the page shows them: per cell, the label drawn
    beside it (its ::before content, empty when none is drawn), its data-label and its own text."""
    return page.evaluate("""(sel) => [...document.querySelectorAll(sel + ' tbody tr')].map(tr =>
        [...tr.children].map(cell => {
            const before = getComputedStyle(cell, '::before').content;
            return {shown: before && before !== 'none' && before !== 'normal' ? JSON.parse(before) : '',
                    label: cell.getAttribute('data-label'), text: cell.innerText.trim(),
                    visible: cell.getBoundingClientRect().height > 0};
        }))""", table)


def caption_width_share(page, table: str) -> float:
    """The width of a table's caption as a share of the table's width (a squeezed caption is far below 1)."""
    return page.evaluate("""(sel) => {
        const t = document.querySelector(sel), c = t && t.querySelector('caption');
        return c ? c.getBoundingClientRect().width / t.getBoundingClientRect().width : 0;
    }""", table)
