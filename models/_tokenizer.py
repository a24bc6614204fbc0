"""Tokenizers: the bundled byte-level BPE (trained by ``scripts/train_tokenizer.py`` on this project's own
text) and any Hugging Face tokenizer directory, both loaded through transformers' ``AutoTokenizer``."""

from __future__ import annotations

from pathlib import Path

TOKENIZER_DIR = Path(__file__).resolve().parent / "assets" / "tokenizer"
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def load_tokenizer(path=None):
    """The tokenizer of a checkpoint directory (default: the bundled one)."""
    from transformers import AutoTokenizer

    path = Path(TOKENIZER_DIR if path is None else path)
    if not path.is_dir():
        raise FileNotFoundError(f"tokenizer directory {path} does not exist")
    if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json", "vocab.json")):
        raise FileNotFoundError(f"{path} holds no tokenizer files (tokenizer.json / tokenizer_config.json)")
    return AutoTokenizer.from_pretrained(str(path))


def default_tokenizer():
    """The bundled BPE tokenizer (ChatML special tokens; ``<|endoftext|>`` is EOS and padding)."""
    return load_tokenizer(TOKENIZER_DIR)
