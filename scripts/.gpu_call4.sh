export KERNELBENCH_DIR=.kb PYTHONUNBUFFERED=1
timeout 170 python3 - <<'PY'
import json, sys, time
sys.path.insert(0, ".")
from pathlib import Path
from kernels_env.client import SandboxClient, SandboxConfig, JudgeConfig
cfg = SandboxConfig(device="cuda", cache_dir="/tmp/c4", num_compile_workers=2, run_timeout_s=300)
with SandboxClient(cfg) as sb:
    for name in ("45_Average_Pooling_2D", "38_L1Norm_"):
        t = time.time()
        r = sb.evaluate(Path(".kb/level1") / f"{name}.py", Path("tests/fixtures/kernelbench_large") / f"{name}.py", judge=JudgeConfig(baselines=["eager"]))
        print(name, round(time.time() - t, 1), r["status"], r["stage"], r.get("check"), (r.get("error") or "")[:600])
        print("  plan", json.dumps(r["judge"].get("memory_plan"))[:700])
        print("  msgs", json.dumps(r.get("messages"))[:900])
        print("  dur", r.get("durations_s"))
PY
