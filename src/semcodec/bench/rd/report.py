"""Reports of a rate–distortion result: the text table, the Markdown tables of
docs/benchmarks.md, the RD plot and side-by-side crops at matched bpp."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from PIL import Image

from semcodec.bench.bdrate import METHODS
from semcodec.bench.codecs import CodecAdapter, Setting, make_adapter
from semcodec.bench.rd.results import (
    LAYERS,
    METRICS,
    OPTIONAL_FIELDS,
    fmt,
    num,
    read_json,
    setting_key,
)
from semcodec.bench.rd.run import load_rgb

#: Column titles of the optional metrics in the tables and the plot.
_TITLES = {"psnr": "PSNR", "msssim_db": "MS-SSIM dB", "ssimulacra2": "SSIMULACRA2",
           "butteraugli": "Butteraugli"}  # fmt: skip
_AXES = {"psnr": "PSNR (dB, RGB)", "msssim_db": "MS-SSIM (dB)",
         "ssimulacra2": "SSIMULACRA 2 (100 = identical)"}  # fmt: skip


def _extra_fields(result: Mapping[str, Any]) -> list[str]:
    """Optional metrics present in the aggregate (old results and skipped metrics have none)."""
    rows = [r for rs in result["aggregate"].values() for r in rs]
    return [f for f in OPTIONAL_FIELDS if any(r.get(f) is not None for r in rows)]


def _bd_columns(result: Mapping[str, Any]) -> list[str]:
    """BD metrics some codec has against the anchor: PSNR, MS-SSIM dB, then SSIMULACRA 2."""
    entries = result["bd"]["codecs"].values()
    return [mt for mt in METRICS if any(mt in e for e in entries)] or ["psnr", "msssim_db"]


def _bd_rates(entry: Mapping[str, Any], metrics: Sequence[str]) -> list[str]:
    """BD-rates of one codec in table order: each metric's cubic, then pchip ("—" if absent)."""
    return [
        fmt(entry[mt][md]["bd_rate"], "+.1f") if mt in entry else "—"
        for mt in metrics
        for md in METHODS
    ]


def _extra_cells(row: Mapping[str, Any], fields: Sequence[str]) -> list[str]:
    """An aggregate row's optional-metric means for a table."""
    spec = {"ssimulacra2": ".2f", "butteraugli": ".3f"}
    return [fmt(row.get(f), spec[f]) for f in fields]


def format_table(result: Mapping[str, Any]) -> str:
    """Human-readable summary: per-setting means, then BD-rates against the anchor."""
    lines: list[str] = []
    extras = _extra_fields(result)
    header = (
        f"{'codec':<14}{'setting':>8}{'n':>4}{'bpp':>8}{'PSNR':>8}{'MS-SSIM':>9}"
        f"{'MS-SSIM dB':>11}" + "".join(f"{_TITLES[f]:>13}" for f in extras) + f"{'enc ms':>9}"
        f"{'dec ms':>9}"
    )
    lines += [header, "-" * len(header)]
    for codec, rows in result["aggregate"].items():
        for r in rows:
            lines.append(
                f"{codec:<14}{str(r['setting']):>8}{r['n']:>4}{fmt(r['bpp'], '.4f'):>8}"
                f"{fmt(r['psnr'], '.2f'):>8}{fmt(r['msssim'], '.4f'):>9}"
                f"{fmt(r['msssim_db'], '.2f'):>11}"
                + "".join(f"{c:>13}" for c in _extra_cells(r, extras))
                + f"{fmt(None if r['encode_s'] is None else r['encode_s'] * 1e3, '.1f'):>9}"
                f"{fmt(None if r['decode_s'] is None else r['decode_s'] * 1e3, '.1f'):>9}"
            )
    for name, info in result.get("metrics", {}).items():
        if info.get("status") == "skipped":
            lines.append(f"metric {name} left out: {info.get('reason')}")
    for name, info in result.get("codecs", {}).items():
        if info.get("status") == "skipped":
            lines.append(f"{name:<14} skipped: {info.get('reason')}")
    layered = [
        (c, r) for c, rows in result["aggregate"].items() for r in rows if r.get("layer_bpp")
    ]
    if layered:
        lines.append("")
        h3 = f"{'codec':<14}{'setting':>8}" + "".join(f"{k + ' bpp':>15}" for k in LAYERS)
        lines += [h3, "-" * len(h3)]
        for codec, r in layered:
            cells = "".join(f"{fmt(r['layer_bpp'].get(k), '.4f'):>15}" for k in LAYERS)
            lines.append(f"{codec:<14}{str(r['setting']):>8}{cells}")
    bd = result["bd"]
    lines.append("")
    lines.append(f"BD-rate vs {bd['anchor']} (%, negative = fewer bits; cubic / pchip)")
    if bd.get("reason"):
        lines.append(f"  {bd['reason']}")
    cols = _bd_columns(result)
    h2 = f"{'codec':<14}{'bpp range':>16}{'PSNR cubic':>12}{'pchip':>9}{'MS-SSIM-dB cubic':>18}{'pchip':>9}"
    h2 += f"{'SSIMULACRA2 cubic':>19}{'pchip':>9}" if "ssimulacra2" in cols else ""
    lines += [h2, "-" * len(h2)]
    for codec, e in bd["codecs"].items():
        rng = e.get("bpp_range")
        rng_s = f"{rng[0]:.3f}–{rng[1]:.3f}" if rng else "—"
        if codec == bd["anchor"]:
            lines.append(f"{codec:<14}{rng_s:>16}{'(anchor)':>12}")
            continue
        if "psnr" not in e:
            lines.append(f"{codec:<14}{rng_s:>16}")
            continue
        pc, pp, mc, mp, *s2 = _bd_rates(e, cols)
        s2_cells = f"{s2[0]:>19}{s2[1]:>9}" if s2 else ""
        lines.append(f"{codec:<14}{rng_s:>16}{pc:>12}{pp:>9}{mc:>18}{mp:>9}{s2_cells}")
        for metric in (mt for mt in cols if mt in e):
            for method in METHODS:
                why = e[metric][method]["reason"]
                if why:
                    lines.append(f"  {metric}/{method}: {why}")
    for pv in (result.get("prediction") or {}).values():
        lines += prediction_lines(pv)
    lines += tile_lines(result.get("tile_modes"))
    lines += enhancement_lines(result.get("enhancement"))
    return "\n".join(lines)


def tile_lines(tm: Mapping[str, Any] | None, markdown: bool = False) -> list[str]:
    """Mean share of tiles per prediction mode at each setting."""
    if not tm:
        return []
    out = ["", "Tiles per prediction mode (mean share over images, %):"]
    if markdown:
        out += ["", "| codec | setting | generator | base | none |", "|---|---:|---:|---:|---:|"]
    for codec, by in tm.items():
        for setting, sh in by.items():
            g, b, n = (100 * sh.get(k, 0.0) for k in ("generator", "base", "none"))
            if markdown:
                out.append(f"| {codec} | {setting} | {g:.1f} | {b:.1f} | {n:.1f} |")
            else:
                out.append(
                    f"  {codec:<18}{setting:>6}  generator {g:5.1f}  base {b:5.1f}  none {n:5.1f}"
                )
    return out


def enhancement_lines(enh: Mapping[str, Any] | None, markdown: bool = False) -> list[str]:
    """The ENHANCE layer's gain: BD-rate against the same files without it, per quality."""
    if not enh:
        return []
    out: list[str] = []
    for codec, e in enh.items():
        bd = e.get("bd") or {}
        cells = []
        for metric, label in (
            ("psnr", "PSNR"),
            ("msssim_db", "MS-SSIM dB"),
            ("ssimulacra2", "SSIMULACRA 2"),
        ):
            if metric in bd:
                cells.append(f"{label} {fmt(bd[metric]['pchip']['bd_rate'], '+.2f')} %")
        out += [
            "",
            f"Enhancement: {codec} against the same files without the ENHANCE layer "
            f"(BD-rate, pchip): " + (", ".join(cells) or "—"),
        ]
        if markdown:
            out += [
                "",
                "| quality | files with the layer | tiles enhanced | layer bytes | PSNR gain dB "
                "| largest class gains dB |",
                "|---:|---:|---:|---:|---:|---|",
            ]
        for q, r in e["per_quality"].items():
            top = sorted(r["class_psnr_gain"].items(), key=lambda kv: -kv[1])[:3]
            classes = ", ".join(f"{k} {v:+.2f}" for k, v in top) or "—"
            share, nbytes, gain = 100 * r["files_with_layer"], r["layer_bytes"], r["psnr_gain"]
            tiles = 100 * r.get("tiles_enhanced", 0.0)
            if markdown:
                out.append(
                    f"| {q} | {share:.0f} % | {tiles:.0f} % | {nbytes:.0f} | {gain:+.3f} | {classes} |"
                )
            else:
                out.append(
                    f"  q {q:>6}  layer in {share:5.1f} % of files, tiles {tiles:5.1f} %, "
                    f"{nbytes:5.1f} bytes, PSNR {gain:+.3f} dB; {classes}"
                )
    return out


def prediction_lines(pv: Mapping[str, Any] | None, markdown: bool = False) -> list[str]:
    """The base layer's prediction value, per image and mean (results.prediction_value)."""
    if not pv:
        return []
    anchor = pv.get("anchor")
    head = (
        f"Prediction value: BD-rate (PSNR, pchip, %) of {pv['codec']}'s residual bytes alone "
        f"against {pv['reference']} (its residual coder on the image itself); negative = the "
        "base layer saves the residual coder bytes"
        + (f". Whole file: {pv['codec']} against {anchor}." if anchor else ".")
    )
    rows = [(k, v.get("prediction"), v.get("whole_file")) for k, v in pv["per_image"].items()]
    rows.append(("mean", pv.get("mean_prediction"), pv.get("mean_whole_file")))
    if markdown:
        out = ["", head, "", "| image | prediction value | whole file |", "|---|---:|---:|"]
        out += [f"| {k} | {fmt(p, '+.1f')} | {fmt(w, '+.1f')} |" for k, p, w in rows]
        return out
    out = ["", head, f"{'image':<14}{'prediction':>12}{'whole file':>12}"]
    out += [f"{k:<14}{fmt(p, '+.1f'):>12}{fmt(w, '+.1f'):>12}" for k, p, w in rows]
    return out


def _md_ms(x: Any) -> str:
    """Seconds as milliseconds for a Markdown cell."""
    return "—" if x is None else f"{x * 1e3:.0f}"


def format_markdown(result: Mapping[str, Any], *, per_setting: bool = True) -> str:
    """Markdown tables for docs/benchmarks.md: BD-rates, per-setting means, semcodec layers."""
    bd = result["bd"]
    n = len(result.get("images", []))
    env = result.get("environment", {})
    cfg = result.get("config", {})
    cols = _bd_columns(result)
    extras = _extra_fields(result)
    lines = [
        f"Mean over {n} image{'s' if n != 1 else ''}; run {result.get('created', '?')}, "
        f"torch threads {cfg.get('threads', '?')}, AVIF/JXL threads "
        f"{cfg.get('codec_threads', cfg.get('threads', '?'))}, Pillow {env.get('pillow', '?')}.",
        "",
        f"BD-rate against {bd['anchor']} (%, negative = fewer bits at equal quality; "
        "cubic = Bjøntegaard polynomial, pchip = piecewise cubic as in the JVET/VCEG CTC)"
        " and BD-PSNR (dB at equal rate, cubic):",
        "",
        "| codec | bpp range | PSNR cubic | PSNR pchip | MS-SSIM dB cubic | MS-SSIM dB pchip "
        + ("| SSIMULACRA2 cubic | SSIMULACRA2 pchip " if "ssimulacra2" in cols else "")
        + "| BD-PSNR (dB) |",
        "|---|---|" + "---:|" * (2 * len(cols) + 1),
    ]
    if bd.get("reason"):
        lines.insert(2, f"({bd['reason']})")
    notes: list[str] = []
    for codec, e in bd["codecs"].items():
        rng = e.get("bpp_range")
        rng_s = f"{rng[0]:.3f}–{rng[1]:.3f}" if rng else "—"
        if codec == bd["anchor"] or "psnr" not in e:
            tag = "anchor" if codec == bd["anchor"] else "—"
            lines.append(f"| {codec} | {rng_s} | {tag} |" + " |" * (2 * len(cols)))
            continue
        rates = " | ".join(_bd_rates(e, cols))
        bd_psnr = fmt(e["psnr"]["cubic"]["bd_dist"], "+.2f")
        lines.append(f"| {codec} | {rng_s} | {rates} | {bd_psnr} |")
        whys = {e[mt][md]["reason"] for mt in cols if mt in e for md in METHODS} - {None}
        notes += [f"{codec}: {w}" for w in sorted(whys)]
    for name, info in result.get("codecs", {}).items():
        if info.get("status") == "skipped":
            notes.append(f"{name} skipped: {info.get('reason')}")
    for name, info in result.get("metrics", {}).items():
        if info.get("status") == "skipped":
            notes.append(f"metric {name} left out: {info.get('reason')}")
    if notes:
        lines += ["", *[f"- {t}" for t in notes]]
    if per_setting:
        lines += [
            "",
            "| codec | setting | bpp | PSNR (dB) | MS-SSIM | MS-SSIM (dB) "
            + "".join(f"| {_TITLES[f]} " for f in extras)
            + "| encode (ms) | decode (ms) |",
            "|---|" + "---:|" * (7 + len(extras)),
        ]
        for codec, rows in result["aggregate"].items():
            for r in rows:
                lines.append(
                    f"| {codec} | {r['setting']} | {fmt(r['bpp'], '.3f')} "
                    f"| {fmt(r['psnr'], '.2f')} | {fmt(r['msssim'], '.4f')} "
                    f"| {fmt(r['msssim_db'], '.2f')} "
                    + "".join(f"| {c} " for c in _extra_cells(r, extras))
                    + f"| {_md_ms(r['encode_s'])} | {_md_ms(r['decode_s'])} |"
                )
    layered = [
        (codec, r)
        for codec, rows in result["aggregate"].items()
        for r in rows
        if r.get("layer_bpp")
    ]
    if layered:
        lines += [
            "",
            "Bits per layer (mean bpp; container = header, layer table and CRCs):",
            "",
            "| codec | setting | total | map | compact | residual | container |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for codec, r in layered:
            lb = r["layer_bpp"]
            cells = " | ".join(fmt(lb.get(k), ".4f") for k in LAYERS)
            lines.append(f"| {codec} | {r['setting']} | {fmt(r['bpp'], '.4f')} | {cells} |")
    for pv in (result.get("prediction") or {}).values():
        lines += prediction_lines(pv, markdown=True)
    lines += tile_lines(result.get("tile_modes"), markdown=True)
    lines += enhancement_lines(result.get("enhancement"), markdown=True)
    return "\n".join(lines) + "\n"


def plot_rd(result: Mapping[str, Any], path: Path | str, title: str | None = None) -> None:
    """bpp vs PSNR, vs MS-SSIM dB and (when measured) vs SSIMULACRA 2, one line per codec
    (Agg, no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    metrics = ["psnr", "msssim_db"] + (
        ["ssimulacra2"] if "ssimulacra2" in _extra_fields(result) else []
    )
    fig = Figure(figsize=(6 * len(metrics), 5), layout="constrained")
    FigureCanvasAgg(fig)  # Agg explicitly, without touching pyplot's global backend
    axes = fig.subplots(1, len(metrics))
    for codec, rows in result["aggregate"].items():
        rows = sorted((r for r in rows if r.get("bpp") is not None), key=lambda r: r["bpp"])
        x = [r["bpp"] for r in rows]
        for ax, metric in zip(axes, metrics, strict=True):
            y = [num(r.get(metric)) for r in rows]
            style = "--" if codec == result["bd"]["anchor"] else "-"
            ax.plot(x, y, style, marker="o", markersize=3, label=codec)
    n = len(result.get("images", []))
    for ax, ylabel in zip(axes, (_AXES[m] for m in metrics), strict=True):
        ax.set_xlabel("bits per pixel")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend()
        ax.set_xlim(left=0)
    fig.suptitle(title or f"Rate–distortion, mean over {n} image{'s' if n != 1 else ''}")
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=120)


def label_panel(img: Image.Image, text: str) -> Image.Image:
    """Add a caption strip above a panel so the PNG is self-explanatory."""
    from PIL import ImageDraw

    strip = 18
    out = Image.new("RGB", (img.width, img.height + strip), (255, 255, 255))
    out.paste(img, (0, strip))
    ImageDraw.Draw(out).text((3, 3), text, fill=(0, 0, 0))
    return out


def crops(
    result: Mapping[str, Any] | Path | str,
    out_dir: Path | str,
    *,
    reference: str = "semcodec",
    codecs: Sequence[str] | None = None,
    settings: Sequence[Setting] | None = None,
    size: int = 256,
    origin: tuple[int, int] | None = None,
) -> list[Path]:
    """Side-by-side crops of ``reference`` and each other codec at matched bpp, as PNGs.

    For every image and reference setting, each other codec uses the setting whose bpp on
    *that image* is closest to the reference's.  Files are re-encoded (results do not store
    pixels) with the run's model/residual options.  Panels: original, reference, then the
    others; the crop is ``size`` px square at ``origin`` (x, y), centred by default.  Writes
    ``<image>_<reference>-<setting>.png`` and returns the paths.
    """
    res = read_json(result) if not isinstance(result, Mapping) else result
    cfg = res.get("config", {})
    by_key = {
        (r["image"], r["codec"], setting_key(r["setting"])): r
        for r in res["records"]
        if not r.get("error") and r.get("bpp") is not None
    }
    available = [c for c in res["aggregate"] if c != reference]
    others = [c for c in (codecs or available) if c in available]
    ref_settings = (
        list(settings)
        if settings is not None
        else [r["setting"] for r in res["aggregate"].get(reference, [])]
    )
    if reference not in res["aggregate"]:
        raise ValueError(f"reference codec {reference!r} has no results in this run")

    def make(name: str) -> CodecAdapter:
        return make_adapter(
            name,
            model=cfg.get("model", "default"),
            residual=cfg.get("residual", "avif"),
            threads=cfg.get("codec_threads", cfg.get("threads", 1)),
        )

    adapters = {c: make(c) for c in [reference, *others]}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for info in res["images"]:
        name = info["name"]
        rgb = load_rgb(info["path"])
        h, w = rgb.shape[:2]
        cs = min(size, h, w)
        x0, y0 = origin if origin else ((w - cs) // 2, (h - cs) // 2)
        x0, y0 = max(0, min(x0, w - cs)), max(0, min(y0, h - cs))
        box = (slice(y0, y0 + cs), slice(x0, x0 + cs))
        for s in ref_settings:
            ref = by_key.get((name, reference, setting_key(s)))
            if ref is None:
                continue
            panels = [label_panel(Image.fromarray(rgb[box]), "original")]
            picks = [(reference, s, ref["bpp"])]
            for c in others:
                cands = [r for (im, cc, _), r in by_key.items() if im == name and cc == c]
                if cands:
                    best = min(cands, key=lambda r: abs(r["bpp"] - ref["bpp"]))
                    picks.append((c, best["setting"], best["bpp"]))
            for c, setting, b in picks:
                dec = adapters[c].decode(adapters[c].encode(rgb, setting))
                panels.append(label_panel(Image.fromarray(dec[box]), f"{c} {setting} {b:.3f}bpp"))
            sheet = Image.new("RGB", (sum(p.width for p in panels), panels[0].height), "white")
            xoff = 0
            for p in panels:
                sheet.paste(p, (xoff, 0))
                xoff += p.width
            safe = str(s).replace("/", "_")
            path = out / f"{name}_{reference}-{safe}.png"
            sheet.save(path)
            written.append(path)
    return written
