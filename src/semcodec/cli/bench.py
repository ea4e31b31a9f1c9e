"""``semcodec bench``: the benchmarks as subcommands.

``rd`` runs the rate–distortion benchmark; ``compare``, ``merge`` and ``report`` work on its
result files without running anything; ``matched`` compares semcodec with AVIF at matched
bytes per image; ``speed`` and ``large`` time the codec (per stage, peak memory) on a folder of
images and on one 6000x4000 photo; ``roi`` measures semantic ROI coding on CamVid.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from semcodec.bench.codecs import DEFAULT_CODECS as _DEFAULT_CODECS
from semcodec.bench.codecs import Setting, codec_names
from semcodec.bench.quality import DEFAULT_METRICS as _DEFAULT_METRICS
from semcodec.bench.quality import METRIC_NAMES as _METRIC_NAMES
from semcodec.bench.quality import parse_metrics
from semcodec.cli.common import apply_options, describe_error, effort_option
from semcodec.cli.groups import LazyGroup

DEFAULT_CODECS = ",".join(_DEFAULT_CODECS)


class ResultFile(click.Path):
    """A result JSON: a file that exists and parses as JSON (else a usage error naming it)."""

    def __init__(self) -> None:
        super().__init__(exists=True, dir_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The path, once its text was found to be JSON."""
        path = super().convert(value, param, ctx)
        try:
            json.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            self.fail(f"{str(path)!r} is not a result JSON ({describe_error(exc)})", param, ctx)
        return path


_result_file = ResultFile()


def _setting(text: str) -> Setting:
    """Numbers stay numbers (ints where possible) so they reach the encoders as such."""
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_qualities(spec: str | None) -> dict[str, list[Setting]]:
    """Parse ``codec:q1,q2,...;codec:...`` into a dict; empty or None gives {}."""
    out: dict[str, list[Setting]] = {}
    if not spec:
        return out
    for part in spec.split(";"):
        part = part.strip()
        if not part:
            continue
        codec, sep, values = part.partition(":")
        if not sep or not values.strip():
            raise click.BadParameter(f"expected codec:q1,q2,... but got {part!r}")
        out[codec.strip()] = [_setting(v.strip()) for v in values.split(",") if v.strip()]
    return out


def _metric_list(spec: str) -> list[str]:
    """--metrics as a list, an unknown name a usage error before any image is encoded."""
    try:
        return parse_metrics(spec)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--metrics") from None


def _report_options(out: bool) -> list:
    """--csv, --plot, --markdown (and --out where a new result is written) of rd and merge."""
    options = [
        click.option("--csv", "csv_path", type=click.Path(path_type=Path), help="CSV."),
        click.option("--plot", type=click.Path(path_type=Path), help="RD plot (PNG)."),
        click.option(
            "--markdown",
            "md_path",
            type=click.Path(path_type=Path),
            help="Markdown tables (BD-rates, means, semcodec layers) for docs/benchmarks.md"
            + (" [default: OUT with suffix .md when --out is given]." if out else "."),
        ),
    ]
    if out:
        options.insert(
            0, click.option("--out", type=click.Path(path_type=Path), help="Result JSON.")
        )
    return options


#: the folder of pictures every benchmark over a set of images reads
images_option = click.option(
    "--images",
    "images_dir",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Directory of test images (e.g. the 24 Kodak PNGs).",
)


@click.group(
    "bench",
    cls=LazyGroup,
    lazy={"kernels": ("semcodec.bench.kernels", "kernels_command")},
)
def bench() -> None:
    """Benchmarks: rate–distortion (rd) and its result files (compare, merge, report),
    matched-bytes comparison with AVIF (matched), speed and large images, the enhancement
    network's kernels (kernels)."""


@bench.command("rd")
@images_option
@click.option(
    "--codecs",
    default=DEFAULT_CODECS,
    show_default=True,
    help=f"Comma-separated codecs; known: {', '.join(codec_names())}.",
)
@click.option("--qualities", default=None, help="Per-codec settings: 'jpeg:10,50;webp:20,80'.")
@apply_options(_report_options(out=True))
@click.option("--anchor", default="jpeg", show_default=True, help="BD-rate anchor codec.")
@click.option(
    "--crops",
    "crops_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write semcodec-vs-classic crops at matched bpp here.",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Use the first N images.")
@click.option("--model", default="default", show_default=True, help="semcodec model name.")
@click.option("--residual", default="avif", show_default=True, help="semcodec residual backend.")
@effort_option
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="torch threads for semcodec's networks (the speed targets assume 2).",
)
@click.option(
    "--codec-threads",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="AVIF / JPEG XL library threads (libavif's output changes with its thread count).",
)
@click.option(
    "--metrics",
    "metrics_spec",
    default=_DEFAULT_METRICS,
    show_default=True,
    help="Comma-separated quality metrics; known: "
    f"{', '.join(_METRIC_NAMES)}. PSNR and MS-SSIM are always measured. ssimulacra2 needs the "
    "[bench] extra and butteraugli libjxl's butteraugli_main (opt-in: one process per image); "
    "one that is not installed is left out of the results with a note.",
)
@click.option("--progress/--no-progress", default=True, help="Progress bar (TTY only).")
def rd_command(
    images_dir: Path,
    codecs: str,
    qualities: str | None,
    out: Path | None,
    csv_path: Path | None,
    plot: Path | None,
    md_path: Path | None,
    anchor: str,
    crops_dir: Path | None,
    limit: int | None,
    model: str,
    residual: str,
    effort: int,
    threads: int,
    codec_threads: int,
    metrics_spec: str,
    progress: bool,
) -> None:
    """Rate–distortion benchmark: bpp, PSNR, MS-SSIM, SSIMULACRA 2 (and Butteraugli when
    asked for), timings and BD-rates vs an anchor."""
    from semcodec.bench import rd

    metrics = _metric_list(metrics_spec)
    _warn_if_busy(threads)
    names = [c.strip() for c in codecs.split(",") if c.strip()]
    unknown = [c for c in names if c not in codec_names()]
    if unknown:
        raise click.BadParameter(f"unknown codec(s): {', '.join(unknown)}", param_hint="--codecs")
    images = rd.list_images(images_dir, limit)
    if not images:
        raise click.UsageError(f"no images found in {images_dir}")
    result = rd.run_benchmark(
        images,
        names,
        parse_qualities(qualities),
        progress,
        anchor=anchor,
        model=model,
        residual=residual,
        threads=threads,
        codec_threads=codec_threads,
        effort=effort,
        metrics=metrics,
    )
    click.echo(rd.format_table(result))
    _write_outputs(result, out, csv_path, plot, md_path)
    if crops_dir:
        if "semcodec" not in result["aggregate"]:
            click.echo("note: no semcodec results, crops skipped", err=True)
        else:
            paths = rd.crops(result, crops_dir, reference="semcodec")
            click.echo(f"wrote {len(paths)} crop sheets to {crops_dir}", err=True)
    failed = sum(1 for r in result["records"] if r.get("error"))
    if failed:
        click.echo(f"warning: {failed} encode/decode failures (see records[].error)", err=True)
        sys.exit(1)


@bench.command("compare")
@click.argument("old", type=_result_file)
@click.argument("new", type=_result_file)
def compare_command(old: Path, new: Path) -> None:
    """BD-rate of each codec in the NEW result JSON against the same codec in OLD."""
    from semcodec.bench import rd

    rd.compare(old, new)


@bench.command("report")
@click.argument("result_json", metavar="RUN.json", type=_result_file)
@apply_options(_report_options(out=False))
def report_command(
    result_json: Path, csv_path: Path | None, plot: Path | None, md_path: Path | None
) -> None:
    """Print the table of an existing result JSON and write --csv/--plot/--markdown from it."""
    from semcodec.bench import rd

    result = rd.read_json(result_json)
    click.echo(rd.format_table(result))
    _write_outputs(result, None, csv_path, plot, md_path)


@bench.command("merge")
@click.argument("runs", nargs=-1, required=True, metavar="RUN.json...", type=_result_file)
@click.option("--anchor", default="jpeg", show_default=True, help="BD-rate anchor codec.")
@apply_options(_report_options(out=True))
def merge_command(
    runs: tuple[Path, ...],
    anchor: str,
    out: Path | None,
    csv_path: Path | None,
    plot: Path | None,
    md_path: Path | None,
) -> None:
    """Merge result JSONs over the same images (e.g. codec lanes run in parallel) and write
    --out/--csv/--plot/--markdown from the merge."""
    from semcodec.bench import rd

    try:
        result = rd.merge(runs, anchor)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    click.echo(rd.format_table(result))
    _write_outputs(result, out, csv_path, plot, md_path)


@bench.command("matched")
@images_option
@click.option(
    "--model",
    "models",
    multiple=True,
    default=("default",),
    show_default=True,
    help="semcodec model; repeat to compare several, each against the other codec at its own "
    "bytes.",
)
@click.option(
    "-q",
    "--quality",
    type=click.IntRange(0, 100),
    default=0,
    show_default=True,
    help="semcodec quality (0 = the base layer alone).",
)
@click.option(
    "--against",
    type=click.Choice(["avif", "webp", "jpeg"]),
    default="avif",
    show_default=True,
    help="Codec searched for the largest quality whose file is not larger than semcodec's.",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Use the first N images.")
@click.option(
    "--residual", default="avif", show_default=True, help="Residual backend (quality > 0)."
)
@effort_option
@click.option("--threads", type=click.IntRange(min=1), default=2, show_default=True)
@click.option(
    "--codec-threads",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="AVIF library threads (its output changes with the thread count).",
)
@click.option(
    "--metrics",
    "metrics_spec",
    default=_DEFAULT_METRICS,
    show_default=True,
    help="As for bench rd: PSNR and MS-SSIM always, ssimulacra2 and butteraugli where installed.",
)
@click.option("--out", type=click.Path(path_type=Path), help="Result JSON.")
@click.option(
    "--markdown",
    "md_path",
    type=click.Path(path_type=Path),
    help="Markdown table [default: OUT with suffix .md when --out is given].",
)
@click.option(
    "--crops",
    "crops_dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Write one sheet per image here: original, each model, the other codec at the first "
    "model's matched quality (centre crop).",
)
@click.option(
    "--crop-images",
    default=None,
    metavar="NAMES",
    help="Comma-separated image names (file stems) to make sheets of [default: all].",
)
def matched_command(
    images_dir: Path,
    models: tuple[str, ...],
    quality: int,
    against: str,
    limit: int | None,
    residual: str,
    effort: int,
    threads: int,
    codec_threads: int,
    metrics_spec: str,
    out: Path | None,
    md_path: Path | None,
    crops_dir: Path | None,
    crop_images: str | None,
) -> None:
    """Matched bytes: per image, semcodec at one quality against AVIF (or --against) at the
    largest quality whose file is not larger; bytes, bpp, PSNR, MS-SSIM, SSIMULACRA 2 of both."""
    from semcodec.bench import matched, rd

    metrics = _metric_list(metrics_spec)
    _warn_if_busy(threads)
    images = rd.list_images(images_dir, limit)
    if not images:
        raise click.UsageError(f"no images found in {images_dir}")
    try:
        result = matched.run_matched(
            images,
            list(models),
            setting=quality,
            against=against,
            residual=residual,
            effort=effort,
            threads=threads,
            codec_threads=codec_threads,
            metrics=metrics,
        )
    except RuntimeError as e:
        raise click.ClickException(str(e)) from None
    md = matched.format_markdown(result)
    click.echo(md, nl=False)
    if md_path is None and out is not None:
        md_path = out.with_suffix(".md")
    if out:
        rd.write_json(result, out)
        click.echo(f"wrote {out}", err=True)
    if md_path:
        md_path.parent.mkdir(parents=True, exist_ok=True)
        md_path.write_text(md)
        click.echo(f"wrote {md_path}", err=True)
    if crops_dir:
        names = [n.strip() for n in crop_images.split(",")] if crop_images else None
        paths = matched.crops(result, crops_dir, names)
        click.echo(f"wrote {len(paths)} crop sheets to {crops_dir}", err=True)


def _net_size(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[int, int]:
    """'768x512' → (768, 512), both multiples of 8 (the networks' stride)."""
    try:
        w, h = (int(v) for v in value.lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"expected WxH, got {value!r}") from None
    if w <= 0 or h <= 0 or w % 8 or h % 8:
        raise click.BadParameter(f"size must be positive multiples of 8, got {value!r}")
    return w, h


def _int_list(_ctx: click.Context, _param: click.Parameter, value: str) -> list[int]:
    """'0,50' → [0, 50]."""
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None


@bench.command("speed")
@click.option(
    "--images",
    "images_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Directory of test images.",
)
@click.option(
    "--model",
    default="default",
    show_default=True,
    help="Model (default-arch, the default architecture with random weights, where the default "
    "weights are missing).",
)
@click.option("--limit", type=int, default=None, help="Use the first N images.")
@click.option(
    "--qualities",
    default="0,50",
    show_default=True,
    callback=_int_list,
    help="Comma-separated qualities (0 = base layer only).",
)
@click.option("--threads", type=int, default=2, show_default=True, help="torch threads.")
@click.option(
    "--repeats", type=int, default=3, show_default=True, help="Timed runs after a warm-up."
)
@click.option("--residual", default="avif", show_default=True, help="Residual backend.")
@click.option("--net-size", default="768x512", show_default=True, callback=_net_size, help="WxH.")
@click.option("--no-nets", is_flag=True, help="Skip the networks-alone check.")
@click.option(
    "--no-startup", is_flag=True, help="Skip the start-up check (whole commands on 64x64)."
)
@click.option(
    "--batch/--no-batch",
    default=True,
    show_default=True,
    help="Also time whole batch commands over the images: -j 1, -j 2, --cluster local:2.",
)
@click.option(
    "--batch-quality", type=click.IntRange(0, 100), default=50, show_default=True,
    help="Quality of the batch throughput commands.",
)  # fmt: skip
@click.option(
    "--timeout", type=float, default=1800.0, show_default=True, help="Seconds per child process."
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("bench-out/speed.json"),
    show_default=True,
    help="Result JSON.",
)
def speed_command(
    images_dir: Path,
    model: str,
    limit: int | None,
    qualities: list[int],
    threads: int,
    repeats: int,
    residual: str,
    net_size: tuple[int, int],
    no_nets: bool,
    no_startup: bool,
    batch: bool,
    batch_quality: int,
    timeout: float,
    out: Path,
) -> None:
    """Speed: encode/decode seconds per stage, peak memory, the networks alone and the
    start-up of whole commands on a small file, each configuration in a fresh process."""
    from semcodec.bench import speed

    code = speed.measure_and_write(
        images_dir,
        out=out,
        limit=limit,
        model=model,
        qualities=qualities,
        threads=threads,
        repeats=repeats,
        residual=residual,
        net_size=net_size,
        nets=not no_nets,
        timeout_s=timeout,
        startup=not no_startup,
        batch=(
            speed.ThroughputConfig(quality=batch_quality, residual=residual, timeout_s=timeout)
            if batch
            else None
        ),
    )
    sys.exit(code)


@bench.command("large")
@click.option(
    "--model",
    envvar="SEMCODEC_MODEL",
    default=None,
    help="Model  [default: $SEMCODEC_MODEL, else default if shipped, else default-arch: the "
    "default architecture with random weights]",
)
@click.option("--width", type=int, default=6000, show_default=True)
@click.option("--height", type=int, default=4000, show_default=True)
@click.option("--quality", type=int, default=50, show_default=True)
@click.option("--residual", default="avif", show_default=True)
@click.option(
    "--threads", type=int, default=1, show_default=True, help="torch threads in the children."
)
def large_command(
    model: str | None, width: int, height: int, quality: int, residual: str, threads: int
) -> None:
    """Encode and decode a large photo (6000x4000): time and peak memory per stage, seams."""
    from semcodec.bench import large

    code = large.run_large(
        model, width=width, height=height, quality=quality, residual=residual, threads=threads
    )
    sys.exit(code)


def _warn_if_busy(threads: int) -> None:
    """torch's threads spin: on an oversubscribed CPU more threads are many times slower."""
    try:
        load, cpus = os.getloadavg()[0], len(os.sched_getaffinity(0))
    except (OSError, AttributeError):
        return
    if threads > 1 and load + threads > cpus + 0.5:
        click.echo(
            f"note: CPU busy (load average {load:.1f} on {cpus} CPUs); with --threads {threads} "
            "semcodec's networks can run many times slower, --threads 1 may be faster",
            err=True,
        )


def _write_outputs(
    result: dict, out: Path | None, csv_path: Path | None, plot: Path | None, md: Path | None
) -> None:
    """Write whichever report files were asked for (shared by rd, merge and report)."""
    from semcodec.bench import rd

    if md is None and out is not None:
        md = out.with_suffix(".md")  # the Markdown tables go beside a result JSON by default
    if out:
        rd.write_json(result, out)
        click.echo(f"wrote {out}", err=True)
    if csv_path:
        rd.write_csv(result, csv_path)
        click.echo(f"wrote {csv_path}", err=True)
    if plot:
        rd.plot_rd(result, plot)
        click.echo(f"wrote {plot}", err=True)
    if md:
        md.parent.mkdir(parents=True, exist_ok=True)
        md.write_text(rd.format_markdown(result))
        click.echo(f"wrote {md}", err=True)


@bench.command("roi")
@click.option(
    "--data",
    "data_dir",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="CamVid root (SPLIT.txt lists 'image labels' pairs).",
)
@click.option("--split", default="test", show_default=True, help="test, or train/val to tune.")
@click.option("--every", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N frames.")
@click.option(
    "--classes",
    default="pedestrian,car,bicyclist,signsymbol",
    show_default=True,
    help="ROI classes: the ground truth's regions measured and the codec's --roi.",
)
@click.option("--strength", type=float, default=None, help="--roi-strength  [default: 1]")
@click.option("--model", default="default", show_default=True, help="semcodec model name.")
@click.option("--out", type=click.Path(path_type=Path), help="Result JSON.")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path), help="PSNR-bpp plot (PNG).")
def roi_command(
    data_dir: Path,
    split: str,
    every: int,
    limit: int | None,
    classes: str,
    strength: float | None,
    model: str,
    out: Path | None,
    plot_path: Path | None,
) -> None:
    """Semantic ROI on CamVid with ground-truth regions: rate against ROI, background and
    whole-image PSNR for semcodec --roi, semcodec and the AVIF anchor; BD-rates; recall of the
    ground truth by the codec's ROI; encode seconds with and without it."""
    import json

    from semcodec.bench import roi
    from semcodec.encoder.roi_spec import RoiError, parse_roi

    names = tuple(c.strip().lower() for c in classes.split(",") if c.strip())
    try:
        parse_roi(list(names), strength)
    except RoiError as exc:
        raise click.BadParameter(str(exc), param_hint="--classes/--strength") from None
    cfg = roi.RoiBenchConfig(data_dir, split, every, limit, names, strength, model)
    result = roi.run(cfg, progress=lambda s: click.echo(s, err=True))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
    if plot_path is not None:
        roi.plot(result, plot_path)
    click.echo(roi.summary(result))


@bench.command("front")
@images_option
@click.option(
    "--names",
    default=None,
    help="Comma-separated image file stems to use (e.g. kodim01,kodim03); default: all.",
)
@click.option("--efforts", default="1,3,5,7,9", show_default=True, help="semcodec efforts.")
@click.option("--avif-speeds", default="0,1,2,3,4,5,6,7,8,9", show_default=True,
              help="AVIF (Pillow/libavif) speeds; 6 in 4:2:0, the anchor, always runs.")  # fmt: skip
@click.option("--avif-chroma", default="420,444", show_default=True, help="AVIF chroma layouts.")
@click.option("--jxl-efforts", default="3,7", show_default=True,
              help="JPEG XL efforts (skipped with a note when imagecodecs is not installed).")  # fmt: skip
@click.option("--ungated", default="", help="semcodec efforts also run with gating off (ledger).")
@click.option("--qualities", default="10,30,50,70,90", show_default=True,
              help="Quality settings, the same for semcodec and AVIF (0..100).")  # fmt: skip
@click.option("--jxl-distances", default="8,4,2.5,1.5,1", show_default=True,
              help="JPEG XL Butteraugli distances (its settings in place of qualities).")  # fmt: skip
@click.option("--model", default="default", show_default=True, help="semcodec model name.")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes (each runs one thread; CPU seconds are per process).")  # fmt: skip
@click.option(
    "--metrics",
    "metrics_spec",
    default=_DEFAULT_METRICS,
    show_default=True,
    help="Quality metrics (PSNR and MS-SSIM always; ssimulacra2 where installed).",
)
@click.option("--out", type=click.Path(path_type=Path), help="Result JSON.")
@click.option("--markdown", "md_path", type=click.Path(path_type=Path), help="Markdown tables.")
@click.option("--plot", type=click.Path(path_type=Path), help="BD-rate against CPU plot (PNG).")
@click.option(
    "--with",
    "earlier",
    type=_result_file,
    default=None,
    help="An earlier front run's JSON on the same images and qualities: its configurations "
    "this run does not measure join the tables (e.g. AVIF measured once).",
)
@click.option("--force", is_flag=True, help="Overwrite existing --out/--markdown/--plot files.")
def front_command(
    images_dir: Path,
    names: str | None,
    efforts: str,
    avif_speeds: str,
    avif_chroma: str,
    jxl_efforts: str,
    ungated: str,
    qualities: str,
    jxl_distances: str,
    model: str,
    jobs: int,
    metrics_spec: str,
    out: Path | None,
    md_path: Path | None,
    plot: Path | None,
    earlier: Path | None,
    force: bool,
) -> None:
    """Speed–size front: semcodec's efforts, AVIF speeds (4:2:0, 4:4:4) and JPEG XL on one
    thread each; BD-rates against AVIF speed 6 4:2:0, CPU seconds per image, and how far each
    configuration lies beyond the AVIF front at its own encode CPU (with the map's CPU and
    without it)."""
    from semcodec.bench import front
    from semcodec.bench.quality import plan_metrics
    from semcodec.imageio import list_images

    try:
        cfg = _front_configs(efforts, avif_speeds, avif_chroma, jxl_efforts, ungated)
        quals = front.parse_ints(qualities, 0, 100, "--qualities")
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    images = _named_images(list_images(images_dir), names)
    for path in (out, md_path, plot):
        if path is not None and path.exists() and not force:
            raise click.UsageError(f"{path} exists (not overwritten)")
    prior = _earlier_run(earlier, images, quals)
    plan = plan_metrics(_metric_list(metrics_spec))
    cfg = _drop_jxl(cfg)
    try:
        distances = [float(d) for d in jxl_distances.split(",") if d.strip()]
    except ValueError:
        raise click.UsageError(f"--jxl-distances: not numbers: {jxl_distances!r}") from None
    result = front.run_front(
        images, cfg, quals, list(plan.extras), model=model, jobs=jobs, jxl_distances=distances
    )
    result["metrics"] = plan.info
    if prior is not None:
        result = front.join_earlier(result, prior)
    table, ledger = front.format_markdown(result), front.format_ledger(result)
    click.echo(table)
    click.echo(ledger)
    click.echo(f"run: {result['run_wall_s']:.0f} s wall", err=True)
    _write_front(result, out, md_path, plot, table, ledger)


def _earlier_run(path: Path | None, images: list[Path], qualities: list[int]) -> dict | None:
    """The --with run, refused before any encode unless its images and qualities are these."""
    import json

    if path is None:
        return None
    try:
        prior = json.loads(path.read_text())
        config = prior["config"]
    except (ValueError, KeyError, TypeError):
        raise click.UsageError(f"--with {path}: not a front run's JSON") from None
    if config.get("images") != [str(p) for p in images]:
        raise click.UsageError(f"--with {path}: measured other images")
    if config.get("qualities") != qualities:
        raise click.UsageError(f"--with {path}: measured qualities {config.get('qualities')}")
    return prior


def _front_configs(efforts: str, speeds: str, chroma: str, jxl: str, ungated: str) -> list:
    """The run's configurations from the command's lists (ValueError on a bad value)."""
    from semcodec.bench import front

    return front.configurations(
        front.parse_ints(efforts, 1, 9, "--efforts"),
        front.parse_ints(speeds, 0, 10, "--avif-speeds"),
        [c.strip() for c in chroma.split(",") if c.strip()],
        front.parse_ints(jxl, 1, 10, "--jxl-efforts"),
        front.parse_ints(ungated, 1, 9, "--ungated"),
    )


def _named_images(images: list[Path], names: str | None) -> list[Path]:
    """The images whose stems are listed (all when none are); a missing one is a usage error."""
    if not names:
        if not images:
            raise click.UsageError("no images found")
        return images
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    by_stem = {p.stem: p for p in images}
    missing = [n for n in wanted if n not in by_stem]
    if missing:
        raise click.UsageError(f"no image named {missing[0]} in the folder")
    return [by_stem[n] for n in wanted]


def _drop_jxl(configs: list) -> list:
    """The configurations without JPEG XL where imagecodecs is missing (with one note)."""
    from semcodec.bench.codecs import JxlAdapter

    if not any(c.codec == "jxl" for c in configs):
        return configs
    reason = JxlAdapter().unavailable_reason()
    if reason is None:
        return configs
    click.echo(f"note: JPEG XL left out: {reason}", err=True)
    return [c for c in configs if c.codec != "jxl"]


def _write_front(
    result: dict, out: Path | None, md_path: Path | None, plot: Path | None, *tables: str
) -> None:
    """The result JSON, the Markdown tables and the plot, each where asked."""
    import json

    from semcodec.bench import front
    from semcodec.bench.rd.results import jsonable

    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(jsonable(result), indent=1) + "\n")
    if md_path is not None:
        md_path.parent.mkdir(parents=True, exist_ok=True)
        md_path.write_text("\n\n".join(t for t in tables if t) + "\n")
    if plot is not None and not front.plot_front(result, plot):
        click.echo("note: matplotlib not installed, no plot", err=True)
