"""Run at the start of every Python child of the test suite (tests/conftest.py puts this folder
on PYTHONPATH): when the child imports semcodec's registry, the random test bundles
(tests/testbundles.py) are registered in it, so a `semcodec ... --model tiny` child knows them.
A child that never imports the registry loads nothing more."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from pathlib import Path

_REGISTRY = "semcodec.zoo.registry"
_BUNDLES = Path(__file__).resolve().parents[1] / "testbundles.py"


def _register_test_bundles() -> None:
    """Load tests/testbundles.py by its path (tests/ stays off sys.path) and register them."""
    spec = importlib.util.spec_from_file_location("testbundles", _BUNDLES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["testbundles"] = module
    spec.loader.exec_module(module)
    module.register_test_bundles()


class _AfterRegistry(importlib.abc.MetaPathFinder):
    """Finds the registry as usual and registers the test bundles once it has run."""

    def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201 - importlib's protocol
        if name != _REGISTRY:
            return None
        sys.meta_path.remove(self)  # once, and no recursion in the lookup below
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module) -> None:  # noqa: ANN001 - a module
            run(module)
            _register_test_bundles()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


sys.meta_path.insert(0, _AfterRegistry())
