"""Build a tiny random Llama and its tokenizer for a local vLLM (no model hub): run with the engine venv's
Python (it has torch, transformers and tokenizers), `python tiny_llama.py OUT_DIR`. Standard library
apart from those three; it imports nothing from specwatch, so the engine's interpreter can run it alone.

The model: transformers ``LlamaConfig`` with hidden size 128, 2 layers, 2 attention heads of size 64
(vLLM's CPU attention takes head sizes 32/64/80/...), random weights from a fixed seed, float32. The
tokenizer: a word-level ``tokenizers`` model trained on a small built-in corpus and saved as a
``PreTrainedTokenizerFast`` with a chat template, so /v1/completions and /v1/chat/completions both work.
The same seed and corpus give the same files every time."""

from __future__ import annotations

import sys
from pathlib import Path

SEED = 1234
WORDS = ["the", "a", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "red", "green", "blue", "cat", "dog", "bird", "fish", "tree", "house", "road", "river", "stone", "light", "dark", "fast", "slow", "up", "down", "left", "right", "open", "close", "start", "stop", "yes", "no", "and", "or", "but", "if", "then", "else", "when", "where", "what", "who", "why", "how", "this", "that", "these", "those", "here", "there", "now", "later", "again", "always", "never", "more", "less", "many", "few", "all", "some", "every", "each", "other", "same", "new", "old", "big", "small", "long", "short", "high", "low", "hot", "cold", "good", "bad", "first", "last", "next", "time", "day", "night", "year", "way"]
CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|> {% endif %}")
SPECIAL = ["<unk>", "<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>"]


def corpus() -> list[str]:
    n = len(WORDS)
    return [" ".join(WORDS[(i * 7 + j * 3) % n] for j in range(12)) for i in range(400)]


def build(out: Path) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.train_from_iterator(corpus(), trainers.WordLevelTrainer(special_tokens=SPECIAL))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    torch.manual_seed(SEED)
    config = LlamaConfig(vocab_size=fast.vocab_size, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, head_dim=64, max_position_embeddings=1024,
                         bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                         pad_token_id=fast.pad_token_id, tie_word_embeddings=False, torch_dtype="float32")
    LlamaForCausalLM(config).to(torch.float32).save_pretrained(out)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tiny_llama.py OUT_DIR")
    print(build(Path(sys.argv[1])))
