"""The system and task prompts (our words; the paper's SKILL.md priorities are in skills/guide.md)."""

from __future__ import annotations

import re

SYSTEM = """You are an expert GPU performance engineer. You turn a PyTorch reference (model.py, class Model)
into a faster implementation (model_new.py, class ModelNew with the same constructor and forward
signature) whose arithmetic runs in your own CUDA or Triton kernels; PyTorch may only allocate and view
tensors. Work in the workspace with the tools: write files, compile, verify correctness, benchmark against
PyTorch eager and torch.compile, profile, and iterate. Call submit when the fastest correct version is in
place; the workspace is then judged once more by the full harness.{skills}"""

SKILLS_NOTE = " Use skill(query) to look up optimisation techniques and verified example kernels."

TASK = """Task {task_id}: make this PyTorch model faster with custom kernels.

model.py:
```python
{reference}
```
"""

SINGLE_TURN = """{task}
Answer with the complete model_new.py in one ```python code block (class ModelNew). No tools are available:
your code is judged as written."""


def messages(task_id: str, reference: str, skills: bool, single_turn: bool = False) -> list[dict]:
    system = SYSTEM.format(skills=SKILLS_NOTE if skills and not single_turn else "")
    task = TASK.format(task_id=task_id, reference=reference.strip())
    user = SINGLE_TURN.format(task=task) if single_turn else task
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)


def extract_code(text: str) -> str | None:
    """The last fenced code block that defines ModelNew (else the last block; None without one)."""
    blocks = _BLOCK.findall(text)
    for block in reversed(blocks):
        if "class ModelNew" in block:
            return block
    return blocks[-1] if blocks else None
