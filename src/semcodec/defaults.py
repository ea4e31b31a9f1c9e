"""The product's defaults, each defined once; no heavy imports, so the CLI reads them before torch."""

from __future__ import annotations

DEFAULT_MODEL = "default"  # the shipped bundle (zoo.REGISTRY)
DEFAULT_QUALITY = 50  # -q: 0 is the base layer alone, 100 the most residual bytes
DEFAULT_RESIDUAL = "avif"  # the residual layer's coder (container.ResidualKind)
EFFORTS = range(1, 10)  # -e: encoder time spent for fewer bytes; decoding is the same
DEFAULT_EFFORT = 5
# --chroma: the AVIF residual's chroma layout, 444 (full) or 420 (half-size chroma planes)
CHROMAS = ("444", "420")
DEFAULT_CHROMA = "444"

DEFAULT_CLUSTER_TIMEOUT = 10.0  # --cluster-timeout: seconds a scheduler has to answer
