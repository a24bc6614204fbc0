"""research.textpolicy: the small text-writing policy of the learning study (issue #32).

No pretrained code model can be downloaded here, so the claim that staged RL teaches an LLM to write faster
kernels is shown on a decoder we build and train ourselves, writing source text through the same agent loop,
tools and sandbox a 7B model would use:

* ``spec.py``: :class:`TextPolicySpec`, the model's shape (a Qwen2-family ``models`` decoder whose bf16
  checkpoint fits the 16 MB the repository ships) and its Hugging Face config;
* ``build.py``: the tokenizer (a byte-level BPE trained offline by ``models.train_bpe`` on the cold-start
  transcripts as the chat template renders them, the agent's prompts and tool specs, the skills' example
  kernels and the operator library's source), the chat template the agent loop parses (``TINY_TEMPLATE``:
  Qwen-style ``<tool_call>`` blocks, ``<|im_end|>`` ends a turn) and :func:`build_checkpoint`, which writes
  the randomly initialised HF checkpoint that ``experiments.train env=agent model=hf`` starts from.

The cold-start corpus is ``research.data.transcripts``; training is the staged pipeline (``research.rl``).
"""

from .build import BuildReport, build_checkpoint, tokenizer_texts
from .spec import MAX_CHECKPOINT_BYTES, TextPolicySpec

__all__ = ["MAX_CHECKPOINT_BYTES", "BuildReport", "TextPolicySpec", "build_checkpoint", "tokenizer_texts"]
