"""A real llama.cpp server (`llama-server`) on CPU with a draft model, for the engine test.

The binary is built from the llama.cpp source vendored in the ``llama-cpp-python`` source distribution on
PyPI (pinned: VERSION), once, into a directory outside the repository, and reused:
``~/.cache/specwatch/llama-server-<version>`` (``SPECWATCH_LLAMA_SERVER_DIR`` overrides it). Making it:
``pip download --no-binary :all: --no-deps llama-cpp-python==<version>``, unpack, ``cmake`` configure with
no GPU backend, no OpenSSL/curl, no web UI download (``LLAMA_USE_PREBUILT_UI=OFF``), static libraries and
``GGML_NATIVE=OFF`` (portable code, not tuned to the building CPU), then ``cmake --build --target
llama-server`` at nice 10. The build log is ``build.log`` in that directory and the measured configure and
compile seconds are kept in its ready mark (``.specwatch-ready``, JSON). On this project's 2-core machines
the compile takes most of a quarter of an hour; later runs reuse the binary at once.

The models are built locally (no model hub): a tiny random Llama target and a noisier copy of it as the
draft, both GGUF with one shared vocabulary (backend/engines/tiny_gguf.py, run with this interpreter and
the vendored ``gguf-py`` on PYTHONPATH; it needs NumPy, a dependency of specwatch).

The server: ``llama-server -m target.gguf -md draft.gguf --spec-draft-n-max 3 --metrics`` on 127.0.0.1, 4
slots, offline, no web UI, in its own process group, stopped by that group (SIGTERM, then SIGKILL).
Completion responses carry the per-request draft counts in ``timings.draft_n`` and
``timings.draft_n_accepted``; /metrics has the server's running totals (``llamacpp:spec_decode_*``).

Standard library only (subprocess, urllib, tarfile); nothing here imports llama.cpp."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from backend.engines.process import LocalServer, cache_dir, json_request, post_json, refuse

VERSION = "0.3.36"  # llama-cpp-python on PyPI; its vendor/llama.cpp is what gets built
PACKAGE = "llama-cpp-python"
DIR_ENV = "SPECWATCH_LLAMA_SERVER_DIR"
READY_MARK = ".specwatch-ready"
MODEL_NAME = "tiny-llama"
DRAFT_MAX = 3
SLOTS = 4
TINY_GGUF = Path(__file__).with_name("tiny_gguf.py")
CMAKE_OPTIONS = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF", "-DLLAMA_CURL=OFF",
                 "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
                 "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_APP=OFF",
                 "-DGGML_CUDA=OFF", "-DGGML_VULKAN=OFF", "-DGGML_METAL=OFF"]
# the per-request counts in a completion's `timings`, and the /metrics counters they add up to
SPEC_COUNTERS = {"draft_tokens": "llamacpp:spec_decode_num_draft_tokens_total",
                 "accepted_tokens": "llamacpp:spec_decode_num_accepted_tokens_total",
                 "drafts": "llamacpp:spec_decode_num_drafts_total"}
PER_POS = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"


def default_dir() -> Path:
    """Where the built server lives: $SPECWATCH_LLAMA_SERVER_DIR, else ~/.cache/specwatch/llama-server-<version>."""
    return cache_dir(DIR_ENV, f"llama-server-{VERSION}")


def source_dir(base: Path) -> Path:
    return base / f"llama_cpp_python-{VERSION}" / "vendor" / "llama.cpp"


def binary(base: Path) -> Path:
    return base / "bin" / "llama-server"


def gguf_py(base: Path) -> Path:
    return source_dir(base) / "gguf-py"


def ready_info(base: Path) -> dict | None:
    """The ready mark's contents (version, build seconds), or None when the server is not built there."""
    try:
        info = json.loads((base / READY_MARK).read_text())
    except (OSError, ValueError):
        return None
    if not binary(base).is_file() or not (gguf_py(base) / "gguf").is_dir():
        return None
    return info if isinstance(info, dict) else None


def unavailable_reason(base: Path | None = None) -> str | None:
    """Why llama-server cannot run here, or None when it can (it is built, or can be)."""
    base = base or default_dir()
    if ready_info(base):
        return None
    missing = [tool for tool in ("cmake", "cc", "c++") if shutil.which(tool) is None]
    if missing:
        return f"no {', '.join(missing)} on PATH: building llama-server needs cmake and a C/C++ compiler"
    probe = subprocess.run([sys.executable, "-m", "pip", "--version"], check=False, capture_output=True)
    if probe.returncode != 0:
        return f"no pip for {sys.executable}: the {PACKAGE} source comes from PyPI"
    return None


def _run(args: list[str], log_file: Path, *, cwd: Path | None = None, nice: int = 0) -> None:
    with open(log_file, "ab") as log:
        log.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(args)}\n".encode())
        log.flush()
        done = subprocess.run(args, check=False, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              cwd=cwd, preexec_fn=(lambda: os.nice(nice)) if nice else None)
    if done.returncode != 0:
        tail = "\n".join(log_file.read_text(errors="replace").splitlines()[-40:])
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}); see {log_file}\n{tail}")


def ensure_built(base: Path | None = None, log: Callable[[str], None] = print, jobs: int | None = None) -> Path:
    """The directory holding a built llama-server, building it first if needed (minutes: see the module
    doc). Prints and records the measured build time. Raises EngineUnavailable when it cannot be built. Two
    processes asking at once build it once: the second waits on the first's lock, then finds it ready."""
    base = base or default_dir()
    if ready_info(base):
        return base
    refuse(unavailable_reason(base))
    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".build-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready_info(base):
            _build(base, log, jobs or min(os.cpu_count() or 1, 2))
    return base


def _build(base: Path, log: Callable[[str], None], jobs: int) -> None:
    build_log = base / "build.log"
    sdist = base / f"llama_cpp_python-{VERSION}.tar.gz"
    t0 = time.monotonic()
    if not sdist.is_file():
        log(f"[llama-server] pip download {PACKAGE}=={VERSION} (source)")
        _run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "-d", str(base),
              f"{PACKAGE}=={VERSION}"], build_log)
    src_root = source_dir(base).parents[1]
    if not (source_dir(base) / "CMakeLists.txt").is_file():
        # unpacked beside, then renamed: an interrupted unpacking leaves no half source tree behind
        partial = base / "unpacking"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(src_root, ignore_errors=True)
        with tarfile.open(sdist) as tar:
            tar.extractall(partial, filter="data")
        (partial / src_root.name).rename(src_root)
        shutil.rmtree(partial)
    t_fetch = time.monotonic() - t0
    build = base / "build"
    log(f"[llama-server] building llama-server from {source_dir(base)} ({jobs} jobs, log {build_log})")
    t0 = time.monotonic()
    _run(["cmake", "-S", str(source_dir(base)), "-B", str(build), *CMAKE_OPTIONS], build_log, nice=10)
    t_configure = time.monotonic() - t0
    _run(["cmake", "--build", str(build), "--target", "llama-server", "-j", str(jobs)], build_log, nice=10)
    t_compile = time.monotonic() - t0 - t_configure
    binary(base).parent.mkdir(exist_ok=True)
    shutil.copy2(build / "bin" / "llama-server", binary(base))
    info = {PACKAGE: VERSION, "llama.cpp": server_version(base), "fetch_seconds": round(t_fetch, 1),
            "configure_seconds": round(t_configure, 1), "compile_seconds": round(t_compile, 1),
            "jobs": jobs, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (base / READY_MARK).write_text(json.dumps(info) + "\n")
    log(f"[llama-server] built in {t_configure + t_compile:.0f} s (configure {t_configure:.0f} s, compile "
        f"{t_compile:.0f} s, {jobs} jobs); source fetched in {t_fetch:.0f} s")


def server_version(base: Path) -> str:
    """What `llama-server --version` prints (llama.cpp's build number and commit), on one line."""
    done = subprocess.run([str(binary(base)), "--version"], check=False, capture_output=True, text=True, timeout=60)
    lines = [ln.strip() for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    return next((ln for ln in lines if ln.startswith("version")), lines[-1] if lines else "")


def build_models(base: Path, out: Path) -> tuple[Path, Path]:
    """The tiny target and draft GGUF files in `out` (made once; reused when both are there)."""
    target, draft = out / "tiny-llama-target.gguf", out / "tiny-llama-draft.gguf"
    if target.is_file() and draft.is_file():
        return target, draft
    env = {**os.environ, "PYTHONPATH": str(gguf_py(base))}
    done = subprocess.run([sys.executable, str(TINY_GGUF), str(out)], check=False, capture_output=True, text=True,
                          env=env)
    if done.returncode != 0:
        raise RuntimeError(f"building the tiny GGUF models failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return target, draft


@dataclass
class LlamaServer(LocalServer):
    """One llama-server on 127.0.0.1:`port` with the tiny target and draft models, its work directory
    `workdir` (models, server.log). start() waits for /health; stop() ends the whole process group."""

    base: Path = field(default_factory=default_dir)
    slots: int = SLOTS
    draft_max: int = DRAFT_MAX
    threads: int = 2

    name = "llama-server"
    start_timeout = 300.0

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LLAMA_", "SPECWATCH_", "HF_"))}
        env.update({"LLAMA_CACHE": str(self.workdir / "cache"), "HF_HUB_OFFLINE": "1"})
        return env

    def args(self) -> list[str]:
        return [str(binary(self.base)), "-m", str(self.model_dir / "tiny-llama-target.gguf"),
                "-md", str(self.model_dir / "tiny-llama-draft.gguf"), "--spec-type", "draft-simple",
                "--spec-draft-n-max", str(self.draft_max),
                "--spec-draft-n-min", "0", "--spec-draft-p-min", "0", "--alias", MODEL_NAME,
                "--host", "127.0.0.1", "--port", str(self.port), "--metrics", "--offline", "--no-webui",
                "-c", str(512 * self.slots), "-np", str(self.slots), "-t", str(self.threads), "-td",
                str(self.threads), "--seed", "0", *self.extra_args]

    def prepare(self) -> LlamaServer:
        (self.workdir / "cache").mkdir(parents=True, exist_ok=True)
        build_models(self.base, self.model_dir)
        return self


def post_stream(url: str, body: dict, timeout: float = 120.0) -> list[dict]:
    """The JSON events of a streamed request (SSE `data:` lines, without the closing `[DONE]`)."""
    events = []
    with urllib.request.urlopen(json_request(url, {**body, "stream": True}), timeout=timeout) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data:") and line[5:].strip() != "[DONE]":
                events.append(json.loads(line[5:]))
    return events


WORDS = ["red", "green", "blue", "cat", "dog", "bird", "fish", "tree", "house", "road", "river", "stone"]


def prompt(i: int) -> str:
    """A short prompt of words from the tiny vocabulary, different per i."""
    a, b, c = WORDS[i % 12], WORDS[(i * 5 + 1) % 12], WORDS[(i * 7 + 2) % 12]
    return " ".join([a, b, c] * (1 + i % 3))


def completion_body(i: int, n_predict: int = 16) -> dict:
    """llama.cpp's native /completion request: greedy (temperature 0), never stopping at EOS."""
    return {"prompt": prompt(i), "n_predict": n_predict, "temperature": 0, "ignore_eos": True, "cache_prompt": False,
            "seed": 0}


def draft_counts(response: dict) -> tuple[int, int]:
    """(timings.draft_n, timings.draft_n_accepted) of one completion response or final stream event; the
    server leaves both out when a request drafted nothing."""
    timings = response.get("timings") or {}
    return int(timings.get("draft_n", 0)), int(timings.get("draft_n_accepted", 0))


KINDS = ("completion", "completion_stream", "v1_completions", "v1_chat_stream")


def one_request(server: LlamaServer, kind: str, i: int, n_predict: int = 16) -> dict:
    """One request of `kind` (llama.cpp's /completion, plain or streamed; the OpenAI-style /v1/completions;
    a streamed /v1/chat/completions); its final JSON object, the one that carries `timings`."""
    body = completion_body(i, n_predict)
    if kind == "completion":
        return post_json(f"{server.url}/completion", body)
    if kind == "completion_stream":
        return post_stream(f"{server.url}/completion", body)[-1]
    oai = {"model": MODEL_NAME, "max_tokens": n_predict, "temperature": 0, "ignore_eos": True, "seed": 0,
           "cache_prompt": False}
    if kind == "v1_completions":
        return post_json(f"{server.url}/v1/completions", {**oai, "prompt": prompt(i)})
    if kind == "v1_chat_stream":
        events = post_stream(f"{server.url}/v1/chat/completions",
                             {**oai, "messages": [{"role": "user", "content": prompt(i)}]})
        return next(e for e in reversed(events) if "timings" in e)
    raise ValueError(f"unknown request kind {kind!r}")


def traffic(server: LlamaServer, n: int, concurrency: int = SLOTS, offset: int = 0) -> list[tuple[str, dict]]:
    """`n` requests, the kinds in turn, `concurrency` at a time: [(kind, final response)] in request order."""
    jobs = [(KINDS[i % len(KINDS)], offset + i) for i in range(n)]
    with ThreadPoolExecutor(concurrency) as pool:
        finals = list(pool.map(lambda job: one_request(server, *job), jobs))
    return [(kind, final) for (kind, _), final in zip(jobs, finals, strict=True)]


def capture(out_dir: Path, work: Path, n: int = 48) -> tuple[Path, Path]:
    """Build (if needed) and start llama-server, run `n` requests, and write its /metrics exposition and one
    final response of each kind: ``llamacpp-<version>.prom`` and ``llamacpp-<version>-completion.json``."""
    base = ensure_built()
    server = LlamaServer(work, base=base)
    try:
        server.start()
        done = traffic(server, n)
        exposition = server.metrics()
    finally:
        server.stop()
    samples = {}
    for kind, final in done:
        if kind not in samples and draft_counts(final)[0] > 0:
            samples[kind] = final
    prom = out_dir / f"llamacpp-{VERSION}.prom"
    prom.write_text(exposition)
    sample = out_dir / f"llamacpp-{VERSION}-completion.json"
    info = ready_info(base) or {}
    args = [Path(a).name if a.startswith("/") else a for a in server.args()]  # no local paths
    args[args.index("--port") + 1] = "PORT"
    sample.write_text(json.dumps({"llama-cpp-python": VERSION, "llama.cpp": info.get("llama.cpp"),
                                  "server_args": args, "requests": n, "responses": samples}, indent=1) + "\n")
    return prom, sample


def main(argv: list[str] | None = None) -> int:
    """`python -m backend.engines.llama_server [WORKDIR]`: build llama-server if needed, start it, print its
    URL, serve until Ctrl-C. `python -m backend.engines.llama_server --capture OUT_DIR [WORKDIR]`: write
    the exposition and sample responses of a short run (see capture())."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--capture"] and len(argv) >= 2:
        for path in capture(Path(argv[1]), Path(argv[2] if len(argv) > 2 else ".specwatch/llama-server")):
            print(path)
        return 0
    work = Path(argv[0] if argv else ".specwatch/llama-server")
    base = ensure_built()
    server = LlamaServer(work, base=base)
    return server.serve(f"llama-server ({PACKAGE} {VERSION}: {ready_info(base).get('llama.cpp')}) serving "
                        f"{MODEL_NAME} with a draft model at {server.url}")


if __name__ == "__main__":
    sys.exit(main())
