"""Stage 1, build: read the reference and the candidate, build their kernels, import them.

Runs in a compile worker (CPU, GPU hidden: every build happens and is cached there) and again, cache-only, in
the run worker. In the order a request meets them:

    sources            references and solutions given as a path, a workspace directory or source text
    loader, errors     import a problem or a solution (``LoadError``: the candidate's; ``ProblemError``: the
                       reference's); ``diagnostics`` turns compiler output and tracebacks into messages
    hooks, cache       load_inline/load wrapped: what was built (``cache.BUILDS``), build-only mode,
                       content-addressed build directories; ``cache`` holds what every build path shares
    pch, fast_build,   the faster build paths of load_inline (shared PCH, output-neutral GCC flags, the CUDA
    lean_headers       source without torch/extension.h where it needs nothing more; ``full_header_names``)
    agent_extension    CUDA Agent's workspace layout, built as its compile script would
    backends,          which backends a solution uses and whether it needs CUDA; KernelBench's other
    toolchains         toolchains (CuTe DSL, TileLang, ThunderKittens) and whether they are installed here
    compile_stage      the compile worker's side: a forked child per request imports under the guard

The names below are the light ones callers use (the client reads sources here and must not import torch);
``compile_stage`` imports the guard (and so torch) and is imported by module where it runs.
"""

from .backends import detect_backends, needs_cuda
from .diagnostics import compile_error_messages, exception_line, truncate
from .errors import LoadError, ProblemError
from .loader import Loaded, Problem, load_problem, load_solution, materialize, unload
from .sources import display_stem, input_hashes, read_source, source_hash

__all__ = [
    "LoadError",
    "Loaded",
    "Problem",
    "ProblemError",
    "compile_error_messages",
    "detect_backends",
    "display_stem",
    "exception_line",
    "input_hashes",
    "load_problem",
    "load_solution",
    "materialize",
    "needs_cuda",
    "read_source",
    "source_hash",
    "truncate",
    "unload",
]
