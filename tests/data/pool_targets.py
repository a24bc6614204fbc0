"""A light worker target for the pool's own tests: no torch, so a task's time is the task's alone."""

from __future__ import annotations

import os
import time


def act(payload: dict) -> dict:
    if payload.get("sleep_s"):
        time.sleep(payload["sleep_s"])
    if "exit" in payload:
        os._exit(payload["exit"])
    return {"ok": True, "echo": payload.get("echo")}
