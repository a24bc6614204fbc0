"""The steps of ``benchmarks.sandbox.sandbox_throughput`` (its docstring says what is measured and how):

- ``problems``: the problem set (its own and the example problems it measures at larger sizes);
- ``common``: the task list and its two solution sets, module loading, sample statistics, part files;
- ``builds``: the compile benchmark (fast path against load_inline, in fresh build processes);
- ``spread``: the timing spread of the fast-path kernels under the judge's timer alone;
- ``e2e``: end-to-end evaluations per hour through ``kernels_env.client``;
- ``report``: the environment, the headline against the targets, the markdown table and the plot.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the repository
AREA = Path(__file__).resolve().parents[1]  # benchmarks/sandbox: the problem and solution sets
