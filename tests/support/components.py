"""Reading rendered Dash components in the unit tests: their text, as a reader of the page would see it."""

from __future__ import annotations


def text(component) -> str:
    """All the text of a component tree, children in order, joined by spaces (numbers and flags left out)."""
    if component is None or isinstance(component, (bool, int, float)):
        return ""
    if isinstance(component, str):
        return component
    if isinstance(component, (list, tuple)):
        return " ".join(text(x) for x in component)
    return text(getattr(component, "children", None))
