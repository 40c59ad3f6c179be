"""The llama-server launcher (backend.engines.llama_server) and the tiny GGUF vocabulary without building or
starting anything, and the kept exposition and responses of the real server. (The real server runs in
tests/engine/test_llama_server.py, `make test-engine-llamacpp`.)"""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from backend.engines import llama_server, tiny_gguf

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _ready(base: Path) -> Path:
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "llama-server").write_text("")
    (llama_server.gguf_py(base) / "gguf").mkdir(parents=True)
    (base / llama_server.READY_MARK).write_text(json.dumps({"compile_seconds": 794}))
    return base


def test_the_cache_directory_and_its_overrides(monkeypatch, tmp_path):
    monkeypatch.delenv(llama_server.DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert llama_server.default_dir() == tmp_path / "xdg" / "specwatch" / "llama-server-0.3.36"
    monkeypatch.setenv(llama_server.DIR_ENV, str(tmp_path / "mine"))
    assert llama_server.default_dir() == tmp_path / "mine"


def test_a_ready_build_needs_its_mark_its_binary_and_gguf_py(tmp_path):
    base = _ready(tmp_path / "built")
    assert llama_server.ready_info(base) == {"compile_seconds": 794}
    (base / "bin" / "llama-server").unlink()
    assert llama_server.ready_info(base) is None
    assert llama_server.ready_info(tmp_path / "nothing") is None


def test_without_cmake_it_cannot_be_built_unless_it_already_is(monkeypatch, tmp_path):
    monkeypatch.setattr(llama_server.shutil, "which", lambda tool: None if tool == "cmake" else f"/usr/bin/{tool}")
    reason = llama_server.unavailable_reason(tmp_path / "empty")
    assert reason == "no cmake on PATH: building llama-server needs cmake and a C/C++ compiler"
    assert llama_server.unavailable_reason(_ready(tmp_path / "built")) is None


def test_the_server_runs_the_draft_model_with_metrics_on_loopback(tmp_path):
    server = llama_server.LlamaServer(tmp_path / "work", base=tmp_path / "built", port=8123)
    args = server.args()
    opts = dict(zip(args[1::2], args[2::2], strict=False))
    assert args[0] == str(tmp_path / "built" / "bin" / "llama-server")
    assert "--metrics" in args and "--offline" in args and "--no-webui" in args
    assert args[args.index("-md") + 1] == str(tmp_path / "work" / "model" / "tiny-llama-draft.gguf")
    assert args[args.index("--spec-type") + 1] == "draft-simple"  # -md alone drafts nothing in this build
    assert args[args.index("--spec-draft-n-max") + 1] == "3"
    assert args[args.index("--host") + 1] == "127.0.0.1" and server.url == "http://127.0.0.1:8123"
    assert opts["-m"] == str(tmp_path / "work" / "model" / "tiny-llama-target.gguf")


def test_draft_counts_of_a_response():
    assert llama_server.draft_counts({"timings": {"draft_n": 20, "draft_n_accepted": 8}}) == (20, 8)
    assert llama_server.draft_counts({"timings": {"predicted_n": 16}}) == (0, 0)  # nothing drafted: no fields
    assert llama_server.draft_counts({}) == (0, 0)


def test_the_tiny_vocabulary_is_llamas_spm_layout_with_whole_words():
    tokens, scores, types = tiny_gguf.vocabulary()
    assert len(tokens) == len(scores) == len(types) == len(set(tokens)) == 592
    assert tokens[:3] == ["<unk>", "<s>", "</s>"] and types[:3] == [2, 3, 3]
    assert tokens[3] == "<0x00>" and tokens[258] == "<0xFF>" and set(types[3:259]) == {6}
    for piece in ("\u2581r", "\u2581re", "\u2581red", "\u2581river", "r", "\u2581"):
        assert piece in tokens, piece
    assert scores[tokens.index("\u2581river")] == 6.0 > scores[tokens.index("\u2581riv")] == 4.0


def test_the_kept_exposition_is_one_consistent_run_of_the_real_server():
    values: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    for family in text_string_to_metric_families((FIXTURES / "llamacpp-0.3.36.prom").read_text()):
        for s in family.samples:
            if s.name == llama_server.PER_POS:
                per_pos[int(s.labels["position"])] = s.value
            else:
                assert s.labels == {}, s  # llama-server's series carry no label
                values[s.name] = s.value
    draft, accepted, drafts = (values[llama_server.SPEC_COUNTERS[k]]
                               for k in ("draft_tokens", "accepted_tokens", "drafts"))
    assert (draft, accepted, drafts) == (796, 428, 280)
    assert per_pos == {0: 216, 1: 128, 2: 84} and sum(per_pos.values()) == accepted
    assert drafts <= draft <= 3 * drafts
    assert not any(name.endswith("_created") for name in values)
    kept = json.loads((FIXTURES / "llamacpp-0.3.36-completion.json").read_text())
    assert set(kept["responses"]) == set(llama_server.KINDS)
    for kind, final in kept["responses"].items():
        n, ok = llama_server.draft_counts(final)
        assert 0 < n and 0 <= ok <= n, kind
