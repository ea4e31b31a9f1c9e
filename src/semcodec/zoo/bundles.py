"""Model zoo: a bundle name maps to its network configurations and a weights file with a content hash.

A bundle is everything both ends of the codec must share: segmentation net, CompNet, generator
and the integer table of the compact context model. Files record the bundle's name and hash; a
decoder refuses a file whose hash does not match the bundle it has.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from semcodec.decoder.parts import DecoderParts, save_parts
from semcodec.defaults import DEFAULT_MODEL
from semcodec.errors import ModelError
from semcodec.format.compact import validate_table
from semcodec.intgrid import generator_torch
from semcodec.intgrid.generator_torch import TorchIntegerGenerator
from semcodec.models.compnet import COMPNET_CONFIGS, CompNet, CompNetConfig
from semcodec.models.context_model import ContextModel
from semcodec.models.enhance import EnhanceNet, build_enhance, to_integer
from semcodec.models.generator import (
    GENERATOR_CONFIGS,
    Generator,
    has_integer_layout,
    synthetic_calibration,
)
from semcodec.models.generator import to_integer as generator_to_integer
from semcodec.models.segmentation import SEG_CONFIGS, SegConfig, SegNet, with_class_bias
from semcodec.runtime import single_thread
from semcodec.zoo.registry import (
    REGISTRY,
    BundleSpec,
    pack_weights,
    read_weights,
    state_hash,
    weights_path,
)

FORMAT = 1
# the one key of a weights file's free-form ``info`` that changes behaviour (seg_class_bias)
SEG_CLASS_BIAS = "seg_class_bias"


class Deferred:
    """A network not built yet: ``make`` builds it when the bundle is first asked for it."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


class _Built:
    """A bundle attribute that builds its network on first read (and can be replaced)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, bundle: ModelBundle | None, owner: type | None = None) -> Any:
        if bundle is None:
            return self
        return bundle.built(self.name)

    def __set__(self, bundle: ModelBundle, value: Any) -> None:
        bundle._nets[self.name] = value


_BUILDING = threading.Lock()  # one network built at a time (bundles stay deep-copyable)


class ModelBundle:
    """Networks plus the integer entropy table; `hash` is what files record.

    A network given as ``Deferred`` is built on first use, so a command pays only for the
    networks it runs (an encode that codes the image itself never builds CompNet or the
    generator).
    """

    seg: SegNet = _Built()  # type: ignore[assignment]
    comp: CompNet = _Built()  # type: ignore[assignment]
    gen: Generator = _Built()  # type: ignore[assignment]
    # the integer generator the decoder runs (intgrid/generator_torch.py)
    integer_generator: TorchIntegerGenerator | None = _Built()  # type: ignore[assignment]
    # the enhancement network, float (training, reference)
    enhancer: EnhanceNet | None = _Built()  # type: ignore[assignment]

    def __init__(
        self,
        spec: BundleSpec,
        seg: SegNet | Deferred,
        comp: CompNet | Deferred,
        gen: Generator | Deferred,
        compact_table: np.ndarray,
        hash: str,
        info: dict,
        integer_generator: TorchIntegerGenerator | Deferred | None = None,
        enhancer: EnhanceNet | Deferred | None = None,
        enh_table: dict[str, np.ndarray] | None = None,  # its integer table (intgrid/enhancer.py)
    ) -> None:
        self.spec, self.compact_table, self.hash, self.info = spec, compact_table, hash, info
        self.enh_table = enh_table
        self._nets: dict[str, Any] = {
            "seg": seg,
            "comp": comp,
            "gen": gen,
            "integer_generator": integer_generator,
            "enhancer": enhancer,
        }

    def built(self, key: str) -> Any:
        """The network ``key``, built now if it was deferred (once, whichever thread asks)."""
        value = self._nets[key]
        if isinstance(value, Deferred):
            # one thread: building is memory-bound, and on a busy machine a second thread's
            # waits made the segmentation network's 0.05 s load take up to 0.9 s
            with _BUILDING, single_thread():
                value = self._nets[key]
                if isinstance(value, Deferred):
                    value = self._nets[key] = value.make()
        return value

    def is_built(self, key: str) -> bool:
        """Whether network ``key`` exists yet (tests of what a command loads)."""
        return not isinstance(self._nets[key], Deferred)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def seg_class_bias(self) -> dict[str, float]:
        """The map network's per-class logit offsets this weights file records (applied at load
        as SegConfig.class_bias): typed, so no caller reads ``info`` for behaviour."""
        return seg_class_bias(self.info)

    def _comp_config(self) -> CompNetConfig:
        """CompNet's configuration, without building it."""
        comp = self._nets["comp"]
        return COMPNET_CONFIGS[self.spec.compnet] if isinstance(comp, Deferred) else comp.cfg

    @property
    def levels(self) -> int:
        return self._comp_config().levels

    @property
    def num_classes(self) -> int:
        return self._comp_config().num_classes

    @property
    def channels(self) -> int:
        """Channels of the compact representation."""
        return self._comp_config().out_channels

    @property
    def map_symbols(self) -> int:
        """The map's alphabet: the classes, and UNKNOWN where the network may say so."""
        seg = self._nets["seg"]
        cfg = SEG_CONFIGS[self.spec.seg] if isinstance(seg, Deferred) else seg.cfg
        return self.num_classes + (1 if cfg.unknown_below > 0 else 0)


def _build(spec: BundleSpec) -> tuple[SegNet, CompNet, Generator, ContextModel]:
    """Construct the networks of a spec (random initialisation, seeded)."""
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(spec.seed)
    try:
        seg = SegNet(SEG_CONFIGS[spec.seg])
        comp = CompNet(COMPNET_CONFIGS[spec.compnet])
        gen = Generator(GENERATOR_CONFIGS[spec.generator])
        ctx = ContextModel(comp.cfg.out_channels, comp.cfg.levels)
    finally:
        torch.random.set_rng_state(gen_state)
    return seg, comp, gen, ctx


def serialize_bundle(
    spec: BundleSpec,
    seg: SegNet,
    comp: CompNet,
    gen: Generator,
    table: np.ndarray,
    info: dict | None = None,
    half: bool = True,
    generator_table: dict[str, torch.Tensor] | None = None,
    enhancer: EnhanceNet | None = None,
    enh_table: dict[str, np.ndarray] | None = None,
) -> bytes:
    """The weights file: fp16 state dicts, the int32 compact table, the configurations and
    the integer generator table the decoder runs (where the generator has one)."""

    def pack(m: torch.nn.Module) -> dict[str, torch.Tensor]:
        return {
            k: (v.half() if half and v.is_floating_point() else v).contiguous()
            for k, v in m.state_dict().items()
        }

    obj = {
        "format": FORMAT,
        "spec": spec.to_json(),
        "info": json.dumps(info or {}),
        "seg": pack(seg),
        "comp": pack(comp),
        "gen": pack(gen),
        "compact_table": torch.from_numpy(table.astype(np.int32)),
    }
    if generator_table is not None:  # "gen_fixed": the key shipped files (and hashes) have
        packed = generator_torch.pack_state(generator_table)
        obj["gen_fixed"] = {k: v.contiguous() for k, v in packed.items()}
    if enhancer is not None:
        obj["enhance"] = pack(enhancer)
    if enh_table is not None:
        obj["enh_fixed"] = {
            k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in enh_table.items()
        }
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def save_bundle(
    path: Path,
    spec: BundleSpec,
    seg,
    comp,
    gen,
    table,
    info=None,
    generator_table=None,
    enhancer: EnhanceNet | None = None,
    enh_table: dict[str, np.ndarray] | None = None,
) -> Path:
    """Write a bundle as '<dir>/<name>-<sha8>.pt' and return the path."""
    data = serialize_bundle(
        spec,
        seg,
        comp,
        gen,
        table,
        info,
        generator_table=generator_table,
        enhancer=enhancer,
        enh_table=enh_table,
    )
    path = Path(path)
    target = path / f"{spec.name}-{state_hash(data)[:8]}.pt" if path.is_dir() else path
    target.write_bytes(pack_weights(data))
    return target


def save_bundle_in(folder: Path, *parts, **kwargs) -> Path:
    """save_bundle into '<folder>/<name>-<sha8>.pt', the folder made where it is not there
    yet: save_bundle takes a path that is not a folder as the file to write."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return save_bundle(folder, *parts, **kwargs)


def _load_file(path: Path, spec: BundleSpec | None) -> ModelBundle:
    """Load weights without executing code (torch.load weights_only=True) and check them;
    each network is built from its state on first use."""
    try:
        data = read_weights(path)
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a bad weights file
        raise ModelError(f"cannot load model weights {path.name}: {exc}") from None
    if obj.get("format") != FORMAT:
        raise ModelError(f"model weights {path.name}: unsupported format {obj.get('format')!r}")
    file_spec = BundleSpec.from_json(obj["spec"])
    # the networks are the file's; a registered name keeps its name and weights file
    spec = replace(file_spec, name=spec.name, weights=spec.weights) if spec else file_spec
    missing = [
        f"{kind} {name!r}"
        for kind, name, known in (
            ("segmentation", spec.seg, SEG_CONFIGS),
            ("compnet", spec.compnet, COMPNET_CONFIGS),
            ("generator", spec.generator, GENERATOR_CONFIGS),
        )
        if name not in known
    ]
    if missing:
        raise ModelError(f"model weights {path.name}: unknown configuration {', '.join(missing)}")
    comp_cfg = COMPNET_CONFIGS[spec.compnet]
    table = obj["compact_table"].numpy().astype(np.int32)
    validate_table(table, comp_cfg.out_channels, comp_cfg.levels)
    h = state_hash(data)
    if spec.weights and not spec.weights.removesuffix(".pt").endswith(h[:8]):
        raise ModelError(f"model weights {path.name} do not match their recorded hash {h[:8]}")
    enh_table = _load_enh_table(spec, obj, path.name)
    name = path.name
    info = json.loads(obj["info"])
    seg_cfg = _seg_config(spec.seg, info, name)
    return ModelBundle(
        spec,
        _network_from_state(obj, "seg", lambda: SegNet(seg_cfg), name),
        _network_from_state(obj, "comp", lambda: CompNet(comp_cfg), name),
        _network_from_state(obj, "gen", lambda: Generator(GENERATOR_CONFIGS[spec.generator]), name),
        table,
        h,
        info,
        _from_state(obj, "gen_fixed", lambda st: _load_integer_generator(st, name)),
        _from_state(obj, "enhance", lambda st: _load_enhancer(spec, st, name)),
        enh_table,
    )


def _from_state(obj: dict, key: str, make: Callable[[Any], Any]) -> Deferred:
    """What ``make`` builds from the weights file's ``obj[key]``, on first use; the stored
    state is then dropped, so the process keeps only the built network."""

    def build() -> Any:
        out = make(obj.get(key))
        obj.pop(key, None)
        return out

    return Deferred(build)


def seg_class_bias(info: dict) -> dict[str, float]:
    """The class offsets (class name -> logit offset; {}: none) a weights file's info records."""
    return {str(k): float(v) for k, v in (info.get(SEG_CLASS_BIAS) or {}).items()}


def _seg_config(config: str, info: dict, name: str) -> SegConfig:
    """The map network's registered configuration with the class offsets its file records."""
    try:
        return with_class_bias(SEG_CONFIGS[config], seg_class_bias(info))
    except (ValueError, TypeError, AttributeError) as exc:
        raise ModelError(f"model weights {name}: bad segmentation class offsets ({exc})") from None


def _network_from_state(
    obj: dict, key: str, build: Callable[[], torch.nn.Module], name: str
) -> Deferred:
    """A network of the weights file, built with its stored weights (fp32, eval mode) on first
    use."""

    def load(state: dict | None) -> torch.nn.Module:
        net = build()
        try:
            if state is None:
                raise KeyError(key)
            net.load_state_dict(
                {k: v.float() if v.is_floating_point() else v for k, v in state.items()}
            )
        except (KeyError, RuntimeError) as exc:
            raise ModelError(f"model weights {name}: bad {key} network ({exc})") from None
        return net.eval()

    return _from_state(obj, key, load)


def _load_enh_table(spec: BundleSpec, obj: dict, name: str) -> dict[str, np.ndarray] | None:
    """The bundle's integer enhancement table (checked), if it has one: the encoder fits it."""
    if not spec.enhance:
        return None
    from semcodec.intgrid.enhancer import check_enh_table

    try:
        table = {k: v.numpy() for k, v in obj["enh_fixed"].items()}
        check_enh_table(table)
    except (KeyError, ValueError, RuntimeError) as exc:
        raise ModelError(f"model weights {name}: bad enhancement network ({exc})") from None
    return table


def _load_enhancer(spec: BundleSpec, state: dict | None, name: str) -> EnhanceNet | None:
    """The bundle's float enhancement network (training and reference), if it has one."""
    if not spec.enhance:
        return None
    try:
        if state is None:
            raise KeyError("enhance")
        net = build_enhance(spec.enhance)
        net.load_state_dict({k: v.float() for k, v in state.items()})
    except (KeyError, ValueError, RuntimeError) as exc:
        raise ModelError(f"model weights {name}: bad enhancement network ({exc})") from None
    return net.eval()


def _load_integer_generator(state: dict | None, name: str) -> TorchIntegerGenerator | None:
    """The stored integer generator table, checked against fp32's exact range."""
    if state is None:
        return None
    try:
        integer = TorchIntegerGenerator(generator_torch.unpack_state(state))
        integer.check()
    except (KeyError, ValueError, RuntimeError) as exc:
        raise ModelError(f"model weights {name}: bad integer generator table ({exc})") from None
    return integer


def random_integer_generator(
    gen: Generator, levels: int, seed: int = 0
) -> TorchIntegerGenerator | None:
    """The integer generator of a bundle without photos: grids from seeded synthetic inputs."""
    if not has_integer_layout(gen):
        return None
    cal = synthetic_calibration(gen.cfg.compact_channels, levels, gen.cfg.num_classes, seed=seed)
    return generator_to_integer(gen, levels, cal)


def random_enhancer(name: str, seed: int) -> tuple[EnhanceNet, dict[str, np.ndarray]]:
    """A seeded random enhancement network whose correction is not zero, and its table."""
    g = torch.Generator().manual_seed(seed)
    net = build_enhance(name)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.05)
    cal = []
    for _ in range(2):
        decoded = torch.randint(0, 256, (1, 3, 32, 48), generator=g).float()
        labels = torch.randint(0, net.cfg.classes + 1, (1, 4, 6), generator=g)
        cal.append((decoded, labels, torch.tensor([50])))
    return net.eval(), to_integer(net, cal)


def _load_random(spec: BundleSpec) -> ModelBundle:
    """A seeded random-initialised bundle (tests); its hash covers the initial weights."""
    seg, comp, gen, ctx = _build(spec)
    table = ctx.integer_table()
    integer = random_integer_generator(gen.eval(), comp.cfg.levels, spec.seed)
    state = integer.state if integer is not None else None
    enh, enh_table = random_enhancer(spec.enhance, spec.seed) if spec.enhance else (None, None)
    h = state_hash(
        serialize_bundle(
            spec,
            seg,
            comp,
            gen,
            table,
            half=False,
            generator_table=state,
            enhancer=enh,
            enh_table=enh_table,
        )
    )
    return ModelBundle(
        spec, seg.eval(), comp.eval(), gen.eval(), table, h, {}, integer, enh, enh_table
    )


_CACHE: dict[str, ModelBundle] = {}
_LOCK = threading.Lock()


def load_bundle(name_or_path: str = DEFAULT_MODEL) -> ModelBundle:
    """A registered bundle by name, or a weights file by path; cached per process."""
    with _LOCK:
        if name_or_path in _CACHE:
            return _CACHE[name_or_path]
        if name_or_path in REGISTRY:
            spec, path = REGISTRY[name_or_path], weights_path(name_or_path)
            if path is None:
                bundle = _load_random(spec)
            elif not path.exists():
                raise ModelError(f"weights file {spec.weights} of model {spec.name!r} is missing")
            else:
                bundle = _load_file(path, spec)
        elif Path(name_or_path).is_file():
            bundle = _load_file(Path(name_or_path), None)
        else:
            known = ", ".join(sorted(REGISTRY))
            raise ModelError(f"unknown model {name_or_path!r} (known: {known})")
        _CACHE[name_or_path] = bundle
        return bundle


def decoder_parts(
    bundle: ModelBundle, released: str = "", with_generator: bool = True
) -> DecoderParts:
    """What decoding this bundle's files needs (parts.py), taken from the loaded bundle;
    without the generator table for a decoder given its own generator (nothing built for it)."""
    gen = None
    if with_generator and bundle.integer_generator is not None:
        gen = {k: v.numpy() for k, v in bundle.integer_generator.state.items()}
    return DecoderParts(
        name=bundle.name,
        hash=bundle.hash,
        released=released,
        levels=bundle.levels,
        channels=bundle.channels,
        num_classes=bundle.map_symbols,
        compact_table=bundle.compact_table,
        generator=gen,
        enhancer=bundle.enh_table,
    )


def write_decoder_parts(bundle: ModelBundle, folder: Path, released: str) -> Path:
    """Install a bundle's decoder parts as '<folder>/<name>-<hash8>.npz' (at release)."""
    if bundle.integer_generator is None:
        raise ModelError(f"model {bundle.name!r} has no integer generator: nothing to install")
    parts = decoder_parts(bundle, released)
    state = bundle.integer_generator.state
    packed = {k: v.numpy() for k, v in generator_torch.pack_state(state).items()}
    folder.mkdir(parents=True, exist_ok=True)
    return save_parts(folder / f"{parts.release}.npz", parts, packed)
