"""Speed benchmark: measuring (``measure``: the run; ``child``: one configuration in its own
process; ``codec_runs``, ``networks``: what a child times; ``summary``: means and targets;
``machine``: the machine measured on), start-up of whole commands (``startup``), whole batches
(``throughput``), reporting (``report``) and the stages and targets both share (``stages``)."""

from __future__ import annotations

from semcodec.bench.speed.child import main
from semcodec.bench.speed.codec_runs import stage_medians
from semcodec.bench.speed.machine import (
    busy_warning,
    default_weights_available,
    library_versions,
    machine_info,
)
from semcodec.bench.speed.measure import SCHEMA, measure_and_write, run_speed
from semcodec.bench.speed.report import format_speed_table
from semcodec.bench.speed.stages import (
    CODEC_TARGET_QUALITY,
    CODEC_TARGETS,
    DECODE_STAGES,
    ENCODE_STAGES,
    TARGETS,
)
from semcodec.bench.speed.throughput import ThroughputConfig, measure_throughput

__all__ = [
    "CODEC_TARGET_QUALITY",
    "CODEC_TARGETS",
    "DECODE_STAGES",
    "ENCODE_STAGES",
    "SCHEMA",
    "TARGETS",
    "ThroughputConfig",
    "busy_warning",
    "default_weights_available",
    "format_speed_table",
    "library_versions",
    "machine_info",
    "main",
    "measure_and_write",
    "measure_throughput",
    "run_speed",
    "stage_medians",
]
