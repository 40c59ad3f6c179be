"""The receiver's page: the messages it received, rendered as Slack shows them (Block Kit header, section
text and fields, dividers, context lines, link buttons; mrkdwn bold, italics, code, links and emoji codes),
newest first. Pure functions of the recorded requests; the HTML escapes everything it did not build."""

from __future__ import annotations

import html
import json
import re
import time
from typing import Any

EMOJI = {":red_circle:": "🔴", ":large_green_circle:": "🟢", ":warning:": "⚠️", ":wrench:": "🔧", ":bell:": "🔔",
         ":white_check_mark:": "✅", ":x:": "❌", ":rotating_light:": "🚨", ":information_source:": "ℹ️"}
_LINK = re.compile(r"<([^<>|]+)(?:\|([^<>]*))?>")
_BOLD = re.compile(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])")
_ITALIC = re.compile(r"(?<![\w_])_([^_\n]+)_(?![\w_])")
_CODE = re.compile(r"`([^`\n]+)`")
_EMOJI = re.compile(r":[a-z0-9_+-]+:")
_EVENT = re.compile(r"\b(FIRING|RESOLVED)\b")


def _safe_url(url: str) -> str | None:
    return url if url.startswith(("http://", "https://", "mailto:")) else None


def mrkdwn(text: str) -> str:
    """Slack mrkdwn to HTML: <url|label> links (http/https/mailto only), *bold*, _italic_, `code`, emoji."""
    out, pos = [], 0
    for m in _LINK.finditer(text):
        out.append(_inline(text[pos:m.start()]))
        url, label = m.group(1), m.group(2) or m.group(1)
        safe = _safe_url(url)
        out.append(f'<a href="{html.escape(safe)}">{_inline(label)}</a>' if safe else _inline(m.group(0)))
        pos = m.end()
    out.append(_inline(text[pos:]))
    return "".join(out).replace("\n", "<br>")


def _inline(text: str) -> str:
    s = html.escape(text, quote=False)
    s = _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", s)
    s = _BOLD.sub(lambda m: f"<strong>{m.group(1)}</strong>", s)
    s = _ITALIC.sub(lambda m: f"<em>{m.group(1)}</em>", s)
    return _EMOJI.sub(lambda m: EMOJI.get(m.group(0), m.group(0)), s)


def _text(obj: Any) -> str:
    if not isinstance(obj, dict):
        return ""
    raw = str(obj.get("text", ""))
    return mrkdwn(raw) if obj.get("type") == "mrkdwn" else html.escape(raw).replace("\n", "<br>")


def render_block(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "header":
        return f'<h3 class="bk-header">{_text(block.get("text"))}</h3>'
    if kind == "divider":
        return '<hr class="bk-divider">'
    if kind == "context":
        parts = [_text(e) for e in block.get("elements", []) if isinstance(e, dict)]
        return f'<p class="bk-context">{" ".join(parts)}</p>'
    if kind == "section":
        body = f'<div class="bk-text">{_text(block.get("text"))}</div>' if block.get("text") else ""
        fields = "".join(f'<div class="bk-field">{_text(f)}</div>' for f in block.get("fields", []))
        return f'<div class="bk-section">{body}{f"<div class=bk-fields>{fields}</div>" if fields else ""}</div>'
    if kind == "actions":
        buttons = []
        for e in block.get("elements", []):
            url = _safe_url(str(e.get("url", ""))) if isinstance(e, dict) else None
            label = _text(e.get("text")) if isinstance(e, dict) else ""
            buttons.append(f'<a class="bk-button" href="{html.escape(url)}">{label}</a>' if url
                           else f'<span class="bk-button">{label}</span>')
        return f'<div class="bk-actions">{"".join(buttons)}</div>'
    return f'<pre class="bk-unknown">{html.escape(json.dumps(block, indent=1))}</pre>'


def _body(r) -> dict[str, Any] | None:
    try:
        doc = r.json
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def events(r) -> list[str]:
    """firing / resolved, as the message's fallback text names them."""
    doc = _body(r) or {}
    return [e.lower() for e in _EVENT.findall(str(doc.get("text", "")))]


def messages_doc(received: list) -> list[dict[str, Any]]:
    out = []
    for r in received:
        doc = _body(r) or {}
        out.append({"at": r.at, "path": r.path, "status": r.status, "text": doc.get("text"), "events": events(r),
                    "blocks": doc.get("blocks") if isinstance(doc.get("blocks"), list) else []})
    return out


def render_message(r) -> str:
    doc = _body(r)
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(r.at))
    answer = "" if r.status == 200 else f' <span class="bk-failed">answered {r.status} (the sender retries)</span>'
    head = f'<p class="msg-meta"><strong>specwatch</strong> <span class="bk-app">APP</span> <time>{when}</time>{answer}</p>'
    if doc is None:
        inner = f'<pre class="bk-unknown">{html.escape(r.body.decode(errors="replace")[:4000])}</pre>'
    elif isinstance(doc.get("blocks"), list) and doc["blocks"]:
        inner = "".join(render_block(b) for b in doc["blocks"] if isinstance(b, dict))
    else:
        inner = f'<div class="bk-text">{mrkdwn(str(doc.get("text", "")))}</div>'
    kinds = " ".join(f"msg-{e}" for e in events(r))
    return f'<article class="msg {kinds}">{head}{inner}</article>'


CSS = """
body{font-family:Lato,"Helvetica Neue",Arial,sans-serif;margin:0;background:#fff;color:#1d1c1d;line-height:1.45}
header{background:#3f0e40;color:#fff;padding:.8rem 1.2rem} header h1{margin:0;font-size:1.15rem}
header p{margin:.2rem 0 0;font-size:.9rem;color:#f1e8f1} main{max-width:860px;margin:0 auto;padding:1rem}
.msg{border-bottom:1px solid #ddd;padding:.8rem 0}.msg-meta{margin:0 0 .3rem;font-size:.95rem}
.msg-meta time{color:#595959;font-size:.85rem;margin-left:.3rem}
.bk-app{background:#e8e8e8;color:#3b3b3b;font-size:.7rem;padding:0 .25rem;border-radius:3px}
.bk-header{font-size:1.05rem;margin:.2rem 0 .4rem}.bk-fields{display:grid;grid-template-columns:1fr 1fr;gap:.3rem 1rem;
margin-top:.4rem}.bk-section{margin:.3rem 0}.bk-context{color:#595959;font-size:.8rem;margin:.4rem 0 0}
.bk-divider{border:0;border-top:1px solid #e8e8e8;margin:.5rem 0}
code{background:#f6f6f6;border:1px solid #ddd;border-radius:3px;padding:0 .2rem;color:#b0184a;font-size:.85em}
a{color:#0b5cad}.bk-button{display:inline-block;border:1px solid #bbb;border-radius:4px;padding:.2rem .6rem;
margin-right:.4rem}.bk-failed{color:#8a1c00;font-weight:bold}.empty{color:#595959}
@media (max-width:600px){.bk-fields{grid-template-columns:1fr}}
"""

REFRESH_JS = """
const box=document.getElementById('auto');box.checked=localStorage.getItem('sw-recv-pause')!=='1';
box.addEventListener('change',()=>localStorage.setItem('sw-recv-pause',box.checked?'0':'1'));
setInterval(()=>{if(box.checked)location.reload()},5000);
"""


def render_page(received: list) -> str:
    msgs = [render_message(r) for r in reversed(received)]
    n_fire = sum("firing" in events(r) for r in received)
    n_res = sum("resolved" in events(r) for r in received)
    body = "".join(msgs) or '<p class="empty">No messages yet. They appear here when an alert fires or resolves.</p>'
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>#specwatch-alerts · local Slack receiver</title>
<style>{CSS}</style></head><body><header><h1>#specwatch-alerts</h1>
<p>A local Slack-compatible receiver: what specwatch posted to this channel's incoming webhook, as Slack would show
it. <span id="counts">{len(received)} messages · {n_fire} firing · {n_res} resolved</span></p></header>
<main><p><label><input type="checkbox" id="auto" checked> refresh every 5 s</label></p>{body}</main>
<script>{REFRESH_JS}</script></body></html>"""
