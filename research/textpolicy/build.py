"""The text policy's tokenizer corpus and its randomly initialised Hugging Face checkpoint."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .spec import MAX_CHECKPOINT_BYTES, TextPolicySpec

ROOT = Path(__file__).resolve().parents[2]
# Source the policy should see spelled well: the operator library (the reference side of every task) and
# the skills' example kernels (CUDA and Triton, the solution side).
LIBRARY_SOURCES = (ROOT / "research" / "data" / "ops", ROOT / "research" / "agent" / "skills")
SUFFIXES = {".py", ".cu", ".cuh", ".md"}
SPEC_FILE = "text_policy.json"


@dataclass
class BuildReport:
    """What :func:`build_checkpoint` made, written beside the weights as ``text_policy.json``."""

    path: str
    spec: dict
    num_params: int
    checkpoint_bytes: int
    vocab_trained: int
    corpus_texts: int
    corpus_chars: int
    corpus_sha256: str
    demos: list[str] = field(default_factory=list)


def _demo_texts(demos: Path, chat, tools) -> Iterator[str]:
    from research.rl.pipeline.sft import demos_path, render_demo_text

    with demos_path(str(demos)).open() as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                yield render_demo_text(chat, rec["messages"], tools)
            except (ValueError, KeyError, TypeError) as exc:
                msg = f"{demos}:{n}: not a research.agent trajectory with messages ({exc})"
                raise ValueError(msg) from None


def tokenizer_texts(demos: Iterable[Path] = (), *, library: bool = True) -> list[str]:
    """The tokenizer's training corpus: each demonstration (a ``trajectories.jsonl`` or a run directory
    holding one) rendered whole through ``TINY_TEMPLATE`` with the agent's tool specs, as the policy will
    read and write it (tool-call arguments are JSON strings, so kernels appear with their escapes); the
    agent's prompts and tool specs; and with ``library`` the operator library's and skills' sources."""
    import models
    from research.agent import tool_specs
    from research.agent.policies.chat import TINY_TEMPLATE, ChatFormat
    from research.agent.prompts import SINGLE_TURN, SYSTEM, TASK

    # Any ChatML tokenizer renders the template's text; the bundled one is always present.
    chat = ChatFormat(models.default_tokenizer(), TINY_TEMPLATE)
    texts = [SYSTEM, TASK, SINGLE_TURN]
    for skills in (False, True):
        texts.append(chat.render([{"role": "system", "content": SYSTEM}], tool_specs(skills)))
    for d in demos:
        texts.extend(_demo_texts(Path(d), chat, tool_specs(True)))
    if library:
        for root in LIBRARY_SOURCES:
            for p in sorted(root.rglob("*")):
                if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts:
                    texts.append(p.read_text(encoding="utf-8"))
    return texts


def build_checkpoint(
    out, spec: TextPolicySpec | None = None, texts: list[str] | None = None, *, demos: Iterable[Path] = ()
) -> BuildReport:
    """Train the tokenizer on ``texts`` (default: :func:`tokenizer_texts` of ``demos``), initialise the
    decoder with ``spec.seed`` and write an HF checkpoint directory (``config.json``, ``model.safetensors``
    in ``spec.dtype``, the tokenizer with ``TINY_TEMPLATE``, ``text_policy.json``). Raises ValueError when
    the weights would exceed :data:`MAX_CHECKPOINT_BYTES`."""
    import torch
    import transformers

    import models
    from research.agent.policies.chat import END_OF_TURN, TINY_TEMPLATE

    spec = spec or TextPolicySpec()
    if spec.checkpoint_bytes() > MAX_CHECKPOINT_BYTES:
        raise ValueError(
            f"a {spec.num_params():,}-parameter {spec.dtype} checkpoint needs "
            f"{spec.checkpoint_bytes() / 2**20:.1f} MiB > the {MAX_CHECKPOINT_BYTES / 2**20:.0f} MiB "
            "the repository ships"
        )
    demos = [Path(d) for d in demos]
    texts = tokenizer_texts(demos) if texts is None else list(texts)
    if not texts:
        raise ValueError("the tokenizer corpus is empty")
    fast = models.train_bpe(texts, spec.vocab_size, eos_token=END_OF_TURN, chat_template=TINY_TEMPLATE)
    if len(fast) > spec.vocab_size:
        raise ValueError(f"the tokenizer has {len(fast)} tokens > vocab_size {spec.vocab_size}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = spec.qwen2_config(
        eos_token_id=fast.convert_tokens_to_ids(END_OF_TURN), pad_token_id=fast.pad_token_id
    )
    torch.manual_seed(spec.seed)
    model = transformers.Qwen2ForCausalLM(config)
    model.to(getattr(torch, spec.dtype)).save_pretrained(str(out))
    models.save_tokenizer(fast, out)
    digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()
    report = BuildReport(
        path=str(out),
        spec=spec.to_dict(),
        num_params=sum(p.numel() for p in model.parameters()),
        checkpoint_bytes=(out / "model.safetensors").stat().st_size,
        vocab_trained=len(fast),
        corpus_texts=len(texts),
        corpus_chars=sum(map(len, texts)),
        corpus_sha256=digest,
        demos=[str(d) for d in demos],
    )
    (out / SPEC_FILE).write_text(json.dumps(report.__dict__, indent=2) + "\n")
    return report
