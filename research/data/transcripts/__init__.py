"""The cold-start corpus of agent transcripts for a text-writing policy (issue #32).

``templates``: a correct, deliberately unfused Triton ``ModelNew`` for a task's op chain (one kernel per
op, fixed ``BLOCK=1024``, fixed 32x32x32 ``tl.dot`` tiles, no autotune); ``bugs``: first-attempt bugs a
person makes; ``corpus``: scripted episodes with a sampled bug, its real failure, the fix, benchmark and
submit, played through ``research.agent.run_agent`` against the sandbox into the ``trajectories.jsonl``
that cold-start SFT reads (``sft.demos``); ``detector``: the optimisations a solution uses that the corpus
never shows. Imports ``research.agent`` (the loop), which ``research.data`` itself never does.
"""

from .bugs import BUG_KINDS, EXPECTED, Bug, inject
from .corpus import CorpusConfig, CorpusError, CorpusPolicy, generate_corpus, judged, plan_episode, replay
from .detector import OPTIMISATIONS, uses_unseen_optimisation
from .templates import COVERED, Solution, Uncovered, write_solution

__all__ = [
    "BUG_KINDS",
    "COVERED",
    "EXPECTED",
    "OPTIMISATIONS",
    "Bug",
    "CorpusConfig",
    "CorpusError",
    "CorpusPolicy",
    "Solution",
    "Uncovered",
    "generate_corpus",
    "inject",
    "judged",
    "plan_episode",
    "replay",
    "uses_unseen_optimisation",
    "write_solution",
]
