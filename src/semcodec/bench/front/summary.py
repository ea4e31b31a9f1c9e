"""A front run's records summed up per configuration: CPU seconds per image (encode, decode,
the map's own, per stage), BD-rates against the anchor, and where each configuration lies
against the AVIF front at its own CPU, with the map's CPU and without it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from semcodec.bench.front.hull import Point, beyond, front_at, lower_hull
from semcodec.bench.rd.results import aggregate, bd_against

__all__ = ["FRONT_METRICS", "fronts", "summarise"]

#: The BD-rate metrics of the table: the record field each is measured on.
FRONT_METRICS = ("psnr", "msssim_db", "ssimulacra2")


def _mean(values: Sequence[float | None]) -> float | None:
    """Mean of the known values (None when there are none)."""
    known = [float(v) for v in values if v is not None]
    return float(np.mean(known)) if known else None


def _stage_means(records: Sequence[Mapping[str, Any]], field: str) -> dict[str, float] | None:
    """Mean CPU seconds per stage over the records (a stage missing in one counts 0)."""
    rows = [r[field] for r in records if r.get(field)]
    if not rows:
        return None
    names = sorted({k for row in rows for k in row})
    return {k: float(np.mean([row.get(k, 0.0) for row in rows])) for k in names}


def _bd_rates(bd: Mapping[str, Any], name: str) -> dict[str, float | None]:
    """The PCHIP BD-rate of each metric of one configuration (0 for the anchor itself)."""
    entry = bd["codecs"].get(name, {})
    if name == bd["anchor"]:
        return dict.fromkeys(FRONT_METRICS, 0.0)
    return {m: (entry.get(m) or {}).get("pchip", {}).get("bd_rate") for m in FRONT_METRICS}


def fronts(rows: Mapping[str, Mapping[str, Any]]) -> dict[str, list[Point]]:
    """Per metric, the AVIF front: the lower hull of every AVIF configuration's (encode CPU,
    BD-rate), both chroma layouts together (so the better layout of each speed counts)."""
    out: dict[str, list[Point]] = {}
    for m in FRONT_METRICS:
        pts = [
            (r["encode_cpu_s"], r["bd_rate"][m])
            for r in rows.values()
            if r["avif"] and r["encode_cpu_s"] and r["bd_rate"].get(m) is not None
        ]
        out[m] = lower_hull(pts)
    return out


def _against_front(row: dict[str, Any], hulls: Mapping[str, list[Point]]) -> None:
    """The front's value at the row's encode CPU and the points beyond it (``front``,
    ``beyond``), and the same at its CPU without the map's (``front_no_map``, ...)."""
    cpu = row["encode_cpu_s"]
    bare = None if cpu is None else cpu - (row["map_cpu_s"] or 0.0)
    for suffix, at in (("", cpu), ("_no_map", bare)):
        f = {m: None if at is None else front_at(hulls[m], at) for m in FRONT_METRICS}
        row["front" + suffix] = f
        row["beyond" + suffix] = {m: beyond(row["bd_rate"][m], f[m]) for m in FRONT_METRICS}


def summarise(
    records: Sequence[Mapping[str, Any]],
    order: Mapping[str, Sequence[Any]],
    anchor: str,
    avif: Sequence[str],
) -> dict[str, Any]:
    """Per configuration: CPU means, BD-rates, the front's value and the distance to it."""
    ok = [r for r in records if not r.get("error")]
    agg = aggregate(ok, order)
    bd = bd_against(agg, anchor)
    rows: dict[str, dict[str, Any]] = {}
    for name in order:
        rs = [r for r in ok if r["codec"] == name]
        if not rs:
            continue
        rows[name] = {
            "avif": name in avif,
            "n": len(rs),
            "encode_cpu_s": _mean([r.get("encode_cpu_s") for r in rs]),
            "decode_cpu_s": _mean([r.get("decode_cpu_s") for r in rs]),
            "map_cpu_s": _mean([r.get("map_cpu_s") for r in rs]),
            "stages_cpu": _stage_means(rs, "stages_cpu"),
            "decode_stages_cpu": _stage_means(rs, "decode_stages_cpu"),
            "bpp_range": (bd["codecs"].get(name) or {}).get("bpp_range"),
            "bd_rate": _bd_rates(bd, name),
        }
    hulls = fronts(rows)
    for row in rows.values():
        _against_front(row, hulls)
    return {"configurations": rows, "fronts": hulls, "aggregate": agg, "bd": bd}
