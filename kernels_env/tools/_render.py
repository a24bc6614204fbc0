"""Short text the agent reads, from each tool's structured result."""

from __future__ import annotations

from ..fastpath.diagnostics import format_diagnostic


def _f(v, fmt="{:.0f}", unit=""):
    return "n/a" if v is None else fmt.format(v) + unit


def _bytes(n) -> str:
    if n is None:
        return "n/a"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def render_compile(r: dict, max_diagnostics: int = 20) -> str:
    lines = [
        f"compile ({r['arch']}): {'OK' if r['ok'] else 'FAILED'}, {r['errors']} error(s), "
        f"{r['warnings']} warning(s), {len(r['kernels'])} kernel(s)"
    ]
    for d in r["diagnostics"][:max_diagnostics]:
        lines.append("  " + format_diagnostic(d))
        if d.get("severity") == "error" and d.get("source"):
            lines.append(f"      | {d['source'][:160]}")
    if len(r["diagnostics"]) > max_diagnostics:
        lines.append(f"  ... {len(r['diagnostics']) - max_diagnostics} more")
    for k in r["kernels"]:
        s = (
            f"  {k['short_name']}: {k['registers']} regs, smem {k['shared_bytes']} B, stack "
            f"{k['stack_frame_bytes']} B"
        )
        if k["spills"]:
            s += f", SPILLS {k['spill_stores_bytes']} B stored / {k['spill_loads_bytes']} B loaded"
        mix = k.get("sass")
        if mix:
            tc = ",".join(f"{op}x{n}" for op, n in mix["tensor_core"].items()) or "none"
            s += (
                f" | SASS {mix['instructions']} instr, tensor cores: {tc}, global loads by width "
                f"{mix['global_loads_by_width'] or '-'}"
            )
            if mix["spill_instructions"]:
                s += f", {mix['spill_instructions']} LDL/STL"
        lines.append(s)
    tri = r.get("triton")
    if tri:
        lines.append(f"  triton: {len(tri['functions'])} jit function(s) {tri['functions']}")
        for d in tri.get("diagnostics", []):
            lines.append("    " + d["message"].splitlines()[0][:300])
        for k in tri.get("kernels", []):
            p = k.get("ptxas") or {}
            lines.append(
                f"    {k['name']}: warps {k.get('num_warps')}, stages {k.get('num_stages')}, smem "
                f"{k.get('shared_bytes')} B, regs {k.get('n_regs', p.get('registers'))}, spills "
                f"{k.get('n_spills', p.get('spill_stores_bytes'))}"
            )
        if tri.get("note"):
            lines.append("    " + tri["note"])
    if r.get("note"):
        lines.append("  " + r["note"])
    return "\n".join(lines)


def _kernel_line(k: dict) -> list[str]:
    m = k.get("metrics", {})
    head = (
        f"  {k['share_pct']:5.1f}% {_f(k.get('total_us'), '{:.1f}', ' us'):>10} x{k['launches']:<3} "
        f"{k['short_name'][:48]}"
    )
    if "bottleneck" not in k:
        return [head]
    detail = (
        f"[{k['bottleneck']}] DRAM {_f(m.get('dram_pct'), unit='%')} "
        f"({_f(m.get('dram_gbps'), unit=' GB/s')}), "
        f"SM {_f(m.get('sm_pct'), unit='%')}"
    )
    if m.get("tensor_pct") is not None:
        detail += f", tensor {_f(m['tensor_pct'], unit='%')}"
    detail += (
        f", occupancy {_f(m.get('achieved_occupancy_pct'), unit='%')}"
        f" of {_f(m.get('theoretical_occupancy_pct'), unit='%')}"
    )
    if m.get("occupancy_limiter"):
        detail += f" (limit: {m['occupancy_limiter']})"
    detail += (
        f", {_f(m.get('registers_per_thread'))} regs, smem {_bytes(m.get('shared_bytes_per_block'))}, "
        f"L1 hit {_f(m.get('l1_hit_pct'), unit='%')}, L2 hit {_f(m.get('l2_hit_pct'), unit='%')}"
    )
    return [head, "         " + detail, *("         - " + e for e in k.get("evidence", [])[:3])]


def render_profile(r: dict, max_kernels: int = 8) -> str:
    if r.get("error"):
        return f"profile ({r['mode']}) FAILED: {r['error']}"
    lines = [f"profile ({r['mode']}, {r['device']})"]
    for side in ("candidate", "reference"):
        s = r.get(side)
        if not s:
            continue
        title = "candidate" if side == "candidate" else "reference (eager)"
        summary = (
            f"{title}: {len(s['kernels'])} kernel(s), {s['launches_per_forward']:.0f} launch(es), "
            f"{_f(s.get('kernel_us_per_forward'), '{:.1f}', ' us')} of kernel time per forward"
        )
        if s.get("forward_us") is not None:
            summary += f", {s['forward_us']:.1f} us wall"
        if s.get("gpu_idle_pct") is not None:
            summary += f", GPU idle {s['gpu_idle_pct']:.0f}%"
        lines.append(summary)
        if s.get("bottleneck"):
            lines.append(f"  [{s['bottleneck']}] " + "; ".join(s.get("evidence", [])))
        for k in s["kernels"][:max_kernels]:
            lines += _kernel_line(k)
        if len(s["kernels"]) > max_kernels:
            lines.append(f"  ... {len(s['kernels']) - max_kernels} more kernel(s)")
    if r.get("kernel_time_ratio"):
        lines.append(f"reference/candidate kernel time: {r['kernel_time_ratio']:.2f}x")
    roof = r.get("roofline") or {}
    if roof.get("floor"):
        fl, c = roof["floor"], roof["counts"]
        s = (
            f"roofline: floor {fl['floor_us']:.3g} us ({fl['bound']}-bound: {_bytes(c['compulsory_bytes'])} "
            f"compulsory at {roof['ceilings']['dram_gbps']:.0f} GB/s, "
            f"{c['matmul_flops'] / 1e9:.2f} GFLOP matmul ({fl['matmul_dtype']}) + "
            f"{c['other_flops'] / 1e9:.3f} GFLOP other; ceilings {roof['ceilings']['source']})"
        )
        lines.append(s)
        if roof.get("candidate"):
            d = roof["candidate"]
            lines.append(
                f"  candidate at {d['x_above_floor']:.1f}x the floor "
                f"({d['pct_of_roofline']:.0f}% of roofline)"
            )
    elif roof.get("error"):
        lines.append(f"roofline unavailable: {roof['error']}")
    for n in r.get("notes", []):
        lines.append(f"note: {n}")
    return "\n".join(lines)


def render_sanitize(r: dict, max_findings: int = 5) -> str:
    lines = [f"sanitize: {'CLEAN' if r['clean'] else 'PROBLEMS FOUND'}"]
    for tool, rep in r["tools"].items():
        state = (
            "clean"
            if rep["clean"]
            else (f"{rep['error_count']} error(s)" if rep["completed"] else "did not complete")
        )
        lines.append(f"  {tool}: {state} ({rep.get('elapsed_s', 0):.1f}s)")
        for f in rep["findings"][:max_findings]:
            where = f"{f['file']}:{f['line']}" if f.get("file") else (f.get("kernel") or "?")
            s = f"    {f['kind']} at {where}"
            if f.get("kernel") and f.get("file"):
                s += f" in {f['kernel'][:60]}"
            if f.get("other"):
                o = f["other"]
                s += f" vs {o['access']} at {o['file']}:{o['line']}" if o.get("file") else ""
                s += f" [{f.get('hazards', 0)} hazards]"
            if f.get("thread"):
                s += f", thread {tuple(f['thread'])} block {tuple(f['block'])}"
            if f.get("address_is"):
                s += f", address {f['address_is']}"
            if f["count"] > 1:
                s += f" (x{f['count']})"
            lines.append(s)
        if rep.get("target_error"):
            lines.append(f"    run error: {rep['target_error'][:300]}")
        if rep.get("timed_out"):
            lines.append("    timed out")
    return "\n".join(lines)


def render_roofline(r: dict) -> str:
    lines = render_profile({"mode": "roofline", "device": "", "roofline": r, "notes": []}).splitlines()
    lines[0] = f"roofline ({r.get('device') or 'no device given'})"
    if r.get("note"):
        lines.append(f"note: {r['note']}")
    c = r.get("counts") or {}
    if c and not r.get("floor"):
        lines.append(
            f"  {_bytes(c['compulsory_bytes'])} compulsory ({_bytes(c['unfused_bytes'])} unfused), "
            f"{c['matmul_flops'] / 1e9:.3g} GFLOP matmul + {c['other_flops'] / 1e9:.3g} GFLOP other"
        )
    return "\n".join(lines)


RENDERERS = {
    "compile": render_compile,
    "profile": render_profile,
    "sanitize": render_sanitize,
    "roofline": render_roofline,
}
