"""The cold-start corpus' pure parts: templates (deterministic, parse, one kernel per op, fixed launch
config), the bug injector (each kind edits what it says), episode plans (seeded), the optimisation detector
on hand-written sources. The sandbox-judged corpus is tests/agent/test_corpus.py."""

from __future__ import annotations

import ast
import re

import pytest

from research.data.records import TaskRecord
from research.data.render import render
from research.data.transcripts import (
    BUG_KINDS,
    COVERED,
    CorpusConfig,
    CorpusPolicy,
    Uncovered,
    inject,
    plan_episode,
    uses_unseen_optimisation,
    write_solution,
)

from .conftest import program_with


def _solution(op: str, seed: int = 0):
    for s in range(seed, seed + 12):
        prog = program_with(op, s)
        if prog is not None:
            return prog, write_solution(render(prog), prog.ops)
    pytest.skip(f"no program for {op}")


@pytest.mark.parametrize("op", sorted(COVERED))
def test_every_template_parses_is_deterministic_and_unfused(op):
    prog, sol = _solution(op)
    again = write_solution(render(prog), prog.ops)
    assert sol.source == again.source
    tree = ast.parse(sol.source)
    kernels = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.decorator_list]
    assert len(kernels) == sol.kernels == len(prog.ops)  # one kernel per op (a sigmoid may come first)
    assert "class ModelNew" in sol.source and "autotune" not in sol.source and "num_warps" not in sol.source
    assert set(re.findall(r"BLOCK=(\d+)", sol.source)) <= {"1024"}
    assert uses_unseen_optimisation(sol.source, num_ops=len(prog.ops)) == set()


def test_uncovered_ops_and_forwards_are_refused_with_a_reason():
    prog = program_with("conv2d", 0)
    with pytest.raises(Uncovered, match="^op: no template for conv2d"):
        write_solution(render(prog), prog.ops)
    with pytest.raises(Uncovered, match="^multiline"):
        write_solution(render(program_with("relu", 0)), ["relu", "relu"])


def test_template_reads_op_parameters_from_the_reference():
    src = render(program_with("hardtanh", 1))
    m = float(re.search(r"max_val=([0-9.]+)", src).group(1))
    sol = write_solution(src, ["hardtanh"]).source
    assert f"tl.minimum(tl.maximum(x, {-m!r}), {m!r})" in sol


def test_bug_injector_edits_what_it_says():
    prog, sol = _solution("softmax")
    clean = sol.source
    for kind in BUG_KINDS:
        bug = inject(clean, kind, out_rank=len(prog.out.shape), dtype="float32")
        assert bug.kind == kind and bug.source != clean
        if kind == "missing_mask":  # the first kernel loses every mask, the others keep theirs
            first, rest = bug.source.split("@triton.jit", 2)[1], clean.split("@triton.jit", 2)[1]
            assert "mask=mask" not in first and "mask=mask" in rest
        elif kind == "wrong_shape":
            assert bug.source.rstrip().endswith("return x.reshape(-1)")
        elif kind == "wrong_dtype":
            assert bug.source.count("dtype=torch.float64)") == 1
        elif kind == "undefined_name":
            assert "offsets" in bug.source and "offsets =" not in bug.source
        ast.parse(clean)
        if kind == "syntax_error":
            with pytest.raises(SyntaxError):
                ast.parse(bug.source)
        else:
            ast.parse(bug.source)
    with pytest.raises(ValueError, match="already flat"):
        inject(clean, "wrong_shape", out_rank=1, dtype="float32")
    gemm_only = write_solution(render(program_with("matmul", 0)), ["matmul"]).source
    with pytest.raises(ValueError, match="undefined_name: nothing to edit"):
        inject(gemm_only, "undefined_name", out_rank=2, dtype="float32")


def _record(op: str) -> TaskRecord:
    prog = program_with(op, 0)
    return TaskRecord(
        id=f"t-{op}", source=render(prog), ops=prog.ops, output_shape=[4, 8], meta={"dtype": "float32"}
    )


def test_plans_are_seeded_and_follow_the_bug_rates():
    rec = _record("gelu")
    cfg = CorpusConfig(seed=3)
    assert plan_episode(rec, cfg) == plan_episode(rec, CorpusConfig(seed=3))
    assert plan_episode(rec, CorpusConfig(bug_rates={"clean": 1.0}))["bug"] == "clean"
    plan = plan_episode(rec, CorpusConfig(bug_rates={"syntax_error": 1.0}))
    names = [s["name"] for s in plan["steps"]]
    assert plan["bug"] == "syntax_error" and names == [
        "write_file",
        "verify",
        "write_file",
        "verify",
        "benchmark",
        "submit",
    ]
    # a kind that cannot apply (a 1-D output cannot be flattened) falls back to another drawn kind
    rec.output_shape = [4]
    assert plan_episode(rec, CorpusConfig(bug_rates={"wrong_shape": 1.0}))["bug"] == "clean"
    kinds = {
        plan_episode(TaskRecord(id=f"t{i}", source=rec.source, ops=rec.ops, output_shape=[4, 8]), cfg)["bug"]
        for i in range(40)
    }
    assert kinds == {"clean", *BUG_KINDS}
    with pytest.raises(ValueError, match="bug_rates"):
        CorpusConfig(bug_rates={"typo": 1.0})
    # the prompt offers skills exactly when the config says so (the RL policy's prompt must match)
    assert CorpusPolicy(CorpusConfig(skills=False)).uses_skills is False
    assert CorpusPolicy(CorpusConfig()).uses_skills is True


def test_a_corpus_directory_holds_one_config_and_task_set(tmp_path):
    from research.data.transcripts import generate_corpus

    rec = _record("gelu")
    conv = TaskRecord(id="c", source=render(program_with("conv2d", 0)), ops=["conv2d"])
    with pytest.raises(ValueError, match="no task is covered"):
        generate_corpus([conv], CorpusConfig(), tmp_path, client=None)
    (tmp_path / "config.json").write_text('{"config": {"seed": 7}, "tasks": ["t-gelu"]}')
    with pytest.raises(ValueError, match="another config or task set"):
        generate_corpus([rec], CorpusConfig(), tmp_path, client=None)


UNFUSED = """
import torch, triton, triton.language as tl
@triton.jit
def k_relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)
@triton.jit
def k_scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)
class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        k_relu[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        z = torch.empty_like(x)
        k_scale[(triton.cdiv(x.numel(), 1024),)](y, z, x.numel(), BLOCK=1024)
        return z
"""
FUSED = """
import torch, triton, triton.language as tl
@triton.jit
def k_relu_scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0) * 2.0, mask=mask)
class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        k_relu_scale[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096, num_warps=8)
        return y
"""
AUTOTUNED = """
import triton, triton.language as tl
@triton.autotune(configs=[triton.Config({"BLOCK": 512}), triton.Config({"BLOCK": 2048})], key=["n"])
@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.multiple_of(tl.program_id(0) * BLOCK, BLOCK) + tl.arange(0, BLOCK)
"""
ROWS_2D = """
import triton, triton.language as tl
@triton.jit
def k_rows(x_ptr, out_ptr, R, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + rows[:, None] * R + cols[None, :])
    tl.store(out_ptr + rows, tl.sum(x, axis=1))
@triton.jit
def k_mm_sum(a_ptr, b_ptr, c_ptr, BLOCK_M: tl.constexpr = 64):
    acc = tl.dot(tl.load(a_ptr), tl.load(b_ptr))
    tl.store(c_ptr, tl.sum(acc, axis=1))
"""


def test_detector_on_hand_written_sources():
    assert uses_unseen_optimisation(UNFUSED, num_ops=2) == set()
    assert uses_unseen_optimisation(FUSED, num_ops=2) == {"fusion", "wider_tiles", "num_warps"}
    assert uses_unseen_optimisation(FUSED) == {"wider_tiles", "num_warps"}  # no op count: no launch rule
    assert uses_unseen_optimisation(AUTOTUNED) == {"autotune", "vectorised_loads"}
    assert uses_unseen_optimisation(ROWS_2D) == {"2d_tiles", "fusion", "wider_tiles"}
    cuda = (
        'src = """__global__ void k(const float4* x) { float4 v = x[0]; }"""\nload_inline(cuda_sources=src)'
    )
    assert uses_unseen_optimisation(cuda) == {"vectorised_loads"}
    assert uses_unseen_optimisation("def broken(:") == set()


def _run_both(op: str, seed: int, monkeypatch, dtype: str = "float32"):
    """The reference and the template's ModelNew at proxy size, same weights (seed replay + state dict),
    the kernels run by Triton's CPU interpreter in-process."""
    import torch

    from research.data.checks import apply_overrides

    monkeypatch.setenv("TRITON_INTERPRET", "1")  # read when @triton.jit decorates
    prog = program_with(op, seed, dtype)
    assert prog is not None, f"no program for {op} at seed {seed}"
    # proxy sizes capped further (batch 2, sizes <= 12): the interpreter runs one Python pass per program
    sizes = {c.name: c.proxy for c in prog.ctx.consts.values() if c.kind != "hyper"}
    small = {k: 2 if prog.ctx.consts[k].kind == "batch" else min(v, 12) for k, v in sizes.items()}
    src = apply_overrides(render(prog), small)
    ref, new = {}, {}
    exec(compile(src, "<reference>", "exec"), ref)
    exec(compile(write_solution(render(prog), prog.ops).source, "<model_new>", "exec"), new)
    torch.manual_seed(0)
    inputs, init = ref["get_inputs"](), ref["get_init_inputs"]()
    torch.manual_seed(1)
    model = ref["Model"](*init)
    torch.manual_seed(1)
    candidate = new["ModelNew"](*init)
    candidate.load_state_dict(model.state_dict())
    with torch.no_grad():
        return model(*inputs), candidate(*inputs), prog.ops


FAMILIES = [  # (op, seed): every kernel kind and axis case of the templates, small enough for the interpreter
    ("add_input", 0), ("lerp_input", 1), ("add_bias", 0), ("gate", 3), ("prelu", 0), ("prelu", 1),
    ("sum", 0), ("mean", 2), ("var", 0), ("std", 1), ("amax", 0), ("max_values", 1), ("l2_norm", 0),
    ("logsumexp", 0), ("softmax", 0), ("log_softmax", 1), ("softmin", 2), ("softmax_temperature", 0),
    ("layer_norm", 0), ("layer_norm", 3), ("layer_norm_noaffine", 0), ("rms_norm", 0), ("l2_normalize", 0),
    ("l2_normalize", 2), ("linear", 0), ("linear_nobias", 1), ("matmul", 0), ("matmul_t", 0), ("addmm", 0),
    ("einsum", 0), ("bmm", 0), ("gram", 0),
]  # fmt: skip


@pytest.mark.parametrize(("op", "seed"), FAMILIES)
def test_templates_match_the_pytorch_reference(op, seed, monkeypatch):
    import torch

    want, got, ops = _run_both(op, seed, monkeypatch)
    assert got.shape == want.shape and got.dtype == want.dtype, ops
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, msg=lambda m: f"{ops}: {m}")


def test_every_elementwise_template_matches_the_pytorch_reference(monkeypatch):
    import torch

    from research.data.transcripts import _kernels

    for op in sorted(_kernels.UNARY):
        want, got, ops = _run_both(op, 0, monkeypatch)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, msg=lambda m, ops=ops: f"{ops}: {m}")


@pytest.mark.parametrize(
    ("op", "dtype"), [("softmax", "bfloat16"), ("linear", "float16"), ("gelu", "bfloat16")]
)
def test_half_precision_templates_compute_in_float32_and_store_the_task_dtype(op, dtype, monkeypatch):
    import torch

    want, got, ops = _run_both(op, 0, monkeypatch, dtype)
    assert got.dtype == want.dtype == getattr(torch, dtype)
    # the reference rounds in half precision too: compare at the half types' resolution
    torch.testing.assert_close(got.float(), want.float(), atol=2e-2, rtol=2e-2, msg=lambda m: f"{ops}: {m}")


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("op", "seed"), FAMILIES + [(op, 0) for op in ("gelu", "mish", "selu", "erf", "log1p")]
)
def test_templates_match_the_reference_at_real_size_on_the_gpu(op, seed):
    """Compiled Triton (not the interpreter) at the task's real sizes, batch 2: int64 offsets, tl.dot's
    IEEE fp32 path and the GPU's transcendental functions against PyTorch's CUDA kernels."""
    import torch

    from research.data.checks import apply_overrides

    prog = program_with(op, seed)
    batch = {c.name: 2 for c in prog.ctx.consts.values() if c.kind == "batch"}
    src = apply_overrides(render(prog), batch)
    ref, new = {}, {}
    exec(compile(src, "<reference>", "exec"), ref)
    exec(compile(write_solution(render(prog), prog.ops).source, "<model_new>", "exec"), new)
    torch.manual_seed(0)
    inputs = [t.cuda() for t in ref["get_inputs"]()]
    init = ref["get_init_inputs"]()
    torch.manual_seed(1)
    model = ref["Model"](*init).cuda()
    candidate = new["ModelNew"](*init).cuda()
    candidate.load_state_dict(model.state_dict())
    torch.backends.cuda.matmul.allow_tf32 = False  # the reference in full fp32, as the judge runs it
    with torch.no_grad():
        want, got = model(*inputs), candidate(*inputs)
    torch.cuda.synchronize()
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-3, msg=lambda m: f"{prog.ops}: {m}")
