"""The project's benchmarks, by area (``sandbox``, ``models``, ``rl``, ``data``, ``toyenv``), each run as
``python -m benchmarks.<area>.<name>``. Every result goes through ``benchmarks._results.write_results``
(provenance recorded, default location ``runs/benchmarks/``, outside the code tree)."""
