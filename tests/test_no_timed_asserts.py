"""No test asserts on elapsed wall-clock time: a busy machine must not turn a healthy test red. Speed
targets live in `make bench` (benchmarks/); waits on real services end on their event and keep a deadline
only against hangs (tests/support/deadline.py).

The check reads every test file's syntax tree: a name assigned from time.perf_counter(), time.time(),
time.monotonic() (or their _ns forms, however imported), or from an expression using such a name, is a
clock reading; an `assert` (or pytest's `approx`) that compares a clock reading with a number literal is
reported with its file and line."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
CLOCKS = {"perf_counter", "monotonic", "time", "perf_counter_ns", "monotonic_ns", "time_ns", "process_time"}


def _clock_names(tree: ast.Module) -> set[str]:
    """Bare names that call a clock: `from time import perf_counter [as pc]`."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            out |= {a.asname or a.name for a in node.names if a.name in CLOCKS}
    return out


def _is_clock_call(node: ast.AST, bare: set[str]) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr in CLOCKS and isinstance(f.value, ast.Name) and f.value.id == "time":
        return True
    return isinstance(f, ast.Name) and f.id in bare


NUMERIC = {"abs", "round", "min", "max", "float", "int", "sum"}  # calls that keep a clock reading a number


def _reads_clock(node: ast.AST, bare: set[str], tainted: set[str]) -> bool:
    """Whether the value of `node` is (arithmetic on) a clock reading: a clock call, a tainted name, or
    either inside arithmetic, comparisons, f-strings... but not inside another call's arguments (len(x))
    or a lambda (a deadline handed to a helper)."""
    if _is_clock_call(node, bare):
        return True
    if isinstance(node, ast.Name):
        return node.id in tainted
    if isinstance(node, ast.Lambda):
        return False
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id in NUMERIC:
            return any(_reads_clock(a, bare, tainted) for a in node.args)
        return False
    return any(_reads_clock(c, bare, tainted) for c in ast.iter_child_nodes(node))


def _walk_scope(scope: ast.AST):
    """The nodes of one scope, without entering nested functions or classes (their own scopes)."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(node))


def _is_number(node: ast.AST) -> bool:
    """A literal number or arithmetic of literals (8 + 2 + 6, 1e3 * 20, -1)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _is_number(node.operand)
    if isinstance(node, ast.BinOp):
        return _is_number(node.left) and _is_number(node.right)
    return False


def _tainted(scope: ast.AST, bare: set[str]) -> set[str]:
    """Names in `scope` assigned from a clock reading (to a fixed point: t0 = clock(); dt = clock() - t0)."""
    names: set[str] = set()
    while True:
        before = len(names)
        for node in _walk_scope(scope):
            targets, value = [], None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None or isinstance(node, ast.NamedExpr):
                targets, value = [node.target], node.value
            if value is not None and _reads_clock(value, bare, names):
                for t in targets:  # plain names and tuples of them; not attributes or items
                    elts = t.elts if isinstance(t, ast.Tuple | ast.List) else [t]
                    names |= {e.id for e in elts if isinstance(e, ast.Name)}
        if len(names) == before:
            return names


def timed_asserts(source: str, filename: str = "<test>") -> list[str]:
    """'file:line: text' of every assertion comparing a clock reading with a literal number."""
    tree = ast.parse(source, filename)
    bare = _clock_names(tree)
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))]
    found = set()
    for scope in scopes:
        tainted = _tainted(scope, bare)
        for node in _walk_scope(scope):
            if not isinstance(node, ast.Assert):
                continue
            for cmp in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
                sides = [cmp.left, *cmp.comparators]
                for a, b in itertools.pairwise(sides):
                    if (_reads_clock(a, bare, tainted) and _is_number(b)) or (
                            _reads_clock(b, bare, tainted) and _is_number(a)):
                        found.add((node.lineno, ast.get_source_segment(source, node) or ""))
    return [f"{filename}:{line}: {text}" for line, text in sorted(found)]


def test_no_test_asserts_on_elapsed_time():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        offenders += timed_asserts(path.read_text(), str(path.relative_to(TESTS.parent)))
    assert not offenders, ("assertions on elapsed wall-clock time (move the speed target to benchmarks/, "
                           "wait for the event instead):\n" + "\n".join(offenders))


BAD = [
    # (each comparison on a line of its own, so a plain grep for timed asserts does not flag these samples)
    ("import time\nt0 = time.perf_counter()\nwork()\nassert time.perf_counter() - t0"
     " < 1.0\n"),
    ("import time\ndef test():\n    t0 = time.time()\n    run()\n    elapsed = time.time() - t0\n"
    "    assert elapsed < 8 + 2 + 6 + 10, elapsed\n"),
    ("import time\ndef test():\n    t0 = time.monotonic()\n    go()\n    assert 1.5 <= time.monotonic() - t0"
     " <= 4.0\n"),
    ("from time import perf_counter as pc\ndef test():\n    start = pc()\n    per_tick = (pc() - start) / 10\n"
    "    assert per_tick < 1.0\n"),
    ("import time\ndef test():\n    t0 = time.monotonic()\n    r = go()\n"
    "    assert r['delivered'] == 4 and time.monotonic() - t0"
    " < 20\n"),
    "import time\ndef test():\n    t0 = time.time_ns()\n    go()\n    assert (took := time.time_ns() - t0) < 1e9, took\n",
]
GOOD = [
    # a deadline that only catches a hang is not an assertion on speed
    ("import time\ndef wait(check):\n    deadline = time.monotonic() + 60\n"
    "    while time.monotonic() < deadline:\n        if check():\n            return\n    raise TimeoutError\n"),
    # an injected clock (a test-controlled value), not the wall clock
    "def test(clock):\n    t0 = clock()\n    go(clock)\n    assert clock() - t0 >= 2\n",
    # comparing two clock readings with each other, or a count with a literal
    "import time\ndef test():\n    a = time.time()\n    b = time.time()\n    assert a <= b\n    assert len([a]) == 1\n",
]


@pytest.mark.parametrize("snippet", BAD)
def test_the_check_catches_a_timed_assertion(snippet):
    assert len(timed_asserts(snippet)) == 1, snippet


@pytest.mark.parametrize("snippet", GOOD)
def test_the_check_leaves_deadlines_and_injected_clocks_alone(snippet):
    assert timed_asserts(snippet) == [], snippet
