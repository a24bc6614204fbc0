"""Run in a subprocess with TRITON_INTERPRET=1: each (task, plan) rendered source against the task's own
PyTorch reference (the library's source), at the fp32 tolerance of the judge (1e-4); prints one JSON line."""

from __future__ import annotations

import json
import sys
import types

import torch


def _load(src: str, name: str):
    m = types.ModuleType(name)
    exec(compile(src, name, "exec"), m.__dict__)
    return m


def main() -> None:
    cases = json.loads(sys.stdin.read())
    out = []
    for case in cases:
        ref, sol = _load(case["reference"], "ref"), _load(case["solution"], "sol")
        torch.manual_seed(1)
        model = ref.Model(*ref.get_init_inputs())
        torch.manual_seed(1)
        new = sol.ModelNew(*ref.get_init_inputs())
        x = ref.get_inputs()
        with torch.no_grad():
            a, b = model(*x), new(*x)
        same = a.shape == b.shape and bool(torch.allclose(a, b, atol=1e-4, rtol=1e-4))
        out.append({"id": case["id"], "ok": same, "shape": list(b.shape)})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
