"""Run ONE tool request in this (fresh) process: ``python -m kernels_env.tools.worker < request.json``.

The stand-in for the sandbox core's worker until it dispatches ``tool`` requests itself. The candidate's
code may print: file descriptor 1 is pointed at stderr while the tool runs and the JSON response is written
to the original stdout, so nothing the candidate prints can forge or corrupt it.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        request = json.loads(sys.stdin.read() or "{}")
    except ValueError as e:
        request = {"_bad": str(e)}
    from ._registry import handle_tool_request

    response = (
        handle_tool_request(request)
        if "_bad" not in request
        else {
            "protocol": 1,
            "tool": None,
            "ok": False,
            "result": None,
            "text": "",
            "truncated": False,
            "elapsed_s": 0.0,
            "error": f"request is not JSON: {request['_bad']}",
        }
    )
    with os.fdopen(real_stdout, "w") as out:
        out.write(json.dumps(response, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
