"""README.md and docs/ agree with each other and read as user documentation: every table row has as many
cells as its header, no issue numbers or migration ids, and one set of label names for the pool identity
(the Kubernetes labels of pods and Services, the series labels specwatch reads) in the README and in every
file under deploy/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from backend.config import Settings

ROOT = Path(__file__).resolve().parents[1]
DOCS = {p.relative_to(ROOT).as_posix(): p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
DEPLOY = {p.relative_to(ROOT).as_posix(): p.read_text()
          for p in sorted((ROOT / "deploy").rglob("*")) if p.is_file() and p.suffix in (".yml", ".yaml")}
DELIMITER = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def cells(row: str) -> list[str]:
    """A table row's cells as GitHub splits them: on every pipe not escaped with a backslash (a pipe inside
    `code` splits too, so it must be written \\|)."""
    s = row.strip()
    s = s.removeprefix("|")
    s = s[:-1] if s.endswith("|") and not s.endswith("\\|") else s
    return re.split(r"(?<!\\)\|", s)


def malformed_rows(text: str) -> list[tuple[int, int, int]]:
    """(line, cells, header cells) of every table row whose cell count differs from its header's."""
    lines, out, fenced, i = text.splitlines(), [], False, 0
    while i < len(lines):
        if lines[i].lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if (not fenced and lines[i].lstrip().startswith("|") and i + 1 < len(lines)
                and DELIMITER.match(lines[i + 1])):
            n, j = len(cells(lines[i])), i
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                if len(cells(lines[j])) != n:
                    out.append((j + 1, len(cells(lines[j])), n))
                j += 1
            i = j
            continue
        i += 1
    return out


@pytest.mark.parametrize("name", sorted(DOCS))
def test_every_table_row_has_its_headers_cell_count(name):
    assert malformed_rows(DOCS[name]) == [], f"{name}: (line, cells, header cells)"


def test_the_table_check_would_catch_a_four_cell_row_and_respects_escaped_pipes():
    text = "| a | b | c |\n|---|---|---|\n| `x\\|y` | 2 | 3 |\n| 1 | 2 | 3 | 4 |\n\n```\n| not | a table |\n```\n"
    assert malformed_rows(text) == [(4, 4, 3)]


ISSUE = re.compile(r"\(issue\s*#?\d+\)|\bissue\s*#?\d+\b|\bissues?/\d+\b", re.IGNORECASE)


def _migration_ids() -> set[str]:
    ids = set()
    for p in (ROOT / "migrations" / "versions").glob("*.py"):
        m = re.search(r"^revision\s*(?::\s*str\s*)?=\s*['\"]([^'\"]+)['\"]", p.read_text(), re.MULTILINE)
        if m:
            ids.add(m.group(1))
    return ids


@pytest.mark.parametrize("name", sorted(DOCS))
def test_no_issue_numbers_or_migration_ids_for_users(name):
    text = DOCS[name]
    assert ISSUE.findall(text) == [], name
    ids = _migration_ids()
    assert ids, "no migration ids found: the check would check nothing"
    # a numbered id only after "migration" (0004 is also just a number); a named one anywhere
    shown = [i for i in ids if re.search((r"\bmigrations?\s+" if i.isdigit() else r"(?<![\w-])") + re.escape(i)
                                         + r"(?![\w-])", text, re.IGNORECASE)]
    assert sorted(shown) == [], name


def test_the_settings_sections_carry_no_issue_numbers():
    from scripts import config_table

    assert not any(ISSUE.search(section) for section, *_ in config_table.settings_rows())


# --- one story for the pool identity labels ----------------------------------------------------------------

K8S_KEYS = {"specwatch.io/traffic-class", "specwatch.io/spec-mode", "app.kubernetes.io/name"}


def _meta_labels(text: str) -> set[str]:
    """The Kubernetes label keys relabelings read, as Prometheus spells them (`/`, `.`, `-` → `_`)."""
    found = re.findall(r"__meta_kubernetes_(?:pod|service)_label_([a-z0-9_]+)", text)
    return {f for f in found if not f.endswith("_")}  # `…_label_specwatch_io_…` in prose names a family


def _sanitised(key: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


def test_kubernetes_label_keys_are_the_same_in_the_readme_and_deploy():
    allowed = {_sanitised(k) for k in K8S_KEYS}
    used = {name: _meta_labels(text) for name, text in {"README.md": DOCS["README.md"], **DEPLOY}.items()}
    assert {n: u - allowed for n, u in used.items() if u - allowed} == {}
    for key in ("specwatch.io/traffic-class", "specwatch.io/spec-mode"):
        assert key in DOCS["README.md"], key
        for name in ("deploy/kubernetes/vllm-podmonitor.yaml", "deploy/kubernetes/vllm-servicemonitor.yaml"):
            assert key in DEPLOY[name], (name, key)


def test_relabeling_targets_are_the_series_labels_specwatch_reads():
    """Every relabeling that writes a pool label writes the names of SPECWATCH_CLASS_LABEL / _MODE_LABEL."""
    s = Settings(_env_file=None)
    series = {s.class_label, s.mode_label}
    for name, text in {"README.md": DOCS["README.md"], **DEPLOY}.items():
        targets = set(re.findall(r"target_?[lL]abel:\s*([A-Za-z_][A-Za-z0-9_]*)", text))
        pool_targets = {t for t in targets if "class" in t or "mode" in t}
        assert pool_targets <= series, (name, pool_targets)
    for name in ("deploy/kubernetes/vllm-podmonitor.yaml", "deploy/kubernetes/vllm-servicemonitor.yaml"):
        doc = yaml.safe_load(DEPLOY[name])
        endpoints = doc["spec"].get("podMetricsEndpoints") or doc["spec"].get("endpoints")
        written = {r["targetLabel"] for e in endpoints for r in e.get("relabelings", []) if "targetLabel" in r}
        assert written == series, (name, written)
        assert "targetLabels" not in doc["spec"], f"{name}: copies Service labels under their own names"


# --- links between the pages point at headings that exist ---------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    out, fenced = set(), False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and re.match(r"^#{1,6} ", line):
            out.add(slug(re.sub(r"^#+ ", "", line)))
    return out


@pytest.mark.parametrize("name", sorted(DOCS))
def test_links_to_a_section_name_a_heading_that_exists(name):
    base = (ROOT / name).parent
    broken = []
    for target, fragment in re.findall(r"\]\(([^)#:\s]*)#([^)\s]+)\)", DOCS[name]):
        path = (base / target) if target else ROOT / name
        if path.suffix == ".md" and path.exists() and fragment not in anchors(path.read_text()):
            broken.append(f"{target}#{fragment}")
    assert broken == [], name


def test_the_anchor_rule_matches_githubs():
    assert slug("periodic work at fleet scale (`python -m benchmarks periodic`)") == \
        "periodic-work-at-fleet-scale-python--m-benchmarks-periodic"
    assert slug("Reads on a streaming replica") == "reads-on-a-streaming-replica"


# --- every option the docs give a command is one the command takes -------------------------------------------

COMMAND_IN_DOCS = re.compile(r"(?:`|^\$ |^)(?:[A-Z_]+=\S+ )*specwatch ((?:[a-z][\w-]*)(?: [a-z][\w-]*)?)([^`\n]*)",
                             re.MULTILINE)


def _cli_root():
    import typer

    from backend import cli

    if not cli.app.registered_commands:
        cli._register()
    return typer.main.get_command(cli.app)


def documented_options(text: str, root) -> list[tuple[str, str]]:
    """(command, --option) for every option written after `specwatch COMMAND [SUBCOMMAND]` in code."""
    out = []
    for m in COMMAND_IN_DOCS.finditer(text):
        cmd, used = root, []
        for word in m.group(1).split():
            subs = getattr(cmd, "commands", None)
            if not subs or word not in subs:
                break
            cmd, used = subs[word], [*used, word]
        if not used:
            continue
        rest = " ".join(m.group(1).split()[len(used):]) + " " + m.group(2)
        known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
        out += [(" ".join(used), flag) for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", rest) if flag not in known]
    return out


@pytest.mark.parametrize("name", sorted(DOCS))
def test_every_documented_option_exists(name):
    assert documented_options(DOCS[name], _cli_root()) == [], name


def test_the_option_check_would_catch_a_renamed_flag():
    root = _cli_root()
    assert documented_options("`specwatch calc speedup --k 3 --epsilon 0.2`", root) == [("calc speedup", "--epsilon")]
    assert documented_options("$ specwatch collect --once --json\n", root) == []
