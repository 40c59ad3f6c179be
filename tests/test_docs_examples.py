"""Every shell example in README.md and docs/*.md runs, and says what really happens.

Each fenced block in `bash`, `sh`, `shell` or `console` is preceded by an annotation, an HTML comment on the
nearest non-blank line above it (GitHub does not show it):

    <!-- example: exit=2 expect="pools found: 4" -->     run it; the exit status and text it must print
    <!-- example: skip reason="starts a long-running service" -->   not run here, and why

A block without one fails the test, and so does a `curl` example outside an annotated block: every
command a reader may copy is either run or skipped on purpose.

The blocks run in bash (`set -e -o pipefail`) against a real stack built for this module: a fresh migrated
database with an hour of seeded history, the simulator, the API on a free port and tokens. `specwatch` is
this virtualenv's entry point; `$SPECWATCH_TOKEN` is a viewer token, `$SPECWATCH_OPERATOR_TOKEN` an
operator's and `$SPECWATCH_INGEST_TOKEN` an ingest token; `127.0.0.1:8000` (the API's documented address) is replaced by the test API's address. The
collector reads the simulator directly (`SPECWATCH_SOURCE=scrape`).

What is checked: the exit status (`exit=`, default 0); every `expect=` text in stdout + stderr; and in a
`console` block (commands after `$ `, the rest their output) every output line shown, whitespace
collapsed, with `…` standing for text left out. Options of an annotation: `exit=N`, `expect="…"`
(repeatable), `run` (nothing else to say: exit 0), `skip`, `reason="…"` (required with skip)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support import db as dbsupport
from tests.support.deadline import deadline
from tests.support.procs import Proc, free_port, wait_for_http
from tests.support.stack import SPECWATCH, env_for

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)\s*$")
ANNOTATION = re.compile(r"^\s*<!--\s*example:(.*?)-->\s*$")
DOC_API = "127.0.0.1:8000"


@dataclass
class Block:
    doc: str
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    note: str | None  # the annotation's options, None when the block has none
    options: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def parse_note(raw: str) -> dict:
    """`exit=2 expect="a" expect="b" skip reason="…"` -> {"exit": 2, "expect": ["a", "b"], "skip": True, ...}."""
    out: dict = {"exit": 0, "expect": [], "skip": False, "reason": ""}
    for word in shlex.split(raw):
        key, sep, value = word.partition("=")
        if key == "skip" and not sep:
            out["skip"] = True
        elif key == "run" and not sep:
            pass  # run with the defaults (exit status 0)
        elif key == "exit" and sep:
            out["exit"] = int(value)
        elif key == "expect" and sep:
            out["expect"].append(value)
        elif key == "reason" and sep:
            out["reason"] = value
        else:
            raise ValueError(f"unknown example option {word!r}")
    return out


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, with the annotation above it (if any)."""
    doc = path.relative_to(ROOT).as_posix()
    lines = path.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""):
            j += 1
        body = "\n".join(x[len(indent):] if x.startswith(indent) else x.lstrip() for x in lines[i + 1:j])
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        note = ANNOTATION.match(lines[k]) if k >= 0 else None
        out.append(Block(doc, i + 1, lang, body, note.group(1).strip() if note else None))
        i = j + 1
    return out


def shell_blocks() -> list[Block]:
    return [b for p in DOC_FILES for b in blocks(p) if b.lang in SHELL]


def curl_outside_shell_blocks() -> list[str]:
    """`curl` examples written anywhere but in a shell block (inline code, other fences)."""
    found = []
    for p in DOC_FILES:
        doc = p.relative_to(ROOT).as_posix()
        text = p.read_text()
        spans = [(b.line, b.line + b.text.count("\n") + 2) for b in blocks(p) if b.lang in SHELL]
        for no, line in enumerate(text.splitlines(), 1):
            example = re.search(r"\bcurl\s+-", line) or re.search(r"`curl\b", line)
            if example and not any(a <= no <= z for a, z in spans):
                found.append(f"{doc}:{no}: {line.strip()[:100]}")
    return found


def _runs(b: Block) -> bool:
    try:
        return b.note is not None and not parse_note(b.note)["skip"]
    except ValueError:
        return False  # reported by the annotation test


SHELL_BLOCKS = shell_blocks()
RUN = [b for b in SHELL_BLOCKS if _runs(b)]


def test_every_shell_block_is_annotated_and_every_skip_has_a_reason():
    problems = []
    for b in SHELL_BLOCKS:
        if b.note is None:
            problems.append(f"{b.id}: ```{b.lang} block without an <!-- example: ... --> annotation")
            continue
        try:
            opts = parse_note(b.note)
        except ValueError as exc:
            problems.append(f"{b.id}: {exc}")
            continue
        if opts["skip"] and not opts["reason"].strip():
            problems.append(f"{b.id}: skipped without a reason")
    assert problems == [], "\n".join(problems)


def test_curl_examples_are_in_annotated_shell_blocks():
    assert curl_outside_shell_blocks() == []


def test_the_runnable_examples_cover_the_cli_and_the_api():
    """The docs show the CLI and the API in examples that run here (not only skipped blocks)."""
    text = "\n".join(b.text for b in RUN)
    assert "specwatch " in text and "curl " in text, [b.id for b in RUN]


def test_the_extractor_finds_annotations_and_unannotated_blocks(tmp_path, monkeypatch):
    doc = tmp_path / "x.md"
    doc.write_text("intro\n\n<!-- example: exit=2 expect=\"a b\" -->\n\n```bash\nfalse\n```\n\n```sh\ntrue\n```\n"
                   "\n  <!-- example: skip reason=\"long\" -->\n  ```console\n  $ sleep 9\n  ```\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = blocks(doc)
    assert [(b.line, b.lang, b.note) for b in found] == [
        (5, "bash", 'exit=2 expect="a b"'), (9, "sh", None), (14, "console", 'skip reason="long"')]
    assert parse_note(found[0].note) == {"exit": 2, "expect": ["a b"], "skip": False, "reason": ""}
    assert found[2].text == "$ sleep 9"


# --- the stack the examples run against -------------------------------------------------------------------


def _token(env: dict, role: str) -> str:
    res = subprocess.run([*SPECWATCH, "tokens", "create", "--role", role, "--name", f"docs-{role}"], env=env,
                         capture_output=True, text=True, timeout=deadline(120), check=True, cwd=ROOT)
    m = re.search(r"\bsw_[A-Za-z0-9_-]+", res.stdout + res.stderr)
    assert m, res.stdout + res.stderr
    return m.group(0)


def _firing_alert(url: str) -> int:
    """One firing alert (what the acknowledge example acts on)."""
    from backend.db.models_alerts import AlertStateRow
    from backend.db.session import make_engine, make_sessionmaker, session_scope

    engine = make_engine(url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            row = AlertStateRow(fingerprint="d" * 32, rule="alpha-low", kind="alpha_low", severity="page",
                                labels={"model": "meta-llama/Llama-3.1-8B-Instruct", "rule": "alpha-low"},
                                group_key="model=meta-llama/Llama-3.1-8B-Instruct", phase="firing",
                                notified_firing=True)
            session.add(row)
            session.flush()
            return row.id
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def stack(pg_admin_url, pg_template, redis_url, tmp_path_factory):
    """Simulator, a migrated database with an hour of history, the API, tokens: what the examples need."""
    name, url = dbsupport.clone(pg_admin_url, pg_template, prefix="specwatch_docs")
    logs = tmp_path_factory.mktemp("docs-examples")
    sim_port, api_port = free_port(), free_port()
    settings = {"database_url": url, "redis_url": redis_url, "data_dir": str(logs / "data"), "source": "scrape",
                "scrape_targets": json.dumps([{"url": f"http://127.0.0.1:{sim_port}/metrics"}]),
                "api_port": api_port, "api_host": "127.0.0.1", "api_access_log": "false"}
    env = env_for(settings)
    procs: list[Proc] = []
    try:
        sim = Proc("sim", [*SPECWATCH, "sim", "--port", str(sim_port), "--scenario", "steady"], logs / "sim.log",
                   env=env, cwd=ROOT).start()
        procs.append(sim)
        subprocess.run([*SPECWATCH, "seed", "--hours", "1", "--tick", "5"], env=env, cwd=ROOT, check=True,
                       capture_output=True, timeout=deadline(600))
        api = Proc("api", [*SPECWATCH, "api"], logs / "api.log", env=env, cwd=ROOT).start()
        procs.append(api)
        wait_for_http(f"http://127.0.0.1:{sim_port}/healthz", proc=sim)
        wait_for_http(f"http://127.0.0.1:{api_port}/api/v1/ready", proc=api)
        alert_id = _firing_alert(url)
        assert alert_id == 1, "the acknowledge example acts on alert 1 of a fresh database"
        run_env = {**env, "SPECWATCH_TOKEN": _token(env, "viewer"), "SPECWATCH_OPERATOR_TOKEN": _token(env, "operator"),
                   "SPECWATCH_INGEST_TOKEN": _token(env, "ingest"),
                   "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
                   "HOME": str(logs), "COLUMNS": "200"}
        yield {"env": run_env, "api": f"127.0.0.1:{api_port}", "alert_id": alert_id, "logs": logs, "procs": procs}
    finally:
        for p in reversed(procs):
            p.stop()
        dbsupport.drop_database(pg_admin_url, name)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def shown_output(block: Block) -> list[str]:
    """A console block's output lines as the docs show them (`…` splits a line into the parts shown)."""
    if block.lang != "console":
        return []
    parts = []
    for line in block.text.splitlines():
        if line.startswith("$ ") or not line.strip():
            continue
        parts += [_norm(p) for p in line.split("…") if _norm(p)]
    return parts


def script_of(block: Block) -> str:
    if block.lang == "console":
        return "\n".join(line[2:] for line in block.text.splitlines() if line.startswith("$ "))
    return block.text


@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_the_example_runs_as_documented(stack, block):
    opts = parse_note(block.note)
    script = script_of(block).replace(DOC_API, stack["api"])
    res = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=ROOT, env=stack["env"],
                         capture_output=True, text=True, timeout=deadline(300), check=False)
    out = res.stdout + res.stderr
    said = f"{block.id}: `{script}` exited {res.returncode}\n--- stdout\n{res.stdout}\n--- stderr\n{res.stderr}"
    assert res.returncode == opts["exit"], said
    flat = _norm(out)
    for text in opts["expect"]:
        assert _norm(text.replace(DOC_API, stack["api"])) in flat, f"expected {text!r}\n{said}"
    for part in shown_output(block):
        assert part.replace(DOC_API, stack["api"]) in flat, f"the docs show {part!r}\n{said}"


def test_the_stack_api_answers(stack):
    """The fixture's API is the one the examples reach (a wrong port would make every curl fail the same way)."""
    with urllib.request.urlopen(f"http://{stack['api']}/api/v1/health", timeout=10) as r:
        assert json.loads(r.read()) == {"status": "ok"}
