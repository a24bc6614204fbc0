"""The judge: what happens to one candidate, in stages, in the order a request meets them.

    build/      read the reference and the candidate, build their kernels and import them; in a compile
                worker first (CPU, GPU hidden: every build happens and is cached there), then cache-only
                in the run worker (sources, loader, build hooks and faster build paths, compile_stage)
    run/        the run worker's request: memory plan, load under the guard, trials, adversarial
                families, timing and the checks after it, failures as verdicts (harness and its steps)
    check/      what correctness is made of: inputs and input families, output comparison, the memory plan
    timing/     the one timer of candidates and baselines, timing-exclusive GPU sharing, cached baselines
    assemble/   the final verdict on the caller's side: each stage's reply read without trusting it,
                speedups, the speed review, the reward, the race probe

Packages import only those listed before them in this order of dependence: build <- check, timing <-
assemble <- run (``run`` is the only one that uses all the others); shared names live in leaf modules
(``build.cache``, ``build.errors``, ``check.oom``). Each package's ``__init__`` says what its modules do.

Imports ``rules``, ``host``, ``guard`` and ``fastpath``; never ``runtime``, ``reports``, ``client`` or
``cli``.
"""
