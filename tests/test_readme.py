"""The README stays true: every setting is in the generated configuration table with its default and nothing
in the table is unknown to the code, every CLI command is documented, the two commands lead, and neither
the README nor docs/ carries measurement history (who measured what, when, on which machine)."""

import re
from pathlib import Path

import pytest

from backend.config import Settings
from dashboard.settings import ENVIRONMENT
from scripts import config_table

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
DOCS = {p.relative_to(ROOT).as_posix(): p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}


def _table_rows() -> dict[str, str]:
    """SPECWATCH_NAME -> its default cell, from README.md's configuration block."""
    block = config_table.readme_block(README)
    rows = {}
    for line in block.splitlines():
        m = re.match(r"^\| `(SPECWATCH_[A-Z0-9_]+)` \| (.*?) \| ", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def test_the_configuration_table_is_the_generated_one():
    assert config_table.readme_block(README) == config_table.table(), (
        "README.md's configuration table is stale: run python -m scripts.config_table --write")


def test_every_setting_is_in_the_table_with_its_default():
    rows = _table_rows()
    for name, field in Settings.model_fields.items():
        env = f"SPECWATCH_{name.upper()}"
        assert env in rows, f"{env} is missing from the configuration table"
        assert rows[env] == config_table.fmt_default(config_table._default(field)), env
        assert rows[env] != "``"
    for env, default, _meaning in config_table.dashboard_rows():
        assert rows.get(env) == default, f"{env} (dashboard) is missing from the table or has another default"


def test_nothing_in_the_table_is_unknown_to_the_code():
    known = {f"SPECWATCH_{n.upper()}" for n in Settings.model_fields} | set(ENVIRONMENT)
    assert set(_table_rows()) - known == set()


def test_every_setting_has_a_meaning():
    assert [env for _s, env, _d, meaning in config_table.settings_rows() if not meaning.strip()] == []


def test_defaults_are_formatted_as_a_user_would_type_them():
    assert config_table.fmt_default(True) == "`true`" and config_table.fmt_default("") == '`""` (empty)'
    assert config_table.fmt_default({"a": 1.0}) == '`{"a": 1.0}`' and config_table.fmt_default(Path("x")) == "`x`"


def test_every_cli_command_is_documented():
    from backend import cli

    if not cli.app.registered_commands:
        cli._register()
    names = [c.name for c in cli.app.registered_commands] + [g.name for g in cli.app.registered_groups]
    assert len(names) >= 15
    missing = [n for n in names if f"specwatch {n}" not in README and f"`{n}" not in README]
    assert missing == []


def test_the_two_commands_come_first():
    first_block = README.split("```bash", 1)[1].split("```", 1)[0]
    assert first_block.strip().splitlines()[0].startswith("make demo")
    assert first_block.strip().splitlines()[1].startswith("make test")


def test_the_screenshots_are_shown_and_exist():
    shown = re.findall(r"\(docs/screenshots/([\w-]+\.png)\)", README)
    assert {"overview.png", "acceptance.png", "model.png", "calculator.png", "alerts.png"} <= set(shown)
    assert all((ROOT / "docs" / "screenshots" / name).exists() for name in shown)


def test_local_links_resolve():
    for name, text in DOCS.items():
        base = (ROOT / name).parent
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (base / target).exists(), f"{name}: broken link {target}"


DIARY = [
    (r"\bstop \d+\b", "a work-session number"),
    (r"\bstops?\b[^.\n]{0,20}\b(previous|last|this|earlier)\b|\b(previous|last|this|earlier) stop\b", "a session"),
    (r"\bVMs?\b", "a virtual machine"),
    (r"\b(this|that|a|the|one) machine\b[^.\n]{0,40}\b(today|yesterday|then|earlier)\b", "a dated machine"),
    (r"\b(first|second|third|fourth|fifth) (VM|machine)\b", "which machine"),
    (r"\bcommit [0-9a-f]{6,40}\b|\b[0-9a-f]{7,40}\b(?=[^|\n]*\bcommit\b)", "a commit hash"),
    (r"\b(measured|re-measured|run|ran) (on|at) 20\d\d-\d\d-\d\d\b|\b20\d\d-\d\d-\d\d\b[^.\n]{0,30}\bmeasured\b", "a date"),
    (r"\bthrown away\b|\bdiscarded runs?\b", "discarded runs"),
]


@pytest.mark.parametrize("name", sorted(DOCS))
def test_no_measurement_diary(name):
    text = DOCS[name]
    found = [(why, m.group(0)) for pattern, why in DIARY for m in re.finditer(pattern, text, re.IGNORECASE)]
    assert found == [], f"{name}: measurement history belongs nowhere in the project: {found}"


def test_the_diary_check_would_catch_the_old_text():
    old = ("Stop 22, a fourth VM (fill 423 s). The previous table (stop 20's VM, commit 17c8783) had Q4 at "
           "110.8x. Measured 2026-12-01 on the 2-core machine.")
    found = [m.group(0) for pattern, _why in DIARY for m in re.finditer(pattern, old, re.IGNORECASE)]
    assert {"Stop 22", "VM", "fourth VM", "commit 17c8783"} <= set(found)
