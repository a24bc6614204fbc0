"""Worker process main loop: ``python -m kernels_env.worker --role run|compile --device cpu|cuda``.

Speaks the JSON-lines protocol (``kernels_env.protocol``) on its original stdout, which it keeps to itself:
file descriptor 1 is redirected to stderr so whatever a candidate prints can never corrupt the protocol.
A run worker handles evaluate, baseline and GPU tool requests on one device; a compile worker forks a child
per compile request (``kernels_env.compile_stage``) and per CPU tool request (``kernels_env.tools._serve``).
A request that leaves the device unusable (sticky CUDA error) is answered with ``fatal: true`` and the worker
exits so its supervisor starts a fresh one.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any, BinaryIO


def _protocol_stream() -> BinaryIO:
    out = os.fdopen(os.dup(1), "wb")  # buffered: write() writes everything; send() flushes
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def _exit_with_parent() -> None:
    """Workers never outlive their client, even one killed with SIGKILL while a candidate is running."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                with contextlib.suppress(Exception):
                    from .processes import kill_tree

                    kill_tree(os.getpid())  # also what tools started in their own sessions
                with contextlib.suppress(Exception):
                    os.killpg(os.getpgrp(), signal.SIGKILL)
                os._exit(1)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=("run", "compile"), required=True)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args(argv)
    _exit_with_parent()
    out = _protocol_stream()
    from . import protocol

    def send(message: Any) -> None:
        out.write(protocol.encode(message))
        out.flush()

    if args.role == "compile":
        return _serve_compile(send, protocol)
    return _serve_run(send, protocol, args.device)


def _serve_compile(send, protocol) -> int:
    import torch  # noqa: F401 - imported once here so every forked child starts warm
    import torch.utils.cpp_extension  # noqa: F401

    for optional in ("triton", "numpy", "kernels_env.fastpath"):
        with contextlib.suppress(Exception):  # optional: a missing package only costs the child an import
            __import__(optional)
    from .compile_stage import serve
    from .tools._serve import serve_forked

    send(protocol.Hello(role="compile", pid=os.getpid()))
    for line in sys.stdin.buffer:
        msg = protocol.decode(line)
        if isinstance(msg, protocol.Shutdown):
            return 0
        payload = serve_forked(msg) if isinstance(msg, protocol.ToolRequest) else serve(msg)
        send(protocol.Reply(id=msg.id, payload=payload))
    return 0


def _serve_run(send, protocol, device_name: str) -> int:
    import torch

    for optional in ("triton", "triton.language", "numpy"):  # most candidates import these: pay once, here
        with contextlib.suppress(Exception):
            __import__(optional)
    from . import harness, worker_state
    from .environment import environment

    if device_name == "cuda":
        torch.cuda.init()
        torch.cuda.set_device(0)
    device = torch.device(device_name, 0) if device_name == "cuda" else torch.device("cpu")
    env = environment(device_name)
    state = worker_state.GlobalState()
    worker_state.GLOBAL_STATE = state
    gc.collect()
    gc.freeze()  # the harness's own objects: later collections (after every request) skip them
    send(protocol.Hello(role="run", pid=os.getpid(), environment=env))

    def progress_for(request_id: str):
        def progress(stage: str, detail: str) -> None:
            send(protocol.Progress(id=request_id, stage=stage, detail=detail))

        return progress

    for line in sys.stdin.buffer:
        msg = protocol.decode(line)
        if isinstance(msg, protocol.Shutdown):
            return 0
        started = time.perf_counter()
        try:
            if isinstance(msg, protocol.EvaluateRequest):
                payload = harness.evaluate(msg, device, progress_for(msg.id))
            elif isinstance(msg, protocol.BaselineRequest):
                payload = harness.baselines(msg, device, env, progress_for(msg.id))
            elif isinstance(msg, protocol.ToolRequest):
                from .tools._serve import serve_in_process

                payload = serve_in_process(msg, progress_for(msg.id))
            else:
                payload = {"harness_error": f"a run worker does not handle {msg.kind} messages"}
        except Exception:
            payload = {"harness_error": traceback.format_exc()[-4000:]}
        finally:
            worker_state.cleanup(getattr(msg, "workdir", ""), device, state)
        payload["duration_s"] = round(time.perf_counter() - started, 3)
        broken = worker_state.health_check(device)
        if broken:
            payload["device_error"] = broken
        send(protocol.Reply(id=msg.id, payload=payload, fatal=bool(broken)))
        if broken:
            return 3
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown (torch/Triton atexit work): nothing here needs cleaning
