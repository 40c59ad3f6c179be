"""YAML from untrusted input with bounded cost: a size limit, a depth limit and a limit on the document's
size once aliases are expanded (an alias bomb: ten aliases of ten aliases of ... is tiny as text and
billions of nodes once read), recursive aliases refused. `load` raises YamlRefused (a yaml.YAMLError)
with the reason; otherwise it returns what yaml.safe_load would."""

from __future__ import annotations

from typing import Any

import yaml

MAX_BYTES = 256 * 1024
MAX_DEPTH = 32
MAX_ALIASES = 100
MAX_NODES = 20_000  # scalars, lists and mappings after alias expansion (a rules file has a few hundred)


class YamlRefused(yaml.YAMLError):
    """The document is over a limit; the message says which."""


class _Loader(yaml.SafeLoader):
    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise YamlRefused(f"more than {MAX_ALIASES} aliases")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YamlRefused(f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_: set[int]) -> int:
    """Nodes in the document with every alias expanded, computed once per shared node (no expansion)."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:
        raise YamlRefused("a recursive alias (a node that contains itself)")
    open_.add(key)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    else:
        children = []
    for child in children:
        total += _expanded_size(child, sizes, open_)
        if total > MAX_NODES:
            raise YamlRefused(f"more than {MAX_NODES} values once aliases are expanded")
    open_.discard(key)
    sizes[key] = total
    return total


def load(text: str) -> Any:
    """yaml.safe_load within the limits above (YamlRefused otherwise; yaml.YAMLError on bad YAML)."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise YamlRefused(f"larger than {MAX_BYTES // 1024} KiB")
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, {}, set())
        return loader.construct_document(node)
    finally:
        loader.dispose()
