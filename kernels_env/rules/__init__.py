"""The sandbox's rules and contracts: what is asked, how it is judged, what comes back.

``config`` (typed sandbox/judge/batch configuration), ``protocols`` (judge protocols by name: trials,
tolerances, weight sync, fatal input families), ``policies`` (what a solution may do), ``rewards`` (reward
functions of a verdict), ``result`` (the one verdict schema), ``statuses`` (its status vocabulary),
``summary`` (KernelBench-style fast_p and speedups over many verdicts), ``results_file`` (the resumable JSONL
of many verdicts: which ones a rerun judges again) and ``messages`` (the versioned JSON-lines messages between
the client and its workers).

Pure data and decisions (and the files that hold them): imports nothing else of ``kernels_env`` and no torch.
"""
