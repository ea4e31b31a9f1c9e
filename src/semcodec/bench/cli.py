"""``semcodec bench``: the rate–distortion benchmark as a standalone click command.

Attach to the main CLI with ``cli.add_command(bench)``; it also runs on its own via
``python -m semcodec.bench.cli``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from semcodec.bench.codecs import Setting, codec_names

DEFAULT_CODECS = "jpeg,webp,jpeg2000,avif,jxl"


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
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--progress/--no-progress", default=True, help="Progress bar (TTY only).")
@click.option(
    "--compare",
    nargs=2,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    metavar="OLD NEW",
    help="Instead of running: BD-rate of each codec in NEW vs OLD result JSON.",
)
def bench(
    images_dir: Path | None,
    codecs: str,
    qualities: str | None,
    out: Path | None,
    csv_path: Path | None,
    plot: Path | None,
    anchor: str,
    crops_dir: Path | None,
    limit: int | None,
    model: str,
    residual: str,
    threads: int,
    progress: bool,
    compare: tuple[Path, Path] | None,
) -> None:
    """Rate–distortion benchmark: bpp, PSNR, MS-SSIM, timings and BD-rates vs an anchor."""
    from semcodec.bench import rd

    if compare:
        rd.compare(compare[0], compare[1])
        return
    if images_dir is None:
        raise click.UsageError("--images DIR is required (or use --compare OLD NEW)")
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
    )
    click.echo(rd.format_table(result))
    if out:
        rd.write_json(result, out)
        click.echo(f"wrote {out}", err=True)
    if csv_path:
        rd.write_csv(result, csv_path)
        click.echo(f"wrote {csv_path}", err=True)
    if plot:
        rd.plot_rd(result, plot)
        click.echo(f"wrote {plot}", err=True)
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


if __name__ == "__main__":  # pragma: no cover
    bench()
