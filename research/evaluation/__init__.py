"""research.evaluation: reproduction workflow on real runs (issue 15).

- Released solution sets: ``import_solutions`` (JSON/JSONL/Parquet, a ``FieldMap``, matched to a KernelBench
  checkout's problem files by ``ProblemIndex``; unmatched records and duplicate ids reported),
  ``judge_solutions`` (batch layout, ``SandboxClient.submit`` with several in flight, resumable
  results.jsonl), ``claims_table`` (claimed vs measured per source, which claims survive and why the others
  fail); ``evaluate_solution_set`` does all of it (``python -m experiments.solutions``).
- ``table1_report``: CUDA Agent's Table 1 per level for batch or agent results, on the full set and on the
  subset the degenerate-task audit leaves (``read_audit``), labelled with GPU / torch / protocol / policy /
  precision (``labels``); the arithmetic is ``kernels_env.client.summarize`` via ``research.agent.summary``.
- ``collect`` / ``ablation_table`` / ``curves``: a Hydra multirun directory of ``experiments.train`` as one
  table (ablation x seed) with failed points reported, and its training curves.
- ``protocol_table``: a Hydra multirun of ``experiments.evaluate`` (judge protocol x policy) as one table.
- ``figures`` (``make_figures``) in one ``style``, PDF + PNG.
- The study (docs/study_protocol.md): ``make_protocol`` / ``write_protocol`` / ``record_evaluation``
  (splits fixed before the final runs, test splits touched once), ``stats`` (Wilson, exact sign and McNemar,
  permutation, paired bootstrap, geomean CI, Holm) and ``paired`` (``RunResults``, ``compare``,
  ``ablation_table``, ``study_report``, ``pass_at_k_table``); ``protocol_tasks`` applies a protocol to the
  agent loop's tasks (the training pipeline's ``tasks.protocol``) and ``study_eval`` evaluates a policy on
  one split (``python -m experiments.study``; not imported here: it loads the agent loop).

May import: the standard library, numpy, yaml, matplotlib, tqdm, pyarrow (Parquet), ``research.agent``
(its summary; ``study_eval``: the agent loop), ``research.data`` (op extraction, categories), and the
sandbox only through ``kernels_env.client``. Never imports hydra/omegaconf (entry points:
``experiments/solutions.py``, ``experiments/figures.py``, ``experiments/study.py``), jax or ``models``.
"""

from .ablations import CURVES, Point, ablation_table, collect, curves, format_ablations
from .audit import Audit, read_audit
from .claims import ClaimRule, claim_rows, claims_table, format_claims
from .evaluate_set import SolutionSetConfig, evaluate_solution_set
from .judging import judge_solutions, materialise, read_results
from .kernelbench import ENV_VAR, KernelBenchNotFound, Problem, ProblemIndex, find_kernelbench
from .labels import labels, level_label, result_labels
from .paired import (
    ResultsError,
    RunResults,
    TaskResult,
    check_run,
    compare,
    pair_runs,
    pass_at_k_table,
    result_from_verdict,
)
from .paired import ablation_table as study_ablations
from .paired import report as study_report
from .protocol import (
    Protocol,
    ProtocolConfig,
    ProtocolError,
    load_protocol,
    make_protocol,
    record_evaluation,
    split_tasks,
    write_protocol,
)
from .records import FieldMap, SolutionSetError, read_records
from .solution_sets import Solution, SolutionSet, import_solutions
from .sweeps import format_protocols, is_evaluation_sweep, protocol_table
from .table1 import format_table1_report, load_results, run_tasks, table1_report

__all__ = [
    "CURVES",
    "ENV_VAR",
    "Audit",
    "ClaimRule",
    "FieldMap",
    "KernelBenchNotFound",
    "Point",
    "Problem",
    "Protocol",
    "ProtocolConfig",
    "ProtocolError",
    "ResultsError",
    "RunResults",
    "TaskResult",
    "ProblemIndex",
    "Solution",
    "SolutionSet",
    "SolutionSetConfig",
    "SolutionSetError",
    "ablation_table",
    "claim_rows",
    "check_run",
    "claims_table",
    "collect",
    "compare",
    "curves",
    "evaluate_solution_set",
    "find_kernelbench",
    "format_ablations",
    "format_claims",
    "format_protocols",
    "format_table1_report",
    "import_solutions",
    "is_evaluation_sweep",
    "judge_solutions",
    "labels",
    "level_label",
    "load_protocol",
    "load_results",
    "make_protocol",
    "materialise",
    "pair_runs",
    "pass_at_k_table",
    "protocol_table",
    "read_audit",
    "run_tasks",
    "read_records",
    "record_evaluation",
    "read_results",
    "result_from_verdict",
    "result_labels",
    "split_tasks",
    "study_ablations",
    "study_report",
    "table1_report",
    "write_protocol",
]
