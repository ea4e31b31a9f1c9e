"""Speed benchmark, reporting: the text table of a measured result (measure.py)."""

from __future__ import annotations

import statistics
from typing import Any

from semcodec.bench.speed.stages import CODEC_TARGET_QUALITY, DECODE_STAGES, ENCODE_STAGES
from semcodec.bench.speed.startup import MAP_TARGET_S
from semcodec.bench.speed.throughput import throughput_lines

__all__ = ["format_speed_table"]


def _ms(x: float | None) -> str:
    """Seconds as a right-aligned millisecond cell."""
    return "—" if x is None else f"{x * 1e3:.1f}"


def format_speed_table(result: dict[str, Any]) -> str:
    """Text report: per image, per quality stages (wall and CPU), then networks vs targets."""
    cfg, m = result["config"], result["machine"]
    requested = cfg["model_requested"]
    lines = [
        f"semcodec speed — model {cfg['model']}"
        + (f" (requested {requested})" if cfg["model"] != requested else "")
        + f", {cfg['threads']} threads, median of {cfg['repeats']} after a warm-up",
        f"machine: {m['cpu']}, {m['usable_cpus']} usable CPUs, {m['ram_gib']} GiB RAM, "
        f"load average {m['loadavg']} → {m.get('loadavg_after')}",
        "times in ms: wall clock, and CPU (process time, all threads; robust to a busy machine)",
    ]
    rt = next((r.get("runtime") for r in result["runs"] if r.get("runtime")), None)
    if rt:
        lines.append(
            f"runtime: torch {rt['torch']}, ISA {rt['torch cpu capability']} (oneDNN cap: "
            f"{rt['oneDNN ISA cap']}), native bf16 {rt['native bf16']}, encoder bf16 "
            f"{rt['bf16 autocast (encoder)']}, threads {rt['threads']}"
        )
    if cfg.get("model_note"):
        lines.append(f"note: {cfg['model_note']}")
    lines += [f"warning: {w}" for w in result.get("warnings", [])]
    hdr = (
        f"{'image':<12}{'q':>4}{'size':>10}{'bpp':>8}{'load':>8}{'enc':>9}{'enc cpu':>9}"
        f"{'dec':>9}{'dec cpu':>9}{'peak MiB':>10}"
    )
    lines += ["", hdr, "-" * len(hdr)]
    for r in result["runs"]:
        if r.get("error"):
            lines.append(f"{r['image']:<12}{r['quality']:>4}  error: {r['error']}")
            continue
        size = f"{r['width']}x{r['height']}"
        lines.append(
            f"{r['image']:<12}{r['quality']:>4}{size:>10}{r['bpp']:>8.4f}"
            f"{_ms(r['model_load_s']):>8}{_ms(r['encode_s']):>9}{_ms(r.get('encode_cpu_s')):>9}"
            f"{_ms(r['decode_s']):>9}{_ms(r.get('decode_cpu_s')):>9}"
            f"{r['peak_rss_mib'] or 0:>10.0f}"
        )
        if r.get("unhooked"):
            lines.append(f"  (not timed separately: {', '.join(r['unhooked'])})")
    for q, s in result["summary"].items():
        lines += [
            "",
            f"quality {q}: mean over {s['n']} image(s); peak RSS {s['peak_rss_mib']} MiB, model "
            f"load {_ms(s['model_load_s'])} ms, imports {_ms(s['import_s'])} ms",
        ]
        h2 = f"  {'stage':<18}{'encode':>10}{'enc cpu':>10}{'decode':>10}{'dec cpu':>10}"
        lines += [h2, "  " + "-" * (len(h2) - 2)]
        for stage in dict.fromkeys((*ENCODE_STAGES, *DECODE_STAGES)):
            enc = stage in ENCODE_STAGES
            dec = stage in DECODE_STAGES
            cells = (
                s["encode_stages"][stage] if enc else None,
                s.get("encode_stages_cpu", {}).get(stage) if enc else None,
                s["decode_stages"][stage] if dec else None,
                s.get("decode_stages_cpu", {}).get(stage) if dec else None,
            )
            lines.append(f"  {stage:<18}" + "".join(f"{_ms(c):>10}" for c in cells))
        totals = (s["encode_s"], s.get("encode_cpu_s"), s["decode_s"], s.get("decode_cpu_s"))
        lines.append(f"  {'total':<18}" + "".join(f"{_ms(c):>10}" for c in totals))
        if s.get("map_decode_s") is not None:
            ok = "meets" if s["map_decode_s"] <= MAP_TARGET_S else "MISSES"
            lines.append(
                f"  map layer alone (decode --layer map, in process): {_ms(s['map_decode_s'])} ms"
                f" (target <= {MAP_TARGET_S * 1e3:.0f} ms: {ok})"
            )
        avif = [r["avif"] for r in result["runs"] if str(r.get("quality")) == q and r.get("avif")]
        if avif:
            enc = statistics.fmean(a["encode_s"] for a in avif)
            dec = statistics.fmean(a["decode_s"] for a in avif)
            lines.append(
                f"  AVIF (Pillow, quality {avif[0]['quality']}, speed 6) on the same images: "
                f"encode {_ms(enc)} ms, decode {_ms(dec)} ms"
            )
    for k, v in result.get("codec_targets", {}).items():
        unit = "s" if k.endswith("_s") else "MB"
        measured = "—" if v["measured"] is None else f"{v['measured']:.3g}"
        lines.append(
            f"target {k} (quality {CODEC_TARGET_QUALITY}) <= {v['target']:g} {unit}: "
            f"{measured} {unit} — {'meets' if v['meets'] else 'MISSES'}"
        )
    for net in result["networks"]:
        lines.append("")
        if net.get("error"):
            lines.append(f"networks alone, {net['label']}: error: {net['error']}")
            continue
        w, h = net["size"]
        lines.append(
            f"networks alone, {net['label']} ({net['weights']}), {w}x{h}, {net['threads']} "
            f"threads, peak RSS {net.get('peak_rss_mib')} MiB — ms"
        )
        h3 = (
            f"  {'network':<14}{'fp32':>9}{'cpu':>9}{'bf16':>9}{'cpu':>9}{'integer':>9}"
            f"{'codec uses':>12}{'target':>8}  verdict (wall clock)"
        )
        lines += [h3, "  " + "-" * (len(h3) - 2)]
        cpu = net.get("cpu_seconds") or {}
        for name, secs in net["seconds"].items():
            t = net.get("targets", {}).get(name)
            tgt = _ms(t["target_s"]) if t else ""
            verdict = ""
            if t:
                verdict = "meets" if t["meets"] else "MISSES"
                if t.get("meets_cpu") is not None and t["meets_cpu"] != t["meets"]:
                    verdict += f" (CPU time: {'meets' if t['meets_cpu'] else 'MISSES'})"
            c = cpu.get(name, {})
            prec = (net.get("codec_precision") or {}).get(name, "fp32")
            lines.append(
                f"  {name:<14}{_ms(secs['fp32']):>9}{_ms(c.get('fp32')):>9}"
                f"{_ms(secs.get('bf16')):>9}{_ms(c.get('bf16')):>9}{_ms(secs.get('integer')):>9}"
                f"{prec:>12}{tgt:>8}  {verdict}"
            )
        if not any(v.get("bf16") for v in net["seconds"].values()):
            lines.append("  (bf16 not timed: this CPU has no native bf16, it would be emulated)")
    lines += _startup_lines(result.get("startup"))
    lines += throughput_lines(result.get("throughput"))
    return "\n".join(lines)


def _startup_lines(st: dict[str, Any] | None) -> list[str]:
    """Whole commands on the small file: median wall seconds against the start-up targets."""
    if not st:
        return []
    if st.get("error"):
        return ["", f"start-up: error: {st['error']}"]
    lines = [
        "",
        f"start-up: whole commands on a {st['file']}, {st['threads']} threads, median of "
        f"{st['repeats']} after a warm-up — wall ms",
    ]
    for name, secs in st["seconds"].items():
        t = st["targets"].get(name)
        verdict = (
            f"  target <= {t['target'] * 1e3:.0f}: {'meets' if t['meets'] else 'MISSES'}"
            if t
            else ""
        )
        lines.append(f"  {name:<22}{_ms(secs):>9}{verdict}")
    return lines
