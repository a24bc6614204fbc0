"""Run an entry point's Hydra main in this process: ``run_main("evaluate", overrides, monkeypatch)``."""

from __future__ import annotations

import importlib
import logging
import sys


def _loggers() -> list[logging.Logger]:
    return [logging.getLogger()] + [
        lg for lg in logging.root.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]


def run_main(name: str, argv: list[str], monkeypatch) -> int | None:
    """experiments.<name>.main() with ``argv``; its exit code (None: it returned). Hydra's logging setup
    (handlers on the test's captured stdout) is undone afterwards, as at process exit."""
    monkeypatch.setattr(sys, "argv", [name, *argv])
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    absl = sys.modules.get("absl.logging")
    if absl is not None:
        # Hydra's logging setup closes every handler; absl's closes its stream unless it is the current
        # sys.stderr, and under pytest that stream is the capture file of whoever imported absl first.
        monkeypatch.setattr(absl.get_absl_handler().python_handler, "stream", sys.stderr)
    before = {lg.name: (lg.handlers[:], lg.level, lg.propagate, lg.disabled) for lg in _loggers()}
    try:
        importlib.import_module(f"experiments.{name}").main()
    except SystemExit as exc:
        return exc.code
    finally:
        for lg in _loggers():
            handlers, level, propagate, disabled = before.get(lg.name, ([], logging.NOTSET, True, False))
            for h in lg.handlers:
                if h not in handlers:
                    h.close()  # the job log's file; a stream handler leaves its stream open
            lg.handlers[:] = handlers
            lg.setLevel(level)
            lg.propagate, lg.disabled = propagate, disabled
    return None
