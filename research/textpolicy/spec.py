"""The text policy's shape: one home for its defaults."""

from __future__ import annotations

from dataclasses import asdict, dataclass

MAX_CHECKPOINT_BYTES = 16 * 2**20  # what the repository ships at most (issue #32)
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class TextPolicySpec:
    """A Qwen2-family decoder (q/k/v biases, tied embeddings). The defaults give ~5.8M parameters: 11.5 MB
    in bf16, room for a 4096-token code vocabulary and 8K-token agent episodes (two turns of a system
    prompt with tool specs, a reference and two kernels). Width over depth: at this size a wider model
    learns the copy-heavy source-writing task faster per FLOP than a deeper one."""

    vocab_size: int = 4096
    hidden_size: int = 256
    num_layers: int = 6
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 768
    max_position_embeddings: int = 8192
    rope_theta: float = 10_000.0
    dtype: str = "bfloat16"  # the saved checkpoint's dtype (training runs in fp32 master weights)
    seed: int = 0  # initial weights

    def __post_init__(self):
        problems = []
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be positive, got {getattr(self, name)}")
        if self.num_heads > 0 and self.hidden_size % self.num_heads:
            problems.append(f"hidden_size {self.hidden_size} is not a multiple of num_heads {self.num_heads}")
        if self.num_kv_heads > 0 and self.num_heads % self.num_kv_heads:
            problems.append(
                f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.num_kv_heads}"
            )
        if self.dtype not in DTYPE_BYTES:
            problems.append(f"dtype {self.dtype!r} not in {sorted(DTYPE_BYTES)}")
        if problems:
            raise ValueError("invalid TextPolicySpec: " + "; ".join(problems))

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    def num_params(self) -> int:
        d, f, h = self.hidden_size, self.intermediate_size, self.head_dim
        qkv = self.num_heads + 2 * self.num_kv_heads
        per_layer = d * h * qkv + qkv * h + self.num_heads * h * d + 3 * d * f + 2 * d
        return self.vocab_size * d + self.num_layers * per_layer + d

    def checkpoint_bytes(self) -> int:
        """Weights only (the safetensors header and tokenizer add well under 1 MB)."""
        return self.num_params() * DTYPE_BYTES[self.dtype]

    def qwen2_config(self, *, eos_token_id: int, pad_token_id: int):
        """transformers' ``Qwen2Config`` of this spec (``save_pretrained`` adds ``architectures``,
        ``model_type`` and the weights' ``torch_dtype`` to ``config.json`` itself)."""
        import transformers

        return transformers.Qwen2Config(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            num_hidden_layers=self.num_layers,
            num_attention_heads=self.num_heads,
            num_key_value_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            max_position_embeddings=self.max_position_embeddings,
            rope_theta=self.rope_theta,
            rms_norm_eps=1e-6,
            hidden_act="silu",
            tie_word_embeddings=True,
            use_sliding_window=False,
            eos_token_id=eos_token_id,
            pad_token_id=pad_token_id,
            bos_token_id=None,
            initializer_range=0.02,
        )

    def to_dict(self) -> dict:
        return asdict(self)
