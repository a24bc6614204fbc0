"""What every number of a table is measured under, read from the verdicts' ``environment`` and ``judge``
fields: GPU, torch version, judge protocol, policy and precision (TF32 and the fp32 tolerance). A table whose
results disagree on one of them says so (``mixed``): GPUs, torch versions and protocols are never mixed."""

from __future__ import annotations

from collections import Counter
from typing import Any

UNKNOWN = "unknown"
LEVEL_NAMES = {
    "heldout": "held-out",
    "heldout_category": "held-out category",
    "overall": "overall",
    "all": "all",
}


def level_label(level: Any) -> str:
    """How a level reads in tables and figures: "L1", "L2", "held-out" (never "Lheldout")."""
    text = str(level)
    return f"L{text}" if text.isdigit() else LEVEL_NAMES.get(text, text.replace("_", " "))


def _gpu(env: dict[str, Any]) -> str:
    if env.get("gpu"):
        return str(env["gpu"])
    if env.get("device") == "cpu" or env.get("cpu"):
        return "none (CPU mode: correctness only)"
    return UNKNOWN


def fp32_tolerance(results: list[dict[str, Any]]) -> float | None:
    """The fp32 atol of the judge (the most common one when results disagree); None when unknown."""
    tols = Counter()
    for r in results:
        t = ((r.get("judge") or {}).get("tolerances") or {}).get("float32")
        if t:
            tols[float(t[0])] += 1
    return tols.most_common(1)[0][0] if tols else None


def _precision(judge: dict[str, Any]) -> str:
    if not judge:
        return UNKNOWN
    tf32 = "tf32 on" if judge.get("allow_tf32") else "fp32 (tf32 off)"
    t = (judge.get("tolerances") or {}).get("float32")
    return f"{tf32}, fp32 atol=rtol={t[0]:g}" if t else tf32


def result_labels(r: dict[str, Any]) -> dict[str, str]:
    env, judge = r.get("environment") or {}, r.get("judge") or {}
    return {
        "gpu": _gpu(env),
        "torch": str(env.get("torch") or UNKNOWN),
        "protocol": str(judge.get("protocol") or UNKNOWN),
        "policy": str(judge.get("policy") or UNKNOWN),
        "precision": _precision(judge),
    }


def labels(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One value per label ("a | b" when results disagree, listed under ``mixed``); results without a
    verdict (no environment, e.g. a broken reference) do not vote."""
    seen: dict[str, Counter] = {}
    for r in results:
        if not (r.get("environment") or r.get("judge")):
            continue
        for k, v in result_labels(r).items():
            seen.setdefault(k, Counter())[v] += 1
    out: dict[str, Any] = {}
    for k in ("gpu", "torch", "protocol", "policy", "precision"):
        values = [v for v, _ in (seen.get(k) or Counter()).most_common()]
        out[k] = " | ".join(values) if values else UNKNOWN
    out["mixed"] = [
        k for k in ("gpu", "torch", "protocol", "policy", "precision") if len(seen.get(k) or ()) > 1
    ]
    return out
