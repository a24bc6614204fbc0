"""The models of one request: the reference and the candidate built with the same weights (the candidate
under ``RequestGuard.loading``), and the two callables every trial uses: the reference's forward in full
FP32 (``Reference``, with a float64 twin for the families' conditioning check) and the candidate's guarded
forward (``guarded``).
"""

from __future__ import annotations

from typing import Any

import torch

from ...rules.policies import PolicyViolation
from ...rules.protocols import JudgeSettings
from ...rules.result import COMPILE_ERROR, RUNTIME_ERROR
from ..check import conditioning
from ..check.inputs import clone, fresh_seed
from ..timing.baselines import set_precision
from .enforce import RequestGuard
from .hygiene import restore_global_state
from .verdict import Verdict, call_candidate, call_problem, rejected


def after_load(guard: RequestGuard, where: str) -> None:
    try:
        guard.after_load(where)
    except PolicyViolation as exc:
        raise rejected(exc, "load") from None


class Reference:
    """The reference's forward, always in full FP32 (no TF32); ``float64``: the same on a float64 copy of
    its model and inputs, for a family's conditioning check (``kernels_env.judge.check.conditioning``)."""

    def __init__(self, model: torch.nn.Module):
        self.model = model
        # The judge's own reference calls leave its buffers as they were: a train-mode BatchNorm would
        # otherwise carry the nan_inf family's NaN running stats (or any family's drift) into later calls.
        self._buffers = [(name, b.detach().clone()) for name, b in model.named_buffers()]

    def __call__(self, inputs: list[Any]) -> Any:
        restore_global_state()
        set_precision(False)
        try:
            with torch.no_grad():
                return self.model(*inputs)
        finally:
            self._restore_buffers()

    def _restore_buffers(self) -> None:
        now = dict(self.model.named_buffers())
        with torch.no_grad():
            for name, saved in self._buffers:
                buf = now.get(name)
                if buf is not None and buf.shape == saved.shape and buf.dtype == saved.dtype:
                    buf.copy_(saved)

    def float64(self, inputs: list[Any]) -> Any:
        restore_global_state()
        set_precision(False)
        with torch.no_grad():
            model = conditioning.float64_model(self.model)
            try:
                return model(*conditioning.promote(inputs))
            finally:
                del model


def reference(model: torch.nn.Module) -> Reference:
    return Reference(model)


def guarded(guard: RequestGuard, model: torch.nn.Module, s: JudgeSettings, device: torch.device):
    """A correctness call of ModelNew: under the guard, with the policy's precision (TF32 where allowed)."""

    def run(inputs) -> Any:
        set_precision(bool(s.allow_tf32))
        try:
            out = guard.call(model, inputs)
            if device.type == "cuda":  # surface asynchronous kernel errors here, attributed to the candidate
                torch.cuda.synchronize(device)
            return out
        finally:
            set_precision(False)

    return run


def build_models(problem, loaded, model_new, init_inputs, s, device, guard: RequestGuard, weight_seed=None):
    """Reference and candidate models with the same weights; candidate code runs under ``guard.loading``."""
    weight_seed = fresh_seed() if weight_seed is None else weight_seed
    torch.manual_seed(weight_seed)
    ref = call_problem("Model(*get_init_inputs())", problem.Model, *clone(init_inputs))
    ref = call_problem("Model.to(device)", ref.to, device)
    failure: Verdict | None = None
    with guard.loading():
        try:
            new, sync = _build_candidate(ref, loaded, model_new, init_inputs, s, device, weight_seed)
        except Verdict as v:
            failure = v
    torch.manual_seed(fresh_seed())
    after_load(guard, "while ModelNew was built")
    restore_global_state()
    if failure is not None:
        raise failure
    train = s.mode == "train"
    ref.train(train)
    new.train(train)
    guard.watch_reference(ref, problem.Model)
    return ref, new, {"method": sync, "seed": weight_seed}


def _build_candidate(ref, loaded, model_new, init_inputs, s, device, weight_seed: int):
    torch.manual_seed(weight_seed)  # seed replay: same parameters in the same order => same weights
    new = call_candidate(model_new, *clone(init_inputs), loaded=loaded, stage="load", device=device)
    if not isinstance(new, torch.nn.Module):
        raise Verdict(
            COMPILE_ERROR, "load", f"ModelNew(...) returned a {type(new).__name__}, not an nn.Module"
        )
    sync = "seed"
    if s.weight_sync in ("state_dict", "auto"):
        ref_sd, new_sd = ref.state_dict(), new.state_dict()
        same = set(ref_sd) == set(new_sd) and all(ref_sd[k].shape == new_sd[k].shape for k in ref_sd)
        if same:
            call_candidate(new.load_state_dict, ref_sd, loaded=loaded, stage="load", device=device)
            sync = "state_dict" if ref_sd else "none"
        elif s.weight_sync == "state_dict":
            missing, extra = sorted(set(ref_sd) - set(new_sd)), sorted(set(new_sd) - set(ref_sd))
            raise Verdict(
                RUNTIME_ERROR,
                "load",
                f"state_dict sync: ModelNew lacks {missing[:5]}, has extra "
                f"{extra[:5]} (or shapes differ); use weight_sync=seed or auto",
            )
    new = call_candidate(new.to, device, loaded=loaded, stage="load", device=device)
    return new, sync
