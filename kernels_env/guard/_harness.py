"""A small standalone judge that runs one solution under every defence: the reference flow for the sandbox.

``evaluate_solution(problem, solution, policy)`` runs the candidate in a fresh child process (fork on a CPU,
spawn once CUDA is in play) and returns a ``HarnessVerdict``: status, the first failed check and its
evidence, all violations, the per-family adversarial results and the kernel census. The steps, in order, are
exactly what the sandbox judge must do (docs/reward_hacks.md, "Integration contract"):

 1. capture ``Integrity``, ``TorchGlobalState`` and a ``ThreadSnapshot`` before any candidate code runs;
 2. build the reference from a fresh problem module; load + construct the candidate under ``load_guard``;
    re-verify integrity/global state (a candidate may patch timers or flip TF32 at import);
 3. warm-up, then a repeat check (same inputs 3x: ``nondeterministic``);
 4. trials on fresh inputs, alternating candidate-first and reference-first order (the reference output is
    freed before the candidate runs, into poisoned memory); each candidate call is guarded; after each call:
    judge integrity, reference weights, output contract, poisoned output, constant output, values;
 5. timed calls stand-in: fresh inputs per call, no interception; one call under ``TimingAudit``; then
    threads/global state/integrity and an *unguarded* correctness re-check on fresh inputs;
 6. adversarial input families (+ ``init_args``), each reported separately.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import secrets
import sys
import time
import traceback
import types
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from .. import adversarial
from . import _checks
from ._checks import GuardViolation, Violation
from ._guard import TimingAudit, load_guard, policy_guard, warm_up_profiler
from ._outputs import (
    check_outputs,
    constant_output_violation,
    determinism_violations,
    poisoned_output_violations,
)
from ._policy import get_rules
from ._state import Integrity, TorchGlobalState
from ._threads import ThreadSnapshot, thread_violations

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_INCORRECT = {_checks.MISMATCH, _checks.RECHECK_MISMATCH, _checks.NONDETERMINISTIC}


@dataclass
class HarnessVerdict:
    status: str  # accepted | rejected | incorrect | error | timeout
    check: str | None = None
    message: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    violations: list[dict[str, Any]] = field(default_factory=list)
    families: list[dict[str, Any]] = field(default_factory=list)
    census: dict[str, Any] | None = None
    log: list[str] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return self.status == "accepted"

    def family(self, name: str) -> dict[str, Any] | None:
        return next((f for f in self.families if f["family"] == name), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Stop(Exception):
    def __init__(self, status: str, violations: Sequence[Violation]):
        super().__init__(str(violations[0]) if violations else status)
        self.status = status
        self.violations = list(violations)


def _clone(values):
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def _detach_tree(out):
    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, (tuple, list)):
        return type(out)(_detach_tree(o) for o in out)
    return out


def _default_tolerance(rules_name: str, out: Any) -> float:
    leaves = adversarial._flat_outputs(out)
    half = any(isinstance(t, torch.Tensor) and t.dtype in (torch.float16, torch.bfloat16) for t in leaves)
    return 1e-2 if half or rules_name == "cuda_agent" else 1e-4


class _Judge:
    def __init__(
        self,
        problem: str,
        solution: str,
        policy: str,
        *,
        device: str = "cpu",
        trials: int = 3,
        seed: int = 1234,
        families: Sequence[str] = adversarial.DEFAULT_FAMILIES,
        atol: float | None = None,
        rtol: float | None = None,
        timed_calls: int = 3,
        poison: bool = True,
        init_args_family: bool = True,
    ):
        self.problem = os.path.abspath(problem)
        self.solution = os.path.abspath(solution)
        self.rules = get_rules(policy)
        self.device = torch.device(device)
        self.trials, self.seed, self.families = trials, seed, tuple(families)
        self.atol, self.rtol = atol, rtol
        self.timed_calls = timed_calls
        self.poison = poison
        self.init_args_family = init_args_family
        self.log: list[str] = []
        self.census = None
        self.family_results: list[dict] = []

    # -- building
    def _build(self, cls, init_args):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(42)  # KernelBench: seed replay before each model (same params, same order)
            model = cls(*init_args)
        return model.to(self.device)

    def _load_candidate(self) -> types.ModuleType:
        with open(self.solution) as f:
            source = f.read()
        module = types.ModuleType(f"candidate_{secrets.token_hex(4)}")
        module.__file__ = self.solution
        sys.modules[module.__name__] = module  # Triton and pickling look modules up by name
        exec(compile(source, self.solution, "exec"), module.__dict__)  # noqa: S102 - isolated child process
        if "ModelNew" not in module.__dict__:
            raise _Stop("error", [Violation("load_error", "solution defines no ModelNew")])
        return module

    # -- checks
    def _verify_judge(self, where: str) -> None:
        found = self.integrity.violations(where) + self.state0.violations(where=where)
        if found:
            self.integrity.restore()
            self.state0.restore()
            raise _Stop("rejected", found)
        for (name, before), p in zip(self.ref_params, self._ref_tensors()):
            if not torch.equal(before, p.detach()):
                raise _Stop(
                    "rejected",
                    [
                        Violation(
                            _checks.REFERENCE_TAMPERED,
                            f"reference tensor {name} changed {where}",
                            {"tensor": name},
                        )
                    ],
                )

    def _ref_tensors(self):
        return [t for _, t in list(self.ref_model.named_parameters()) + list(self.ref_model.named_buffers())]

    def _guarded(self, *inputs, warmup: bool = False):
        with (
            torch.no_grad(),
            policy_guard(
                self.rules,
                inputs=inputs,
                reference=[self.ref_model, self.problem_mod.Model],
                reference_paths=[self.problem],
                candidate_paths=[self.solution],
                protected_paths=[_PKG_DIR],
                thread_baseline=self.threads0,
                integrity=self.integrity,
                device=self.device,
                poison=self.poison,
                os_threads=not warmup,
            ) as g,
        ):
            out = g(self.model_new, *inputs)
        self.census = g.census.to_dict() if g.census is not None else self.census
        self._verify_judge("during forward")
        return out

    def _reference(self, *inputs):
        with torch.no_grad():
            return self.ref_model(*inputs)

    def _contract(self, out, ref, inputs, *, guarded=True) -> None:
        """Output contract on the raw output (before any copy hides its layout or storage)."""
        found = check_outputs(out, ref, inputs)
        if guarded and not found:
            found = poisoned_output_violations(out)
        if not found:
            v = constant_output_violation(out, ref, self.atol, self.rtol)
            found = [v] if v is not None else []
        if found:
            raise _Stop("rejected", found)

    def _judge_output(self, out, ref, inputs, *, check=_checks.MISMATCH, guarded=True) -> None:
        self._contract(out, ref, inputs, guarded=guarded)
        cmp = adversarial.compare(ref, out, self.atol, self.rtol)
        if not cmp.ok:
            raise _Stop("incorrect", [Violation(check, cmp.reason, cmp.to_dict())])

    # -- the flow
    def run(self) -> HarnessVerdict:
        try:
            self._run()
        except _Stop as stop:
            return self._verdict(stop.status, stop.violations)
        except GuardViolation as gv:
            return self._verdict("rejected", gv.violations)
        except Exception as exc:  # noqa: BLE001 - the candidate's own runtime error
            tb = "".join(traceback.format_exception(exc)[-6:])
            return self._verdict(
                "error",
                [Violation("runtime_error", f"{type(exc).__name__}: {exc}"[:500], {"traceback": tb[-2000:]})],
            )
        return self._verdict("accepted", [])

    def _verdict(self, status: str, violations: Sequence[Violation]) -> HarnessVerdict:
        first = violations[0] if violations else None
        return HarnessVerdict(
            status,
            first.check if first else None,
            first.message if first else "",
            first.evidence if first else {},
            [v.to_dict() for v in violations],
            self.family_results,
            self.census,
            self.log,
        )

    def _run(self) -> None:
        if self.device.type == "cpu":
            # Before anything imports triton (torch._dynamo does): triton.language's own jit functions must
            # be built as interpreted functions.
            os.environ.setdefault("TRITON_INTERPRET", "1")
        if self.device.type == "cuda":
            torch.cuda.init()
        warm_up_profiler(self.device.type == "cuda")
        self.integrity = Integrity.capture()
        self.state0 = TorchGlobalState.capture()
        self.threads0 = ThreadSnapshot.capture()
        self.problem_mod = adversarial.load_problem(self.problem)
        init_args = list(self.problem_mod.get_init_inputs())
        self.ref_model = self._build(self.problem_mod.Model, init_args)
        self.ref_params = [
            (n, t.detach().clone())
            for n, t in list(self.ref_model.named_parameters()) + list(self.ref_model.named_buffers())
        ]
        with load_guard(
            candidate_paths=[self.solution], reference_paths=[self.problem], protected_paths=[_PKG_DIR]
        ) as found:
            try:
                cand_mod = self._load_candidate()
                self.model_new = self._build(cand_mod.ModelNew, init_args)
            except GuardViolation:
                pass  # recorded in `found`
        if found:
            raise _Stop("rejected", found)
        self._verify_judge("while the candidate was loaded")
        self.log.append("loaded")

        inputs = adversarial.make_inputs(self.problem, self.seed, device=self.device, module=self.problem_mod)
        ref = self._reference(*_clone(inputs))
        self.atol = self.atol if self.atol is not None else _default_tolerance(self.rules.name, ref)
        self.rtol = self.rtol if self.rtol is not None else self.atol
        # Warm-up (guarded too: every call counts), then two repeats: three answers to the same question.
        outs = []
        for k in range(3):
            call_inputs = _clone(inputs)
            out = self._guarded(*call_inputs, warmup=k == 0)
            self._contract(out, ref, call_inputs)
            outs.append(_detach_tree(out))
        for other in outs[1:]:
            found = determinism_violations(outs[0], other, self.atol, self.rtol)
            if found:
                raise _Stop("incorrect", found)
        self._judge_output(outs[0], ref, inputs)
        self.log.append("repeat check passed")

        for t in range(self.trials):
            inputs = adversarial.make_inputs(
                self.problem, self.seed + 1 + t, device=self.device, module=self.problem_mod
            )
            call_inputs = _clone(inputs)
            if t % 2 == 0:  # candidate first: its output cannot depend on the reference's
                out = self._guarded(*call_inputs)
                ref = self._reference(*_clone(inputs))
            else:  # reference first, its output freed into poisoned memory before the candidate runs
                ref_out = self._reference(*_clone(inputs))
                ref = _detach_tree(ref_out)
                del ref_out
                out = self._guarded(*call_inputs)
            self._judge_output(out, ref, call_inputs)
        self.log.append(f"{self.trials} trials passed")

        for k in range(self.timed_calls):  # stand-in for the timing loop: fresh inputs, no interception
            inputs = adversarial.make_inputs(
                self.problem, self.seed + 100 + k, device=self.device, module=self.problem_mod
            )
            if k == 0:
                with torch.no_grad(), TimingAudit(self.rules, self.device) as audit:
                    self.model_new(*inputs)
                if audit.violations:
                    raise _Stop("rejected", audit.violations)
            else:
                with torch.no_grad():
                    self.model_new(*inputs)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        found = thread_violations(self.threads0, self._classifier())
        if found:
            raise _Stop("rejected", found)
        self._verify_judge("during the timed calls")
        inputs = adversarial.make_inputs(
            self.problem, self.seed + 999, device=self.device, module=self.problem_mod
        )
        call_inputs = _clone(inputs)
        with torch.no_grad():
            out = self.model_new(*call_inputs)
        self._judge_output(
            out, self._reference(*_clone(inputs)), call_inputs, check=_checks.RECHECK_MISMATCH, guarded=False
        )
        self._verify_judge("during the re-check")
        self.log.append("timing stand-in and re-check passed")

        for fam in self.families:
            res = adversarial.run_family(
                fam,
                self._reference,
                self._guarded,
                self.problem,
                self.seed + 500,
                self.atol,
                self.rtol,
                device=self.device,
                module=self.problem_mod,
            )
            self.family_results.append(res.to_dict())
        if self.init_args_family:
            self.family_results.append(self._init_args_family(init_args))

    def _classifier(self):
        from ._frames import FrameClassifier

        return FrameClassifier([self.solution], [self.problem])

    def _init_args_family(self, init_args) -> dict:
        """Hyper-parameters baked in by the candidate (catalogue #11): perturb the float init args."""
        perturbed = [a * 1.5 + 0.25 if isinstance(a, float) else a for a in init_args]
        if perturbed == init_args:
            return adversarial.FamilyResult(
                "init_args", "skipped", "no float constructor arguments"
            ).to_dict()
        try:
            ref_model = self._build(self.problem_mod.Model, perturbed)
            cand_model = self._build(self.model_new.__class__, perturbed)
        except Exception as exc:  # noqa: BLE001
            return adversarial.FamilyResult(
                "init_args", "skipped", f"models do not build: {exc}"[:300]
            ).to_dict()
        saved = self.ref_model, self.model_new, self.ref_params
        self.ref_model, self.model_new = ref_model, cand_model
        self.ref_params = [
            (n, t.detach().clone())
            for n, t in list(ref_model.named_parameters()) + list(ref_model.named_buffers())
        ]
        try:
            res = adversarial.run_family(
                "default",
                self._reference,
                self._guarded,
                self.problem,
                self.seed + 700,
                self.atol,
                self.rtol,
                device=self.device,
                module=self.problem_mod,
            )
        finally:
            self.ref_model, self.model_new, self.ref_params = saved
        res.family = "init_args"
        return res.to_dict()


def _triton_fork_safe() -> bool:
    """A forked CPU child inherits this process's triton: fine if triton is not loaded yet or was loaded in
    interpreter mode (TRITON_INTERPRET=1 before import); otherwise the child must start fresh."""
    if "triton" not in sys.modules:
        return True
    try:
        import triton.language as tl
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        return True
    return isinstance(getattr(tl, "sum", None), InterpretedFunction)


def _start_method(device: str) -> str:
    """fork for CPU jobs (cheap, inherits the warm imports); a fork server with torch preloaded (and CUDA not
    initialised) for GPU jobs; spawn otherwise."""
    forced = os.environ.get("KERNELS_ENV_GUARD_START")  # fork | forkserver | spawn: diagnosis override
    if forced:
        return forced
    linux = sys.platform.startswith("linux")
    if linux and device == "cpu" and not torch.cuda.is_initialized() and _triton_fork_safe():
        return "fork"
    if linux and device != "cpu" and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        return "forkserver"
    return "spawn"


def _child(conn, token: str, args: tuple, kwargs: dict, forked: bool) -> None:
    if forked:
        torch.set_num_threads(1)  # the parent's OpenMP pool does not survive fork
    try:
        verdict = _Judge(*args, **kwargs).run().to_dict()
    except BaseException as exc:  # noqa: BLE001 - report anything, even SystemExit from candidate code
        verdict = HarnessVerdict("error", "harness_error", f"{type(exc).__name__}: {exc}"[:500]).to_dict()
    conn.send({"token": token, "verdict": verdict})
    conn.close()


@dataclass
class _Running:
    proc: Any
    reader: Any
    token: str
    deadline: float


def _launch(problem: str, solution: str, policy: str, timeout_s: float, options: dict) -> _Running:
    method = _start_method(str(options.get("device", "cpu")))
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["torch", "torch._dynamo", "kernels_env.guard"])
    reader, writer = ctx.Pipe(duplex=False)
    token = secrets.token_hex(16)
    proc = ctx.Process(
        target=_child,
        args=(writer, token, (problem, solution, policy), options, method == "fork"),
        daemon=True,
    )
    proc.start()
    writer.close()
    return _Running(proc, reader, token, time.monotonic() + timeout_s)


def _collect(run: _Running, timed_out: bool = False) -> HarnessVerdict:
    try:
        if timed_out:
            return HarnessVerdict("timeout", "timeout", "no verdict before the deadline")
        try:
            msg = run.reader.recv()
        except EOFError:
            run.proc.join(5)
            return HarnessVerdict(
                "error", "harness_error", f"the child exited without a verdict (code {run.proc.exitcode})"
            )
    finally:
        if run.proc.is_alive():
            run.proc.kill()
        run.proc.join(10)
        run.reader.close()
    if not isinstance(msg, dict) or msg.get("token") != run.token:
        return HarnessVerdict(
            "rejected", _checks.JUDGE_TAMPERED, "the result channel carried a forged verdict"
        )
    return HarnessVerdict(**msg["verdict"])


def evaluate_solution(
    problem: str,
    solution: str,
    policy: str = "strict",
    *,
    isolate: bool = True,
    timeout_s: float = 600.0,
    **options: Any,
) -> HarnessVerdict:
    """Judge one solution file against one KernelBench-format problem file (see the module docstring).

    Options: ``device`` ('cpu'|'cuda'), ``trials``, ``seed``, ``families``, ``atol``, ``rtol``,
    ``timed_calls``, ``poison`` (False only to demonstrate an attack), ``init_args_family``."""
    if not isolate:
        return _Judge(problem, solution, policy, **options).run()
    return evaluate_solutions([(problem, solution, policy, options)], max_parallel=1, timeout_s=timeout_s)[0]


def evaluate_solutions(
    jobs: Sequence[tuple[str, str, str, dict]],
    max_parallel: int = 2,
    timeout_s: float = 600.0,
    on_result=None,
) -> list[HarnessVerdict]:
    """Judge many (problem, solution, policy, options) jobs, each in its own child, ``max_parallel`` at once.
    Children are started from the calling thread only (no fork from a multi-threaded parent).
    ``on_result(index, verdict)`` is called as each verdict arrives."""
    from multiprocessing.connection import wait

    results: list[HarnessVerdict | None] = [None] * len(jobs)
    pending = list(enumerate(jobs))
    running: dict[int, _Running] = {}
    while pending or running:
        while pending and len(running) < max(1, max_parallel):
            i, (problem, solution, policy, options) = pending.pop(0)
            running[i] = _launch(problem, solution, policy, timeout_s, dict(options))
        now = time.monotonic()
        ready = wait(
            [r.reader for r in running.values()],
            timeout=max(0.0, min(r.deadline for r in running.values()) - now),
        )
        for i, run in list(running.items()):
            if run.reader in ready:
                results[i] = _collect(run)
            elif time.monotonic() >= run.deadline:
                results[i] = _collect(run, timed_out=True)
            else:
                continue
            del running[i]
            if on_result is not None:
                on_result(i, results[i])
    return [r if r is not None else HarnessVerdict("error", "harness_error") for r in results]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernels_env.guard", description=__doc__.split("\n")[0])
    parser.add_argument("--problem", required=True)
    parser.add_argument("--solution", required=True)
    parser.add_argument("--policy", default="strict")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--families", default=",".join(adversarial.DEFAULT_FAMILIES))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    verdict = evaluate_solution(
        args.problem, args.solution, args.policy, device=args.device, families=families
    )
    if args.json:
        print(json.dumps(verdict.to_dict(), indent=1, default=str))
    else:
        print(f"{verdict.status}: {verdict.check or ''} {verdict.message}")
        for fam in verdict.families:
            print(f"  family {fam['family']:10s} {fam['status']:8s} {fam['reason']}")
    return 0 if verdict.accepted else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
