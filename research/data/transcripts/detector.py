"""Which optimisations a solution uses that the cold-start corpus never shows (to measure how often RL
discovers them). The corpus writes one kernel per op launched in sequence, flat/row kernels with
``BLOCK=1024`` over 1-D tiles, ``tl.dot`` GEMMs with fixed 32x32x32 tiles, no ``@triton.autotune``, no
``num_warps``/``num_stages``, no vector loads. Detection is static (the source text), so it names what the
code does, not whether it made anything faster."""

from __future__ import annotations

import ast
import re

from ._kernels import BLOCK, GEMM_TILE

FUSION, WIDER_TILES, TILES_2D = "fusion", "wider_tiles", "2d_tiles"
AUTOTUNE, NUM_WARPS, VECTORISED = "autotune", "num_warps", "vectorised_loads"
OPTIMISATIONS = (FUSION, WIDER_TILES, TILES_2D, AUTOTUNE, NUM_WARPS, VECTORISED)
_TILE_KWARGS = {"BLOCK_M", "BLOCK_N", "BLOCK_K"}
# CUDA's vector types and PTX vector loads; Triton's explicit hints of vector access
_VECTOR = re.compile(
    r"\b(float[248]|half2|__half2|int4|uint4|__nv_bfloat162)\b|ld\.global\.v[24]|"
    r"tl\.multiple_of|tl\.max_contiguous"
)


def _jit_kernels(tree: ast.AST) -> dict[str, ast.FunctionDef]:
    out = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef):
            names = {ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in n.decorator_list}
            if names & {"triton.jit", "jit", "triton.autotune"}:
                out[n.name] = n
    return out


def _launches(tree: ast.AST, kernels: set[str]) -> list[ast.Call]:
    """``kernel[grid](...)`` calls inside ModelNew."""
    model = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), tree)
    return [
        n
        for n in ast.walk(model)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Subscript)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id in kernels
    ]


def _int(node: ast.AST) -> int | None:
    try:
        v = ast.literal_eval(node)
    except ValueError:
        return None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def uses_unseen_optimisation(source: str, num_ops: int | None = None) -> set[str]:
    """The optimisations of ``source`` absent from the corpus (a subset of ``OPTIMISATIONS``).

    ``num_ops``: ops in the task's chain; fewer kernel launches than that is fusion. Without it, only a
    kernel that both multiplies with ``tl.dot`` and reduces (``tl.sum/max/min``) counts as fusion: which
    elementwise ops share one kernel cannot be told from the text alone."""
    found: set[str] = set()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return found
    kernels = _jit_kernels(tree)
    if "triton.autotune" in source or "triton.Config" in source:
        found.add(AUTOTUNE)
    if re.search(r"\bnum_warps\s*=|\bnum_stages\s*=", source):
        found.add(NUM_WARPS)
    if _VECTOR.search(source):
        found.add(VECTORISED)
    launches = _launches(tree, set(kernels))
    for call in launches:
        for kw in call.keywords:
            v = _int(kw.value)
            fixed = GEMM_TILE if kw.arg in _TILE_KWARGS else BLOCK
            if kw.arg and kw.arg.startswith("BLOCK") and v is not None and v != fixed:
                found.add(WIDER_TILES)
    for fn in kernels.values():
        body = ast.unparse(fn)
        # a 2-D tile outside a tl.dot GEMM: a block of rows at once (tl.arange broadcast with [:, None])
        if "[:, None]" in body and "tl.dot" not in body:
            found.add(TILES_2D)
        if "tl.dot" in body and re.search(r"tl\.(sum|max|min)\(", body):
            found.add(FUSION)
        # a corpus kernel keeps its fixed sizes as launch arguments; a constexpr default in the kernel counts
        for arg, default in zip(fn.args.args[::-1], fn.args.defaults[::-1]):
            v = _int(default)
            if v is not None and arg.arg.startswith("BLOCK") and v not in (BLOCK, GEMM_TILE):
                found.add(WIDER_TILES)
    if num_ops is not None and kernels and len(launches) < num_ops:
        found.add(FUSION)
    return found
