"""The skills library: every example kernel is judged by the sandbox (CPU: Triton examples run under the
interpreter and must be `correct`; CUDA examples must build with nvcc and are `not_run`; GPU: all must be
`correct`), BM25 retrieval finds the technique asked for, and the skill tool can be switched off."""

from __future__ import annotations

import pytest

from kernels_env.client import JudgeConfig, SandboxClient, SandboxConfig
from research.agent import SkillLibrary
from research.agent.skills import load_examples, load_guide

EXAMPLES = load_examples()
# CUDA Agent's tolerance (atol = rtol = 1e-2): the WMMA example computes in TF32.
JUDGE = JudgeConfig(time_candidate=False, num_trials=2, families=[], atol=1e-2, rtol=1e-2)


def _judge(client, skills):
    futures = [client.submit(s.path / "problem.py", s.path, JUDGE) for s in skills]
    return {s.name: f.result() for s, f in zip(skills, futures)}


def test_the_library_covers_the_techniques_of_the_paper():
    names = {s.name for s in EXAMPLES}
    assert len(EXAMPLES) >= 10 and {s.language for s in EXAMPLES} == {"cuda", "triton"}
    for technique in ("coalesc", "tiled", "float4", "shuffle", "online_softmax", "fused", "wmma", "graph"):
        assert any(technique in n for n in names), technique
    assert len(load_guide()) >= 5


@pytest.mark.parametrize(
    "query, expected",
    [
        ("online softmax numerically stable", "online_softmax"),
        ("warp shuffle reduction", "cuda_warp_shuffle_rowsum"),
        ("tensor cores wmma tf32", "cuda_wmma_tf32_matmul"),
        ("vectorized float4 loads", "cuda_float4_axpy"),
        ("launch-bound many small kernels cuda graphs", "cuda_graph_chain"),
        ("shared memory tiling matmul", "cuda_smem_tiled_matmul"),
    ],
)
def test_bm25_retrieval(query, expected):
    hits = SkillLibrary().search(query, k=3)
    assert expected in hits[0][0].name, [h[0].name for h in hits]
    assert all(a[1] >= b[1] > 0 for a, b in zip(hits, hits[1:]))


def test_no_match_and_rendering():
    lib = SkillLibrary()
    assert lib.search("qwzx") == []
    text = lib.render(lib.search("fusion epilogue", k=2))
    assert "```python" in text and "class ModelNew" in text


def test_triton_examples_are_correct_on_cpu(sandbox):
    triton = [s for s in EXAMPLES if s.language == "triton"]
    verdicts = _judge(sandbox, triton)
    assert {n: v["status"] for n, v in verdicts.items()} == {s.name: "correct" for s in triton}, verdicts


def test_cuda_examples_build_on_cpu(sandbox):
    cuda = [s for s in EXAMPLES if s.language == "cuda"]
    verdicts = _judge(sandbox, cuda)
    bad = {n: (v["status"], v["error"]) for n, v in verdicts.items() if v["status"] != "not_run"}
    assert not bad  # compiled by nvcc (a compile error would say compile_error), not run without a GPU


@pytest.mark.gpu
def test_every_example_is_correct_on_the_gpu(tmp_path):
    with SandboxClient(SandboxConfig(device="cuda", cache_dir=str(tmp_path))) as sb:
        verdicts = _judge(sb, EXAMPLES)
    bad = {n: (v["status"], v["error"]) for n, v in verdicts.items() if v["status"] != "correct"}
    assert not bad
