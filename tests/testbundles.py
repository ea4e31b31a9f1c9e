"""The random test bundles: seeded random networks without a weights file, for the tests only.

The product's registry (zoo/registry.py) names the shipped bundles alone, so `semcodec models`
and the model errors never offer these. tests/conftest.py registers them in the test process,
and tests/childsite/sitecustomize.py in every Python child the tests start (a `semcodec ...
--model tiny` process, a pool's or a cluster's worker); fuzz/fuzz_decoders.py registers them too.
"""

from __future__ import annotations

from semcodec.zoo.registry import BundleSpec, register

TEST_BUNDLES = (
    # the tiny random-initialised bundle: the pipeline without trained weights
    BundleSpec("tiny", seg="tiny", compnet="tiny", generator="tiny", weights=None, seed=1234),
    # "tiny" with a random enhancement network and UNKNOWN in its map: tests of the ENHANCE
    # layer's paths and of the 12-symbol map
    BundleSpec(
        "tiny-enh",
        seg="tiny-u",
        compnet="tiny",
        generator="tiny",
        weights=None,
        seed=1234,
        enhance="tiny",
    ),
)


def register_test_bundles() -> None:
    """Add the test bundles to this process's registry (again: no change)."""
    for spec in TEST_BUNDLES:
        register(spec)
