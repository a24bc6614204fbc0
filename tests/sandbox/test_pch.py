"""The shared precompiled torch/extension.h of load_inline builds (kernels_env/judge/build/pch.py): when
``use_pch=True`` is passed, that candidates share one PCH built once, and (slow) that a real cpp-only
extension built with it loads and that g++ really uses the PCH."""

from __future__ import annotations

import fcntl
import functools
import shlex
import subprocess
import sys

import pytest
import torch.utils.cpp_extension as ce

from kernels_env.judge.build import cache, hooks, pch


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """The sandbox's load_inline wrapper around a fake torch load_inline that records its keyword args;
    torch's own functions are restored afterwards."""
    calls: list[dict] = []
    real = ce.load_inline

    @functools.wraps(real)  # the wrapper binds the candidate's call against torch's signature
    def fake(name, cpp_sources, cuda_sources=None, **kwargs):
        calls.append({"name": name, **kwargs})
        return name

    monkeypatch.setattr(ce, "load_inline", fake)
    hook = "_check_and_build_extension_h_precompiler_headers"
    monkeypatch.setattr(ce, hook, getattr(ce, hook))
    monkeypatch.setenv(cache.SANDBOX_CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(cache.BUILD_ONLY_ENV, "1")
    monkeypatch.setenv(pch.MODE_ENV, "wait")
    built: list[list[str]] = []

    def fake_command(extra_cflags, extra_include_paths, output):  # a "compiler" that writes a stub PCH
        return [sys.executable, "-c", "import sys; open(sys.argv[1], 'w').write('gch')", output,
                *(extra_cflags or [])]  # fmt: skip

    real_build = pch.build
    monkeypatch.setattr(pch, "pch_command", fake_command)
    monkeypatch.setattr(
        pch, "build", lambda args, block: (built.append(args["cmd"]), real_build(args, block))
    )
    monkeypatch.setattr(pch, "supported", lambda load_inline: True)
    hooks.content_keyed_extensions()
    return calls, built, tmp_path / "torch_extensions" / "pch"


def test_use_pch_is_passed_with_the_shared_header(sandbox):
    calls, built, root = sandbox
    ce.load_inline("a", "int f() { return 1; }", functions=["f"])
    ce.load_inline("b", "int g() { return 2; }", functions=["g"], extra_include_paths=["/opt/inc"])
    first, second = calls
    assert first["use_pch"] is True and second["use_pch"] is True
    shared = str(pch.pch_dir(root, None, None))
    assert first["extra_include_paths"] == [shared]
    assert pch.gch_path(pch.pch_dir(root, None, None)).read_text() == "gch"
    # the candidate's include directories first (one of its own with torch/extension.h still wins)
    assert second["extra_include_paths"] == ["/opt/inc", str(pch.pch_dir(root, None, ["/opt/inc"]))]
    assert ce._check_and_build_extension_h_precompiler_headers is pch.torch_pch_hook  # never torch's dir


def test_a_second_candidate_reuses_the_same_pch(sandbox):
    calls, built, root = sandbox
    ce.load_inline("a", "int f() { return 1; }", functions=["f"], extra_cflags=["-O3"])
    ce.load_inline("other_name", "int g() { return 2; }", functions=["g"], extra_cflags=["-O3"])
    assert len(built) == 1  # built once
    assert calls[0]["extra_include_paths"] == calls[1]["extra_include_paths"]
    assert calls[0]["build_directory"] != calls[1]["build_directory"]  # different extensions
    ce.load_inline("c", "int h() { return 3; }", functions=["h"], extra_cflags=["-O2"])
    assert len(built) == 2 and calls[2]["extra_include_paths"] != calls[0]["extra_include_paths"]


def test_the_candidates_own_use_pch_is_respected(sandbox):
    calls, built, root = sandbox
    ce.load_inline("a", "int f() { return 1; }", functions=["f"], use_pch=False)
    assert calls[0]["use_pch"] is False and "extra_include_paths" not in calls[0] and not built
    ce.load_inline("b", "int g() { return 2; }", functions=["g"], use_pch=True)
    assert calls[1]["use_pch"] is True and calls[1]["extra_include_paths"] == [
        str(pch.pch_dir(root, None, None))
    ]
    ce.load_inline("c", "int h() { return 3; }", functions=["h"], no_implicit_headers=True)
    assert "use_pch" not in calls[2]  # no torch/extension.h first in main.cpp: nothing for a PCH to serve


def test_only_the_compile_stage_builds_a_pch(sandbox, monkeypatch):
    calls, built, root = sandbox
    monkeypatch.delenv(cache.BUILD_ONLY_ENV)  # the run worker: use a ready PCH, never build one
    ce.load_inline("a", "int f() { return 1; }", functions=["f"])
    assert not built and "use_pch" not in calls[0]


def test_background_mode_never_waits_for_the_pch(sandbox, monkeypatch):
    calls, built, root = sandbox
    detached: list[dict] = []
    monkeypatch.setenv(pch.MODE_ENV, "background")
    monkeypatch.setattr(pch, "_detach", detached.append)
    ce.load_inline("a", "int f() { return 1; }", functions=["f"])
    assert len(detached) == 1 and "use_pch" not in calls[0]  # this build without, later ones with it


def test_a_rebuild_keeps_the_choice_of_the_first_build(sandbox, monkeypatch):
    calls, built, root = sandbox
    monkeypatch.setenv(pch.MODE_ENV, "off")
    ce.load_inline("a", "int f() { return 1; }", functions=["f"])
    directory = calls[0]["build_directory"]
    (__import__("pathlib").Path(directory) / "build.ninja").write_text("cflags = -O3\n")
    monkeypatch.setenv(pch.MODE_ENV, "wait")
    ce.load_inline("a", "int f() { return 1; }", functions=["f"])  # e.g. the run worker, PCH ready by now
    assert calls[1]["build_directory"] == directory and "use_pch" not in calls[1]  # ninja: nothing to do


def test_a_held_lock_means_someone_else_builds_it(tmp_path):
    args = {"dir": str(tmp_path), "cmd": [sys.executable, "-c", "import sys; open(sys.argv[1], 'w')", "OUT"]}
    with open(tmp_path / "build.flock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        pch.build(args, block=False)  # returns at once: no second builder, no waiting
        assert not pch.gch_path(tmp_path).exists()
    pch.build(args, block=False)
    assert pch.gch_path(tmp_path).is_file() and not list(pch.gch_path(tmp_path).parent.glob("*.tmp"))


def test_a_failed_pch_is_not_retried(tmp_path):
    args = {"dir": str(tmp_path), "cmd": [sys.executable, "-c", "raise SystemExit(1)", "OUT"]}
    pch.build(args, block=True)
    assert (tmp_path / "failed.log").exists() and not pch.gch_path(tmp_path).exists()


CPP_ONLY = "torch::Tensor add_one(torch::Tensor x) { return x + 1; }"


@pytest.mark.toolchain  # about 2 minutes on 2 cores: precompiling torch/extension.h, then the extension
def test_a_cpp_only_extension_builds_with_the_pch_and_loads(tmp_path, monkeypatch):
    import torch

    if not pch.supported(ce.load_inline):
        pytest.skip("this torch or compiler has no use_pch")
    monkeypatch.setattr(ce, "load_inline", ce.load_inline)  # restored after the test
    hook = "_check_and_build_extension_h_precompiler_headers"
    monkeypatch.setattr(ce, hook, getattr(ce, hook))
    monkeypatch.setenv(cache.SANDBOX_CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(cache.BUILD_ONLY_ENV, "1")  # only the compile stage builds a PCH
    monkeypatch.setenv(pch.MODE_ENV, "wait")
    hooks.content_keyed_extensions()
    module = ce.load_inline("pch_add_one", CPP_ONLY, functions=["add_one"])
    assert module.add_one(torch.zeros(3)).tolist() == [1.0, 1.0, 1.0]
    root = tmp_path / "torch_extensions" / "pch"
    shared = pch.pch_dir(root, None, None)
    assert pch.gch_path(shared).stat().st_size > 1 << 20
    build_dir = next((tmp_path / "torch_extensions" / "content").iterdir())
    ninja = (build_dir / "build.ninja").read_text()
    assert f"-I{shared}" in ninja
    # The PCH's flags are those ninja gives main.cpp (torch/extension.h aside), and g++ really uses it:
    # ``-H`` prints "! PATH.gch" for a PCH it loaded.
    cflags = next(ln.split("=", 1)[1] for ln in ninja.splitlines() if ln.startswith("cflags ="))
    flags = pch.pch_command(None, None, "OUT")[6:]
    assert " ".join(flags) in " ".join(shlex.split(cflags)).replace(f"-I{shared} ", "")
    check = [ce.get_cxx_compiler(), *shlex.split(cflags), "-H", "-fsyntax-only", str(build_dir / "main.cpp")]
    out = subprocess.run(check, capture_output=True, text=True, timeout=600)
    assert f"! {pch.gch_path(shared)}" in out.stderr, out.stderr[-2000:]
