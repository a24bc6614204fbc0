"""Tokenizers: the bundled byte-level BPE (trained by ``scripts/train_tokenizer.py`` on this project's own
text), any Hugging Face tokenizer directory (both loaded through transformers' ``AutoTokenizer``), and
``train_bpe``, the one offline BPE trainer every tokenizer of this project is made with."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

TOKENIZER_DIR = Path(__file__).resolve().parent / "assets" / "tokenizer"
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# Qwen2's pre-tokenisation: digits one by one, letters in words, punctuation runs, whitespace kept apart
# from the next word except one leading space (code indentation becomes a few reusable tokens).
PRE_TOKENIZER_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


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


def train_bpe(
    texts: Iterable[str],
    vocab_size: int,
    *,
    eos_token: str = "<|endoftext|>",
    chat_template: str | None = None,
    min_frequency: int = 2,
    max_length: int = 32768,
    progress: bool = False,
):
    """A byte-level BPE trained offline on ``texts`` (deterministic for a fixed corpus), with the ChatML
    special tokens; ``<|endoftext|>`` pads. Returns a transformers ``PreTrainedTokenizerFast``."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if eos_token not in SPECIAL_TOKENS:
        raise ValueError(f"eos_token {eos_token!r} is not one of the special tokens {SPECIAL_TOKENS}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRE_TOKENIZER_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=progress,
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=eos_token,
        pad_token=SPECIAL_TOKENS[0],
        additional_special_tokens=list(SPECIAL_TOKENS[1:]),
        chat_template=chat_template,
        model_max_length=max_length,
    )


def save_tokenizer(fast, path) -> Path:
    """Save ``fast`` so every transformers version this project supports reads it: transformers 5.x alone
    knows the "TokenizersBackend" class and ``chat_template.jinja``, so the config names the generic fast
    class and carries the template inline."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(path))
    (path / "chat_template.jinja").unlink(missing_ok=True)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": fast.eos_token,
        "pad_token": fast.pad_token,
        "additional_special_tokens": list(SPECIAL_TOKENS[1:]),
        "chat_template": fast.chat_template,
        "model_max_length": fast.model_max_length,
        "clean_up_tokenization_spaces": False,
    }
    (path / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return path
