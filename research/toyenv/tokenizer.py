"""A fixed vocabulary for prompts and plans, ids <-> tokens, and the tiny decoder config that fits it.

A training sequence is ``<bos> PROMPT <sep> PLAN <eos>``. The prompt names the task: its ops in order, the
row width as ``D<next power of two of cols>`` and ``pow2`` / ``npow2`` (whether cols is a power of two, what
the tail mask is about). Ids never change for a token once released: new tokens go at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .grammar import PLAN_TOKENS, Plan, format_plan, parse_plan
from .tasks import ToyTask

PAD, BOS, EOS, SEP = "<pad>", "<bos>", "<eos>", "<sep>"
SPECIALS = (PAD, BOS, EOS, SEP)
WIDTHS = tuple(2**i for i in range(4, 15))  # D16 .. D16384
PROMPT_TOKENS = (*(f"D{w}" for w in WIDTHS), "pow2", "npow2")
VOCAB: tuple[str, ...] = (*SPECIALS, *PLAN_TOKENS, *PROMPT_TOKENS)


def _next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def prompt_tokens(task: ToyTask) -> list[str]:
    width = _next_pow2(task.cols)
    if width not in WIDTHS:
        raise ValueError(f"cols {task.cols} has no width token (D{WIDTHS[0]}..D{WIDTHS[-1]})")
    return [*task.ops, f"D{width}", "pow2" if width == task.cols else "npow2"]


@dataclass(frozen=True)
class PlanTokenizer:
    vocab: tuple[str, ...] = VOCAB

    def __post_init__(self) -> None:
        if len(set(self.vocab)) != len(self.vocab):
            raise ValueError("duplicate tokens in the vocabulary")
        object.__setattr__(self, "_ids", {t: i for i, t in enumerate(self.vocab)})

    def __len__(self) -> int:
        return len(self.vocab)

    @property
    def pad_id(self) -> int:
        return self._ids[PAD]

    # One property per special token: read by name across the toy pipeline.
    @property
    def bos_id(self) -> int:
        return self._ids[BOS]

    @property
    def eos_id(self) -> int:
        return self._ids[EOS]

    @property
    def sep_id(self) -> int:
        return self._ids[SEP]

    def encode(self, tokens: Sequence[str]) -> list[int]:
        try:
            return [self._ids[t] for t in tokens]
        except KeyError as exc:
            raise ValueError(f"token {exc.args[0]!r} is not in the plan vocabulary") from None

    def decode(self, ids: Sequence[int]) -> list[str]:
        out = []
        for i in ids:
            if not 0 <= int(i) < len(self.vocab):
                raise ValueError(f"id {i} is outside the vocabulary (size {len(self.vocab)})")
            out.append(self.vocab[int(i)])
        return out

    def encode_prompt(self, task: ToyTask) -> list[int]:
        """``<bos> PROMPT <sep>``: what the policy conditions on."""
        return self.encode([BOS, *prompt_tokens(task), SEP])

    def encode_plan(self, plan: Plan) -> list[int]:
        """``PLAN <eos>``: what the policy emits."""
        return self.encode([*format_plan(plan), EOS])

    def decode_plan(self, ids: Sequence[int]) -> Plan:
        """The plan in generated ids: up to the first ``<eos>`` (or the end), pad ids dropped;
        ``PlanError`` when the tokens are not a plan, ``ValueError`` for ids outside the vocabulary."""
        toks = []
        for t in self.decode(ids):
            if t == EOS:
                break
            if t != PAD:
                toks.append(t)
        return parse_plan(toks)

    def model_config(self, **overrides):
        """A ``models`` decoder config (``models.tiny_config``) for this vocabulary: 4 layers of width 256
        (about 3M parameters) unless overridden; must stay at or under 20M parameters."""
        from models import tiny_config

        base = dict(
            vocab_size=len(self.vocab),
            max_position_embeddings=128,
            bos_token_id=self.bos_id,
            eos_token_ids=(self.eos_id,),
            pad_token_id=self.pad_id,
        )
        base.update(overrides)
        cfg = tiny_config(**base)
        if cfg.num_params() > 20_000_000:
            raise ValueError(
                f"the toy policy must stay <= 20M parameters, this config has {cfg.num_params()}"
            )
        return cfg
