"""Train the bundled byte-level BPE tokenizer (models/assets/tokenizer) offline.

    .venv/bin/python scripts/train_tokenizer.py                  # defaults: 8192 tokens, repo + stdlib text
    .venv/bin/python scripts/train_tokenizer.py --vocab-size 4096 --extra /path/to/more/text

Corpus: this repository's own text files (docs, Python, configs; weighted x4) plus the Python standard
library's sources (code coverage, present offline everywhere). Qwen2-style pre-tokenisation (digits split,
byte-level), ChatML special tokens. Deterministic for a fixed corpus. Writes tokenizer.json,
tokenizer_config.json and corpus.json (what it was trained on) into the output directory.
"""

from __future__ import annotations

import argparse
import json
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = {".md", ".py", ".yaml", ".yml", ".toml", ".txt", ".cu", ".cuh", ".h", ".hpp", ".cpp", ".c", ".sh"}
SKIP_DIRS = {
    ".venv",
    ".git",
    "outputs",
    "multirun",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    "assets",
    "site-packages",
    "test",
    "tests",
    "idlelib",
    "ensurepip",
    "lib2to3",
    "pydoc_data",
}
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def text_files(root: Path) -> list[Path]:
    files = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).parts
        if path.is_file() and path.suffix in SUFFIXES and not SKIP_DIRS.intersection(rel[:-1]):
            files.append(path)
    return files


def corpus(sources: list[tuple[Path, int]]):
    for root, weight in sources:
        for path in text_files(root):
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for _ in range(weight):
                yield text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--out", type=Path, default=ROOT / "models" / "assets" / "tokenizer")
    ap.add_argument("--extra", type=Path, action="append", default=[], help="more text directories")
    ap.add_argument("--no-stdlib", action="store_true")
    args = ap.parse_args()

    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    sources = [(ROOT, 4)] + [(p, 1) for p in args.extra]
    if not args.no_stdlib:
        sources.append((Path(sysconfig.get_paths()["stdlib"]), 1))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=args.vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=True,
    )
    tok.train_from_iterator(corpus(sources), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL[1:],
        chat_template=CHATML,
        model_max_length=32768,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(args.out))
    # A tokenizer_config.json every transformers version reads (5.x alone knows "TokenizersBackend" and
    # chat_template.jinja): the generic fast class with the template inline.
    (args.out / "chat_template.jinja").unlink(missing_ok=True)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": SPECIAL[0],
        "pad_token": SPECIAL[0],
        "additional_special_tokens": SPECIAL[1:],
        "chat_template": CHATML,
        "model_max_length": 32768,
        "clean_up_tokenization_spaces": False,
    }
    (args.out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    summary = {
        "vocab_size": tok.get_vocab_size(),
        "python": sys.version.split()[0],
        "sources": [
            {
                "dir": str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p),
                "weight": w,
                "files": len(text_files(p)),
            }
            for p, w in sources
        ],
        "special_tokens": SPECIAL,
    }
    (args.out / "corpus.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
