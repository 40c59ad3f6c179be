"""The llama-server launcher (backend.engines.llama_server) and the tiny GGUF vocabulary without building or
starting anything, and the kept exposition and responses of the real server. (The real server runs in
tests/engine/test_llama_server.py, `make test-engine-llamacpp`.)"""

from __future__ import annotations

import io
import json
import tarfile
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


def test_a_build_unpacks_the_source_builds_only_the_server_and_records_its_time(monkeypatch, tmp_path):
    """The build steps, with cmake replaced by a recorder: the source archive already in the folder is
    unpacked (no download), cmake configures with the pinned options and builds only `llama-server` at nice
    10, the binary is copied to bin/ and the ready mark records the times; a second call builds nothing."""
    base = tmp_path / "cache"
    base.mkdir()
    with tarfile.open(base / "llama_cpp_python-0.3.36.tar.gz", "w:gz") as tar:
        for name in ("vendor/llama.cpp/CMakeLists.txt", "vendor/llama.cpp/gguf-py/gguf/__init__.py"):
            info = tarfile.TarInfo(f"llama_cpp_python-0.3.36/{name}")
            tar.addfile(info, io.BytesIO(b""))
    calls = []

    def fake_run(args, log_file, *, cwd=None, nice=0):
        calls.append((args, nice))
        if "--build" in args:
            (base / "build" / "bin").mkdir(parents=True)
            (base / "build" / "bin" / "llama-server").write_text("#!")

    monkeypatch.setattr(llama_server, "_run", fake_run)
    monkeypatch.setattr(llama_server, "unavailable_reason", lambda base=None: None)
    monkeypatch.setattr(llama_server, "server_version", lambda base: "version: 0.5.0-dev (build 1, commit 0c1e570)")
    logged = []
    assert llama_server.ensure_built(base, log=logged.append, jobs=2) == base
    (configure, n1), (build, n2) = calls
    assert configure == ["cmake", "-S", str(llama_server.source_dir(base)), "-B", str(base / "build"),
                         *llama_server.CMAKE_OPTIONS]
    assert {"-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF", "-DGGML_NATIVE=OFF"} <= set(configure)
    assert build == ["cmake", "--build", str(base / "build"), "--target", "llama-server", "-j", "2"]
    assert n1 == n2 == 10
    assert llama_server.binary(base).read_text() == "#!"
    info = llama_server.ready_info(base)
    assert info["llama.cpp"] == "version: 0.5.0-dev (build 1, commit 0c1e570)" and info["jobs"] == 2
    assert {"fetch_seconds", "configure_seconds", "compile_seconds"} <= set(info)
    assert not (base / "unpacking").exists()
    assert logged[-1].startswith("[llama-server] built in ")
    calls.clear()
    assert llama_server.ensure_built(base, log=logged.append) == base and calls == []
