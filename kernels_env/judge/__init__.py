"""The judge: what a worker does with one candidate, in pipeline order.

    loader / sources       read and import the reference and the candidate (source text or workspace)
    build, compile_stage   recognise kernel builds; import the solution with the GPU hidden so every build
                           happens (and is cached) in a CPU compile worker before the GPU worker needs it
    inputs, adversarial    inputs for trials and timing from unpredictable seeds; adversarial input families
    enforce                the reward-hack defences of ``kernels_env.guard`` around every candidate call
    harness                one request end to end: trials -> families -> timing -> re-checks -> baselines
    memory                 each request's memory plan (timing sets, families, headroom) and whose an OOM is
    compare, families      output comparison (structure, dtype, values) and per-family reports
    timing, timed_checks   CUDA-event timing on rotated inputs with a cold L2, and the checks after timing
    baselines              eager / torch.compile / max-autotune timings, cached on disk
    verdict, assemble      failures as verdicts in the worker; the client's final verdict (speedups, reward)
    hygiene, phases        worker state restored between requests; where a request's seconds go

Imports ``rules``, ``host``, ``guard`` and ``fastpath``; never ``runtime``, ``reports``, ``client`` or
``cli``.
"""
