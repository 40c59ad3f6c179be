"""Write a tiny random Llama target model and its draft as GGUF files, for a local llama-server (no model hub):
`python tiny_gguf.py OUT_DIR`, run with `gguf` (gguf-py, e.g. the copy vendored in llama.cpp's source on
PYTHONPATH) and NumPy importable. Imports nothing from specwatch, so any interpreter with those two runs it.

Both files share one vocabulary (llama.cpp refuses a draft whose vocabulary differs from the target's): a
SentencePiece-style ("llama") vocabulary of <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF> (so any
text tokenizes), single characters, and ``▁word`` pieces with every prefix (so llama.cpp's merge-based SPM
tokenizer reaches whole words; longer pieces score higher).

The target: Llama with embedding width 64, 2 layers, 2 heads of size 32, feed-forward width 128, context
512, float32 weights drawn from a fixed seed. The draft: the same weights plus Gaussian noise of
``DRAFT_NOISE`` times each tensor's own scale, from another fixed seed, so under greedy sampling the draft
agrees with the target on most tokens but not all (the acceptance rate lies strictly between 0 and 1).
Byte, control and <unk> rows of the output matrix are scaled down so greedy decoding prefers word pieces.
The same seeds give the same files every time."""

from __future__ import annotations

import sys
from pathlib import Path

SEED = 1234
DRAFT_SEED = 4321
DRAFT_NOISE = 0.1
TARGET_FILE = "tiny-llama-target.gguf"
DRAFT_FILE = "tiny-llama-draft.gguf"
N_EMBD, N_LAYER, N_HEAD, N_FF, N_CTX = 64, 2, 2, 128, 512
WORDS = ["the", "a", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "red", "green",
         "blue", "cat", "dog", "bird", "fish", "tree", "house", "road", "river", "stone", "light", "dark", "fast",
         "slow", "up", "down", "left", "right", "open", "close", "start", "stop", "yes", "no", "and", "or", "but",
         "if", "then", "else", "when", "where", "what", "who", "why", "how", "this", "that", "here", "there", "now",
         "later", "again", "always", "never", "more", "less", "many", "few", "all", "some", "every", "each",
         "other", "same", "new", "old", "big", "small", "long", "short", "high", "low", "hot", "cold", "good",
         "bad", "first", "last", "next", "time", "day", "night", "year", "way"]
CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?'\"-()[]{}<>/|_=+*#@&%$"
SPACE = "\u2581"  # SentencePiece's word-start mark


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, token types) in llama.cpp's SPM layout: control tokens, bytes, then pieces."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256  # UNKNOWN, CONTROL, CONTROL, BYTE...
    scores = [0.0] * len(tokens)
    pieces: dict[str, None] = dict.fromkeys([SPACE, *CHARS])
    for word in WORDS:
        full = SPACE + word
        for end in range(2, len(full) + 1):
            pieces[full[:end]] = None
    for piece in pieces:
        tokens.append(piece)
        types.append(1)  # NORMAL
        scores.append(float(len(piece)))  # prefer the longest merge
    return tokens, scores, types


def weights(n_vocab: int, seed: int) -> dict[str, object]:
    import numpy as np

    rng = np.random.default_rng(seed)
    head_dim = N_EMBD // N_HEAD

    def mat(rows: int, cols: int, scale: float | None = None) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * (scale or cols ** -0.5)).astype(np.float32)

    out = {"token_embd.weight": mat(n_vocab, N_EMBD, 1.0), "output_norm.weight": np.ones(N_EMBD, np.float32)}
    output = mat(n_vocab, N_EMBD, 1.0)
    output[:259] *= 0.05  # <unk>, <s>, </s> and the byte tokens: rarely the greedy choice
    out["output.weight"] = output
    for i in range(N_LAYER):
        out.update({
            f"blk.{i}.attn_norm.weight": np.ones(N_EMBD, np.float32),
            f"blk.{i}.attn_q.weight": mat(N_HEAD * head_dim, N_EMBD),
            f"blk.{i}.attn_k.weight": mat(N_HEAD * head_dim, N_EMBD),
            f"blk.{i}.attn_v.weight": mat(N_HEAD * head_dim, N_EMBD),
            f"blk.{i}.attn_output.weight": mat(N_EMBD, N_HEAD * head_dim),
            f"blk.{i}.ffn_norm.weight": np.ones(N_EMBD, np.float32),
            f"blk.{i}.ffn_gate.weight": mat(N_FF, N_EMBD),
            f"blk.{i}.ffn_up.weight": mat(N_FF, N_EMBD),
            f"blk.{i}.ffn_down.weight": mat(N_EMBD, N_FF),
        })
    return out


def noisy(tensors: dict[str, object], seed: int, noise: float) -> dict[str, object]:
    """Each weight matrix plus Gaussian noise of `noise` times its own standard deviation (norms untouched)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = {}
    for name, t in tensors.items():
        if t.ndim == 2:
            t = (t + rng.standard_normal(t.shape) * (noise * float(t.std()))).astype(np.float32)
        out[name] = t
    return out


def write(path: Path, name: str, tensors: dict[str, object]) -> Path:
    import gguf

    tokens, scores, types = vocabulary()
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(name)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(len(tokens))
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    for tname, t in tensors.items():
        w.add_tensor(tname, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def build(out: Path, noise: float = DRAFT_NOISE) -> tuple[Path, Path]:
    """The target and draft GGUF files in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    target = weights(len(vocabulary()[0]), SEED)
    return (write(out / TARGET_FILE, "tiny-llama-target", target),
            write(out / DRAFT_FILE, "tiny-llama-draft", noisy(target, DRAFT_SEED, noise)))


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python tiny_gguf.py OUT_DIR [DRAFT_NOISE]")
    for p in build(Path(sys.argv[1]), *(float(a) for a in sys.argv[2:])):
        print(p)
