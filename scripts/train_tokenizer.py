"""Train the bundled byte-level BPE tokenizer (models/assets/tokenizer) offline.

    .venv/bin/python -m scripts.train_tokenizer                # defaults: 8192 tokens, repo + stdlib text
    .venv/bin/python -m scripts.train_tokenizer --vocab-size 4096 --extra /path/to/more/text

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

from models._tokenizer import SPECIAL_TOKENS, save_tokenizer, train_bpe

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

    sources = [(ROOT, 4)] + [(p, 1) for p in args.extra]
    if not args.no_stdlib:
        sources.append((Path(sysconfig.get_paths()["stdlib"]), 1))
    fast = train_bpe(corpus(sources), args.vocab_size, chat_template=CHATML, progress=True)
    save_tokenizer(fast, args.out)
    summary = {
        "vocab_size": len(fast),
        "python": sys.version.split()[0],
        "sources": [
            {
                "dir": str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p),
                "weight": w,
                "files": len(text_files(p)),
            }
            for p, w in sources
        ],
        "special_tokens": list(SPECIAL_TOKENS),
    }
    (args.out / "corpus.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
