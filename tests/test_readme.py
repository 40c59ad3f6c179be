"""The README stays true: every setting and every CLI command is documented, and the two commands lead."""

from pathlib import Path

from backend.config import Settings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_setting_is_documented_with_its_env_name():
    missing = [name for name in Settings.model_fields if f"SPECWATCH_{name.upper()}" not in README]
    assert missing == []


def test_every_cli_command_is_documented():
    from backend import cli

    if not cli.app.registered_commands:
        cli._register()
    names = [c.name for c in cli.app.registered_commands] + [g.name for g in cli.app.registered_groups]
    assert len(names) >= 14
    missing = [n for n in names if f"specwatch {n}" not in README and f"`{n}" not in README]
    assert missing == []


def test_the_two_commands_come_first():
    first_block = README.split("```bash", 1)[1].split("```", 1)[0]
    assert first_block.strip().splitlines()[0].startswith("make demo")
    assert first_block.strip().splitlines()[1].startswith("make test")
