"""The red-team corpus: every solution file under ``solutions/`` declares, in its first line, what it targets
and what the judge must say about it:

    # redteam: class=N expect=CHECK problem=NAME policy=POLICY [device=cuda] [marks=slow] [phase=timing]
    # redteam: expect=accepted problem=NAME policy=POLICY style=STYLE [families=noncontig]

``class`` is the row of ../../shared/reference/reward_hacks.md the attack belongs to; ``expect`` is what the
sandbox's verdict must say: a check name (``rejected`` with that ``check``), ``accepted`` (``correct``, for
legitimate solutions), ``family:NAME`` (``incorrect``: only that fatal adversarial input family catches it),
``a|b`` when the file explains why either check may fire first. ``helpers=a.py,b.py`` makes the case a
workspace: the solution becomes its ``model_new.py`` next to those helper modules (from this folder).
``phase=timing``: the attack acts in the timed calls, so the case is judged with timing on.
``probe=race``: the case is judged with the race probe forced on (``JudgeConfig.race_check="always"``;
compute-sanitizer racecheck, GPU only); every other case with it off.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
PROBLEMS = os.path.join(HERE, "problems")
SOLUTIONS = os.path.join(HERE, "solutions")


@dataclass(frozen=True)
class Case:
    path: str  # relative to SOLUTIONS
    expect: str
    problem: str
    policy: str
    hack_class: int | None = None
    device: str = "cpu"
    marks: tuple[str, ...] = ()
    style: str = ""
    families: tuple[str, ...] = ()
    helpers: tuple[str, ...] = ()
    phase: str = ""
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def id(self) -> str:
        return self.path.removesuffix(".py").replace(os.sep, "/")

    @property
    def legit(self) -> bool:
        return self.expect == "accepted"


def parse_header(path: str) -> Case:
    with open(path) as f:
        first = f.readline().strip()
    if not first.startswith("# redteam:"):
        raise ValueError(f"{path}: first line must be a '# redteam:' header")
    fields = dict(part.split("=", 1) for part in first.removeprefix("# redteam:").split())
    rel = os.path.relpath(path, SOLUTIONS)
    return Case(
        path=rel,
        expect=fields.pop("expect"),
        problem=fields.pop("problem"),
        policy=fields.pop("policy", "strict"),
        hack_class=int(fields.pop("class")) if "class" in fields else None,
        device=fields.pop("device", "cpu"),
        marks=tuple(m for m in fields.pop("marks", "").split(",") if m),
        style=fields.pop("style", ""),
        families=tuple(f for f in fields.pop("families", "").split(",") if f),
        helpers=tuple(f for f in fields.pop("helpers", "").split(",") if f),
        phase=fields.pop("phase", ""),
        extra=fields,
    )


def all_cases() -> list[Case]:
    cases = []
    for sub in ("legit", "attacks"):
        folder = os.path.join(SOLUTIONS, sub)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py") and not name.startswith("_"):
                cases.append(parse_header(os.path.join(folder, name)))
    return cases
