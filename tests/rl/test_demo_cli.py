"""The learning demo's command line lives in scripts/ (``python -m scripts.toy_rl_demo``), not in the library:
no user-facing argparse entry point inside research or models; the script fills ``DemoConfig`` and records
its command for the exported policy."""

from __future__ import annotations

import ast
from pathlib import Path

from research.rl.pipeline.demo import ABLATIONS, DemoConfig

ROOT = Path(__file__).resolve().parents[2]


def test_the_script_fills_the_demo_config():
    from scripts.toy_rl_demo import parse

    argv = ["--out", "o", "--ablations", "no_rft,", "--standalone", "--warmup-steps", "3"]
    cfg = parse(argv)
    assert cfg == DemoConfig(
        out="o",
        work="/tmp/gpu_toy_rl",
        ablations=["no_rft"],
        standalone=True,
        warmup_steps=3,
        command="python -m scripts.toy_rl_demo " + " ".join(argv),
    )
    assert parse(["--out", "o"]).ablations == list(ABLATIONS)


def test_no_argparse_entry_point_inside_the_library():
    found = []
    for package in ("research", "models"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, (ast.Import, ast.ImportFrom)) else []
                mod = node.module if isinstance(node, ast.ImportFrom) else None
                if "argparse" in names or mod == "argparse":
                    found.append(str(path.relative_to(ROOT)))
    assert found == [], f"command lines belong in scripts/ or experiments/: {found}"
