"""The speed–size front benchmark (``semcodec bench front``): semcodec's efforts, AVIF at its
speeds in 4:2:0 and 4:4:4 and JPEG XL efforts on one set of images in one run, each on one
thread; BD-rates against AVIF speed 6 4:2:0, CPU seconds per image, the AVIF front (``hull``)
at each configuration's CPU and the distance to it.

Modules by role: ``configs`` (what runs), ``measure`` (one configuration on one image),
``run`` (the worker processes), ``hull`` (the front's arithmetic), ``summary`` (per
configuration) and ``report`` (tables, plot).
"""

from semcodec.bench.front.configs import ANCHOR, Config, configurations, parse_ints
from semcodec.bench.front.hull import beyond, front_at, lower_hull, pareto
from semcodec.bench.front.report import format_ledger, format_markdown, plot_front
from semcodec.bench.front.run import SCHEMA, join_earlier, run_front

__all__ = [
    "ANCHOR",
    "SCHEMA",
    "Config",
    "beyond",
    "configurations",
    "format_ledger",
    "format_markdown",
    "join_earlier",
    "front_at",
    "lower_hull",
    "pareto",
    "parse_ints",
    "plot_front",
    "run_front",
]
