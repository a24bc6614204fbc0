"""The steps of ``benchmarks/sandbox_throughput.py`` (its docstring says what is measured and how):

- ``problems``: the problem set (its own and the example problems it measures at larger sizes);
- ``common``: the task list and its two solution sets, module loading, sample statistics, part files;
- ``builds``: the compile benchmark (fast path against load_inline, in fresh build processes);
- ``spread``: the timing spread of the fast-path kernels under the judge's timer alone;
- ``e2e``: end-to-end evaluations per hour through ``kernels_env.client``;
- ``report``: the environment, the headline against the targets, the markdown table and the plot.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script from benchmarks/: the project's packages are one level up
    sys.path.insert(0, str(ROOT))
