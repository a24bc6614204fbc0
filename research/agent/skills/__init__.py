"""The agent's skills: an optimisation guide (``guide.md``, one document per section) and verified example
kernels (``examples/<name>/``: ``skill.md`` with a title, tags and the technique; ``problem.py``, a
KernelBench-format reference; ``model_new.py`` and optional ``kernels/``, a solution the sandbox judges
correct, checked by tests/agent/test_skills.py). ``SkillLibrary.search`` ranks them with BM25 (``bm25s``).
Each example is standalone, as the agent reads it: two examples may repeat a reference or a tile loader
(the two matmuls) on purpose, since a shared module would be one the agent never sees.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

SKILLS_DIR = Path(__file__).resolve().parent
GUIDE = SKILLS_DIR / "guide.md"
EXAMPLES_DIR = SKILLS_DIR / "examples"


@dataclass
class Skill:
    """One searchable document: a guide section or an example (``path``: its directory)."""

    name: str
    title: str
    kind: str  # guide | example
    text: str
    tags: str = ""
    language: str = ""
    code: str = ""
    path: Path | None = None

    def render(self, max_code_chars: int = 2500) -> str:
        head = f"## {self.title} [{self.kind}{': ' + self.language if self.language else ''}]\n{self.text}"
        if not self.code:
            return head
        code = self.code if len(self.code) <= max_code_chars else self.code[:max_code_chars] + "\n# ... (cut)"
        return f"{head}\n```python\n{code}\n```"


def load_guide(path: Path = GUIDE) -> list[Skill]:
    sections = re.split(r"^## ", path.read_text(), flags=re.M)[1:]
    out = []
    for sec in sections:
        title, _, body = sec.partition("\n")
        out.append(Skill(name="guide/" + _slug(title), title=title.strip(), kind="guide", text=body.strip()))
    return out


def load_example(directory: Path) -> Skill:
    meta = (directory / "skill.md").read_text().splitlines()
    if not meta or not meta[0].startswith("# "):
        raise ValueError(f"{directory / 'skill.md'}: the first line must be '# <title>'")
    fields = {}
    body = []
    for line in meta[1:]:
        key, sep, value = line.partition(":")
        if sep and key in ("tags", "language") and not body:
            fields[key] = value.strip()
        else:
            body.append(line)
    if fields.get("language") not in ("cuda", "triton"):
        raise ValueError(f"{directory / 'skill.md'}: 'language: cuda|triton' is required")
    return Skill(
        name=directory.name,
        title=meta[0][2:].strip(),
        kind="example",
        text="\n".join(body).strip(),
        tags=fields.get("tags", ""),
        language=fields["language"],
        code=(directory / "model_new.py").read_text(),
        path=directory,
    )


def load_examples(root: Path = EXAMPLES_DIR) -> list[Skill]:
    return [load_example(d) for d in sorted(root.iterdir()) if (d / "skill.md").is_file()]


class SkillLibrary:
    """BM25 retrieval (``bm25s``, English stopwords) over the guide's sections and the examples (title,
    tags, description and code identifiers)."""

    def __init__(self, skills: list[Skill] | None = None):
        try:
            import bm25s
        except ImportError:  # seen on a CUDA image without it: say what to do, not just the module name
            raise ImportError(
                "the skill library needs bm25s (pip install bm25s==0.3.16, requirements.txt; on an offline "
                "GPU image carry it with scripts/prepare_wheels.sh), or run with agent.skills=false"
            ) from None

        # bm25s sets its logger to DEBUG on import (an index build logs a line): inherit the app's level.
        logging.getLogger("bm25s").setLevel(logging.NOTSET)
        self.skills = skills if skills is not None else load_guide() + load_examples()
        if not self.skills:
            raise ValueError("a skill library needs at least one skill")
        self._bm25s = bm25s
        corpus = [self._document(s) for s in self.skills]
        self._index = bm25s.BM25()
        self._index.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)

    @staticmethod
    def _document(s: Skill) -> str:
        words = " ".join(re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", s.code))
        tags = s.tags.replace("_", " ")
        return f"{s.title} {s.title} {tags} {tags} {s.language} {s.text} {words}"

    def search(self, query: str, k: int = 3) -> list[tuple[Skill, float]]:
        """The best ``k`` skills for ``query`` with their BM25 scores (only scores > 0)."""
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        k = min(k, len(self.skills))
        ids, scores = self._index.retrieve(tokens, k=k, show_progress=False)
        return [(self.skills[int(i)], float(s)) for i, s in zip(ids[0], scores[0]) if s > 0]

    @staticmethod
    def render(hits: list[tuple[Skill, float]]) -> str:
        return "\n\n".join(s.render() for s, _ in hits)


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")[:40]
