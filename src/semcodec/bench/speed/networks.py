"""Speed benchmark, the networks alone (child side): segmentation, CompNet and generator
timed without the codec around them.

The networks-alone check times the segmentation network (``logits_lowres``), CompNet and the
generator on a 768×512 input in fp32 and bf16 autocast (and the generator's integer table),
against the targets of the speed issues (segmentation ≤ 1.5 s, generator ≤ 0.5 s, at 2
threads).  Without trained default weights the default *architecture* is also timed with
random weights (speed does not depend on weight values), next to the model actually used.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from semcodec.bench.common import default_arch_model
from semcodec.bench.speed.timing import time_call

__all__ = ["worker_nets"]


def worker_nets(spec: dict[str, Any]) -> dict[str, Any]:
    """Segmentation, CompNet and generator alone on one input size, fp32 and bf16 autocast."""
    import torch

    torch.set_num_threads(spec["threads"])
    from semcodec.models.compnet import dequantize
    from semcodec.zoo.bundles import load_bundle

    t0 = time.perf_counter()
    b = load_bundle(default_arch_model() if spec["arch"] else spec["model"])
    seg, comp, gen = b.seg, b.comp, b.gen
    load_s = time.perf_counter() - t0
    w, h = spec["size"]
    f = 8  # map and compact resolution: 1/8 (Codec.MULTIPLE)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(1, 3, h, w, generator=g)
    labels = torch.randint(0, comp.cfg.num_classes, (1, h // f, w // f), generator=g)
    levels = comp.cfg.levels
    sym = torch.randint(0, levels, (1, comp.cfg.out_channels, h // f, w // f), generator=g)
    t = dequantize(sym, levels)
    from semcodec import runtime
    from semcodec.zoo.bundles import random_integer_generator

    # what the decoder runs: the bundle's integer generator, or one made from its weights
    integer = b.integer_generator
    if integer is None:
        integer = random_integer_generator(gen, levels)
    calls: dict[str, Callable[[], Any]] = {
        "segmentation": lambda: seg.logits_lowres(x),
        "compnet": lambda: comp(x, labels),
        "generator": lambda: gen(t, labels, (h, w)),
    }
    native = runtime.native_bf16()
    precisions = ("fp32", "bf16") if native else ("fp32",)  # emulated bf16 is not timed
    results: dict[str, dict[str, float | None]] = {}
    cpu: dict[str, dict[str, float | None]] = {}
    runs: dict[str, dict[str, list[float]]] = {}
    with torch.no_grad():
        for net, fn in calls.items():
            results[net], cpu[net], runs[net] = {"bf16": None}, {"bf16": None}, {}
            for prec in precisions:
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bf16"):
                    med, med_cpu, rs = time_call(fn, spec["repeats"])
                results[net][prec] = round(med, 6)
                cpu[net][prec] = round(med_cpu, 6)
                runs[net][prec] = [round(r, 6) for r in rs]
        if integer is not None:
            med, med_cpu, rs = time_call(lambda: integer.forward(sym, labels), spec["repeats"])
            results["generator"]["integer"] = round(med, 6)
            cpu["generator"]["integer"] = round(med_cpu, 6)
            runs["generator"]["integer"] = [round(r, 6) for r in rs]
    use = runtime.bf16_decision().use
    precision = {"segmentation": "bf16" if use else "fp32", "compnet": "bf16" if use else "fp32",
                 "generator": "integer" if integer is not None else "fp32"}  # fmt: skip
    return {
        "label": spec["label"],
        "model": spec["model"],
        "arch": spec["arch"],
        "weights": "random weights, speed only" if spec["arch"] else "weights as loaded",
        "size": [w, h],
        "threads": torch.get_num_threads(),
        "load_s": round(load_s, 4),
        "seconds": results,
        "cpu_seconds": cpu,
        "runs": runs,
        "codec_precision": precision,
        "runtime": runtime.diagnostics(),
        "error": None,
    }
