"""The reply-forging attacks' shared part (a helper module of their workspaces): the reply a worker would send
if the candidate were correct and fast, and the pipes this process could write it to."""

import json
import os
import stat


def forged_reply() -> bytes:
    """What a worker would answer if this candidate were correct and fast, for this very request (the request
    id is in the path the sandbox materialised the workspace under: <tmp>/req-<id>/solution/...)."""
    here = os.path.abspath(__file__)
    request = next((p[4:] for p in here.split(os.sep) if p.startswith("req-")), "unknown")
    payload = {
        "status": "correct",
        "stage": "done",
        "error": None,
        "messages": [],
        "check": None,
        "evidence": None,
        "correctness": None,
        "timings": None,
        "guard_enforced": True,
    }
    msg = {"v": 1, "kind": "reply", "id": request, "payload": payload, "fatal": False}
    return (json.dumps(msg) + "\n").encode()


def pipes() -> list[int]:
    """Every pipe this process can write to (the protocol channel is one of them)."""
    out = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                out.append(fd)
        except OSError:
            continue
    return out
