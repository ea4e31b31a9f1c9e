"""Rate–distortion benchmark: run codecs over images, aggregate, BD-rates, table, JSON, CSV, plot.

Modules by role: ``run`` (measuring), ``results`` (aggregates, BD-rates, merge, compare, JSON
and CSV files) and ``report`` (text and Markdown tables, plot, crops); this package re-exports
their public names.

``run_benchmark`` returns a JSON-ready dict (non-finite floats are stored as ``null``).  The
same dict is what ``write_json`` stores and ``compare``/``crops`` read back.

JSON schema (``"schema": "semcodec-bench/1"``)::

    {
      "schema": "semcodec-bench/1",
      "created": "2025-01-01T12:00:00Z",            # UTC, ISO 8601
      "environment": {"python": str, "platform": str, "numpy": str, "pillow": str,
                      "torch": str, "pytorch_msssim": str, "imagecodecs": str | null,
                      "scipy": str | null, "ssimulacra2": str | null,
                      "libraries": {"libjpeg": str | null, "libwebp": ..., "openjpeg": ...,
                                    "libavif": ..., "libjpeg_turbo": ..., "avif_codecs": ...,
                                    "libjxl": ...}},
      "config": {"anchor": "jpeg", "codecs": [str, ...], "qualities": {codec: [setting, ...]},
                 "model": str, "residual": str,
                 "threads": int,                              # torch: semcodec nets, MS-SSIM
                 "codec_threads": int,                        # AVIF / JPEG XL libraries
                 "metrics": ["psnr", "ms-ssim", "ssimulacra2", ...]},  # measured
      "codecs": {codec: {"status": "ok" | "skipped", "reason": str | null,
                         "description": str, "setting": "quality" | "ratio" | "distance",
                         "settings": [setting, ...], "default_settings": [...], ...}},
      "metrics": {name: {"status": "ok" | "skipped",  # optional metrics asked for
                         "reason": str | null, "description": str, ...}},
      "images": [{"name": str, "path": str, "width": int, "height": int,
                  "msssim_scales": int}],                     # 5 unless the image is small
      "records": [{"image": str, "codec": str, "setting": int | float | str,
                   "bytes": int, "bpp": float,                 # bpp = 8 * bytes / (W * H)
                   "psnr": float | null, "msssim": float | null, "msssim_db": float | null,
                   "msssim_scales": int, "encode_s": float, "decode_s": float,
                   "ssimulacra2": float, "butteraugli": float,  # only when measured
                   "layer_bytes": {"map": int, "compact": int, "residual": int,
                                   "container": int} | null,  # semcodec codecs only
                   "mean_shift": [float, float, float] | null,  # decoded − original, R G B
                   "error": str | null}],                      # one per image x codec x setting
      "aggregate": {codec: [{"setting": ..., "n": int,        # images averaged (errors excluded)
                             "bpp": float, "psnr": float, "msssim": float,
                             "msssim_db": float,              # mean of per-image dB values
                             "encode_s": float, "decode_s": float,    # arithmetic means
                             "ssimulacra2": float | null, ...,  # when measured
                             "layer_bpp": {"map": float, ...} | null}]},  # mean bpp per layer
      "bd": {"anchor": str, "min_points": int, "reason": str | null,
             "codecs": {codec: {"bpp_range": [min, max],      # of the aggregated curve
                                "psnr" | "msssim_db" | "ssimulacra2": {  # no Butteraugli BD
                                  "cubic" | "pchip": {
                                    "bd_rate": float | null,  # percent vs anchor, < 0 is better
                                    "reason": str | null,     # why bd_rate is null
                                    "interval": [lo, hi] | null,   # overlapping quality range
                                    "bd_dist": float | null,  # dB gain at equal rate
                                    "bd_dist_reason": str | null}}}}}
    }

BD values are computed on the aggregated curves (mean bpp vs mean quality per setting), the
usual practice for Kodak-style image sets.
"""

from __future__ import annotations

from semcodec.bench.rd.report import crops, format_markdown, format_table, plot_rd
from semcodec.bench.rd.results import (
    CSV_FIELDS,
    LAYERS,
    METRICS,
    SCHEMA,
    aggregate,
    bd_against,
    bpp,
    compare,
    merge,
    read_json,
    write_csv,
    write_json,
)
from semcodec.bench.rd.run import METRIC_THREADS, load_rgb, run_benchmark
from semcodec.imageio import IMAGE_SUFFIXES, list_images

__all__ = [
    "SCHEMA",
    "METRICS",
    "METRIC_THREADS",
    "CSV_FIELDS",
    "IMAGE_SUFFIXES",
    "list_images",
    "load_rgb",
    "bpp",
    "run_benchmark",
    "aggregate",
    "bd_against",
    "format_table",
    "write_json",
    "read_json",
    "write_csv",
    "plot_rd",
    "merge",
    "compare",
    "crops",
    "format_markdown",
    "LAYERS",
]
