"""The import-linter contracts in pyproject.toml hold (layers, a pure domain, a dashboard that talks HTTP, no
cycles between sibling packages), and no module takes part in an import cycle."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

from tests.support.deadline import deadline

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("backend", "workers", "dashboard")


def test_import_contracts_hold():
    exe = Path(sys.executable).parent / "lint-imports"
    assert exe.exists(), "import-linter is a test dependency: pip install -e '.[test]'"
    res = subprocess.run([str(exe), "--no-cache"], check=False, cwd=ROOT, capture_output=True, text=True, timeout=deadline(900))
    assert res.returncode == 0, f"lint-imports failed:\n{res.stdout}\n{res.stderr}"


def cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while not component or component[-1] != node:
                        component.append(stack.pop())
                        on_stack.discard(component[-1])
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(imports.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_cycles_finds_a_package_and_its_child():
    assert cycles({"p": {"p.a"}, "p.a": {"p", "q"}, "q": set()}) == [["p", "p.a"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_module_in_an_import_cycle():
    """acyclic_siblings sees a package and its __init__ as one node, so a cycle between a package's __init__
    and its children passes it: this looks at single modules. Imports inside functions count."""
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    ours = {m for m in graph.modules if m.split(".")[0] in PACKAGES}
    found = cycles({m: graph.find_modules_directly_imported_by(m) & ours for m in ours})
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)
