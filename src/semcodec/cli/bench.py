"""``semcodec bench``: the rate–distortion benchmark as a standalone click command.

Attach to the main CLI with ``cli.add_command(bench)``; it also runs on its own via
``python -m semcodec.bench.cli``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from semcodec.bench.codecs import DEFAULT_CODECS as _DEFAULT_CODECS
from semcodec.bench.codecs import Setting, codec_names
from semcodec.cli import effort_option

DEFAULT_CODECS = ",".join(_DEFAULT_CODECS)


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


@click.command("bench")
@click.option(
    "--images",
    "images_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Directory of test images (e.g. the 24 Kodak PNGs).",
)
@click.option(
    "--codecs",
    default=DEFAULT_CODECS,
    show_default=True,
    help=f"Comma-separated codecs; known: {', '.join(codec_names())}.",
)
@click.option("--qualities", default=None, help="Per-codec settings: 'jpeg:10,50;webp:20,80'.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Result JSON.")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="CSV.")
@click.option("--plot", type=click.Path(path_type=Path), default=None, help="RD plot (PNG).")
@click.option(
    "--markdown",
    "md_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Markdown tables (BD-rates, means, semcodec layers) for docs/benchmarks.md "
    "[default: OUT with suffix .md when --out is given].",
)
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
@click.option("--progress/--no-progress", default=True, help="Progress bar (TTY only).")
@click.option(
    "--compare",
    nargs=2,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    metavar="OLD NEW",
    help="Instead of running: BD-rate of each codec in NEW vs OLD result JSON.",
)
@click.option(
    "--report",
    "report_json",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Instead of running: print the table of an existing result JSON and write "
    "--csv/--plot/--markdown from it.",
)
@click.option(
    "--merge",
    "merge_jsons",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Instead of running: merge result JSONs over the same images (repeat the option; e.g. "
    "codec lanes run in parallel) and write --out/--csv/--plot/--markdown from the merge.",
)
def bench(
    images_dir: Path | None,
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
    progress: bool,
    compare: tuple[Path, Path] | None,
    report_json: Path | None,
    merge_jsons: tuple[Path, ...],
) -> None:
    """Rate–distortion benchmark: bpp, PSNR, MS-SSIM, timings and BD-rates vs an anchor."""
    from semcodec.bench import rd

    if compare:
        rd.compare(compare[0], compare[1])
        return
    if report_json:
        result = rd.read_json(report_json)
        click.echo(rd.format_table(result))
        _write_outputs(result, None, csv_path, plot, md_path)
        return
    if merge_jsons:
        try:
            result = rd.merge(merge_jsons, anchor)
        except ValueError as e:
            raise click.ClickException(str(e)) from None
        click.echo(rd.format_table(result))
        _write_outputs(result, out, csv_path, plot, md_path)
        return
    if images_dir is None:
        raise click.UsageError("--images DIR is required (or use --compare OLD NEW)")
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


def _warn_if_busy(threads: int) -> None:
    """torch's threads spin: on an oversubscribed CPU more threads are many times slower."""
    import os

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
    """Write whichever report files were asked for (shared by a run, --merge and --report)."""
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


if __name__ == "__main__":  # pragma: no cover
    bench()
