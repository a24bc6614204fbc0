"""Fixtures of the fast-path tests: a private build cache per test and an nvcc wrapper that logs its calls."""

from __future__ import annotations

import stat
import textwrap

import pytest

from .support import FIXTURES, RELU_CU, REPO  # noqa: F401


@pytest.fixture
def fp_cache(tmp_path, monkeypatch):
    """A fresh, private fast-path cache dir for the test."""
    root = tmp_path / "fpcache"
    monkeypatch.setenv("KERNELS_ENV_CACHE_DIR", str(root))
    return root


@pytest.fixture
def build_only(monkeypatch):
    monkeypatch.setenv("KERNELS_ENV_BUILD_ONLY", "1")


@pytest.fixture
def nvcc_spy(tmp_path, monkeypatch):
    """Points KERNELS_ENV_NVCC at a wrapper that appends each compile call (not --version) to a log.

    ``spy.calls()`` -> list of argument lines; ``spy.set_delay(s)`` sleeps before each compile (to widen
    races); ``spy.set_version(text)`` fakes ``nvcc --version`` (a toolchain upgrade).
    """
    from kernels_env.fastpath import toolchain

    real = toolchain.nvcc_path()
    d = tmp_path / "spy"
    d.mkdir()
    script = d / "nvcc"
    log, delay, version, pidfile = d / "calls.log", d / "delay", d / "version", d / "pid"
    script.write_text(
        textwrap.dedent(
            f"""\
            #!/bin/sh
            if [ "$1" = "--version" ]; then
              if [ -f {version} ]; then cat {version}; exit 0; fi
              exec {real} "$@"
            fi
            echo "$@" >> {log}
            echo $$ > {pidfile}
            if [ -f {delay} ]; then sleep "$(cat {delay})" & echo $! > {pidfile}.sleep; wait; fi
            exec {real} "$@"
            """
        )
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("KERNELS_ENV_NVCC", str(script))

    class Spy:
        path = str(script)

        @staticmethod
        def calls() -> list[str]:
            return log.read_text().splitlines() if log.exists() else []

        @staticmethod
        def set_delay(seconds: float) -> None:
            delay.write_text(str(seconds))

        @staticmethod
        def set_version(text: str) -> None:
            version.write_text(text)

        @staticmethod
        def last_pids() -> list[int]:
            """PIDs of the last compile call: the wrapper shell and its sleep (when delayed)."""
            pids = [int(pidfile.read_text())]
            sleeper = pidfile.with_name(pidfile.name + ".sleep")
            return pids + ([int(sleeper.read_text())] if sleeper.exists() else [])

    return Spy
