"""Slack payloads (Block Kit) from a channel-neutral notification, truncated to Slack's limits.

A notification is one incident update: the model it concerns and one item per alert transition
(`event` firing | resolved) with the value, the threshold, the window, the volume, the dashboard link
for the pool and the runbook step. Limits (docs.slack.dev/reference/block-kit/blocks; alerting-and-
rollout.md §5): 50 blocks, header 150 chars, section text 3000, 10 fields x 2000, `text` < 4000, and an
undocumented total near 13.2k characters of blocks (`msg_blocks_too_long`), so we stop well below it.

Threading: an incoming webhook returns no message `ts`, so replies cannot be threaded through it. Every
message of an incident therefore carries the incident number and the update count in its header and
context line. A `slack_api` channel (bot token, chat.postMessage) threads for real: the first message's
`ts` is stored and later updates are sent with `thread_ts`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

MAX_BLOCKS = 50
MAX_HEADER = 150
MAX_SECTION = 3000
MAX_FIELDS = 10
MAX_FIELD = 2000
MAX_TEXT = 3900
MAX_TOTAL = 12000  # characters of block text in one message (Slack fails near 13.2k)
ELLIPSIS = "…"

_ICON = {"firing": ":red_circle:", "resolved": ":large_green_circle:", "internal": ":warning:", "test": ":wrench:"}


def cut(text: str, limit: int) -> str:
    """Text of at most `limit` characters, with an ellipsis when shortened."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + ELLIPSIS


def _num(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def when(v: Any) -> str:
    """An instant as people read it: '2026-12-04 20:17 UTC' (the payload carries ISO 8601 with seconds and
    microseconds, for machines); text that is not an instant as it is, None as 'n/a'."""
    if v is None or v == "":
        return "n/a"
    try:
        at = v if isinstance(v, datetime) else datetime.fromisoformat(str(v))
    except ValueError:
        return str(v)
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _item_blocks(item: dict[str, Any]) -> list[dict[str, Any]]:
    labels = item.get("labels", {})
    where = f"{labels.get('model', '?')} · class {labels.get('traffic_class', '?')} · {labels.get('spec_mode', '?')}"
    if labels.get("replica"):
        where += f" · replica {labels['replica']}"
    if "channel" in labels:
        where = f"channel {labels['channel']}"
    elif labels.get("model") == "(collection)":  # a collection-wide rule (pool_limit)
        where = "the collection (all pools)"
    icon = _ICON.get(item.get("event", ""), ":bell:")
    title = f"{icon} *{item.get('event', '').upper()}* `{item.get('rule')}` ({item.get('severity', 'warning')}) — {where}"
    reason = item.get("reason") or ""
    fields = [
        f"*Value*\n{_num(item.get('value'))} vs threshold {_num(item.get('threshold'))}",
        f"*Window*\n{item.get('window') or 'n/a'}",
        f"*Volume*\n{_num(item.get('volume'))} drafts",
        f"*Since*\n{when(item.get('since') or item.get('at'))}",
    ]
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": cut(f"{title}\n{reason}", MAX_SECTION)},
         "fields": [{"type": "mrkdwn", "text": cut(f, MAX_FIELD)} for f in fields[:MAX_FIELDS]]},
    ]
    links = []
    if item.get("dashboard_url"):
        links.append(f"<{item['dashboard_url']}|Open the pool on the dashboard>")
    if item.get("runbook") and item.get("event") != "resolved":
        links.append(f"*Runbook:* {item['runbook']}")
    if links:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": cut("\n".join(links), MAX_SECTION)}})
    return blocks


def _size(block: dict[str, Any]) -> int:
    n = len(block.get("text", {}).get("text", "")) if isinstance(block.get("text"), dict) else 0
    n += sum(len(f.get("text", "")) for f in block.get("fields", []))
    n += sum(len(e.get("text", "")) for e in block.get("elements", []) if isinstance(e, dict))
    return n


def summary_text(n: dict[str, Any]) -> str:
    items = n.get("items", [])
    parts = [(f"{i.get('event', '').upper()} {i.get('rule')} {i.get('labels', {}).get('traffic_class', '')}"
              + (f" replica {i['labels']['replica']}" if i.get("labels", {}).get("replica") else "")).strip()
             for i in items]
    head = f"[specwatch] {n.get('title') or n.get('model', '')}: " + "; ".join(parts)
    return cut(head, MAX_TEXT)


def build_message(n: dict[str, Any], *, thread_ts: str | None = None, channel: str | None = None) -> dict[str, Any]:
    """The chat.postMessage / incoming-webhook body. Items beyond the block or size budget are counted
    in a final context line instead of being dropped silently."""
    incident = n.get("incident_id")
    header = n.get("title") or f"{n.get('model', 'specwatch')}: incident #{incident}"
    blocks: list[dict[str, Any]] = [{"type": "header", "text": {"type": "plain_text", "text": cut(header, MAX_HEADER)}}]
    total = len(blocks[0]["text"]["text"])
    items = n.get("items", [])
    shown = 0
    for item in items:
        extra = _item_blocks(item) + [{"type": "divider"}]
        size = sum(_size(b) for b in extra)
        if len(blocks) + len(extra) > MAX_BLOCKS - 1 or total + size > MAX_TOTAL:
            break
        blocks += extra
        total += size
        shown += 1
    if blocks[-1]["type"] == "divider":
        blocks.pop()
    context = f"specwatch · incident #{incident} · update {n.get('sequence', 1)}" if incident else "specwatch"
    if shown < len(items):
        context += f" · {len(items) - shown} more not shown (see the Alerts page)"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": cut(context, MAX_FIELD)}]})
    body: dict[str, Any] = {"text": summary_text(n), "blocks": blocks}
    if thread_ts:
        body["thread_ts"] = thread_ts
    if channel:
        body["channel"] = channel
    return body
