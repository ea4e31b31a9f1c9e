"""Shared training plumbing: distributed set-up, device, checkpoints, progress line."""

from __future__ import annotations

import io
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import click
import torch
import torch.distributed as dist

from semcodec import runtime


def setup_distributed() -> tuple[int, int, torch.device]:
    """Initialise torchrun's process group if present; returns (rank, world size, device)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return rank, world, device


def cleanup_distributed() -> None:
    """Tear down the process group so torchrun exits cleanly."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def autocast(device: torch.device, enabled: bool):
    """bf16 autocast on CUDA, and on CPUs whose bf16 is native; a no-op when disabled.

    On a CPU without native bf16 autocast would be emulated (about 75x slower than fp32), so
    it is skipped there unless SEMCODEC_BF16=1 forces it (runtime.bf16_decision).
    """
    if not enabled or (device.type == "cpu" and not runtime.bf16_decision().use):
        return nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def poly_lr(base: float, step: int, total: int, power: float = 0.9) -> float:
    """B12's poly schedule l_t = l_0 (1 - t/T)^power."""
    return base * max(0.0, 1.0 - step / max(1, total)) ** power


def save_checkpoint(path: Path, state: dict) -> None:
    """Atomic checkpoint write so an interrupted save never destroys the previous one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def _load_weights(path: Path) -> dict:
    """A training checkpoint or a model bundle (packed or not), tensors and containers only."""
    from semcodec.zoo.registry import read_weights

    return torch.load(io.BytesIO(read_weights(path)), map_location="cpu", weights_only=True)


def ema_start(state: dict | None, net: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The weights' moving average to go on with: a checkpoint's, or (a run that kept none,
    or a fresh one) the network's weights now."""
    saved = state.get("ema") if state is not None else None
    return {k: v.detach().clone() for k, v in (saved or net.state_dict()).items()}


def ema_update(avg: dict[str, torch.Tensor], net: torch.nn.Module, decay: float) -> None:
    """One step of the weights' moving average: it smooths the last steps' noise, which at a
    high learning rate moves held-out scores from one evaluation to the next."""
    with torch.no_grad():
        for k, v in net.state_dict().items():
            if v.is_floating_point():
                avg[k].mul_(decay).add_(v.detach(), alpha=1 - decay)
            else:
                avg[k].copy_(v)


def averaged_copy(net: torch.nn.Module, avg: dict[str, torch.Tensor]) -> torch.nn.Module:
    """A copy of the network holding the averaged weights (for evaluation and export)."""
    import copy

    twin = copy.deepcopy(net).cpu()
    twin.load_state_dict({k: v.cpu() for k, v in avg.items()})
    return twin


def trained_weights(state: dict, average: bool = True) -> tuple[dict[str, torch.Tensor], bool]:
    """A checkpoint's weights to ship or evaluate: its moving average where the run kept one
    (and ``average``), else the last step's; and whether they are the average."""
    averaged = average and "ema" in state
    return (state["ema"] if averaged else state["model"]), averaged


@dataclass
class SegSource:
    """What a map network's checkpoint or bundle brings: weights, steps, hours, the start of
    its training ('imagenet' or 'random' for a run of its own, otherwise what it fine-tuned;
    '' where it does not say: a bundle file, or a checkpoint older than the record, taken as
    a fine-tune) and its configuration name."""

    weights: dict[str, torch.Tensor]
    steps: int
    hours: float
    start: str
    config: str

    def net(self):
        """The network these weights belong to, in float32 (no class offsets: a bundle's are
        in its configuration, not its weights)."""
        from semcodec.models.segmentation import build_segnet

        net = build_segnet(self.config)
        net.load_state_dict(
            {k: v.float() if v.is_floating_point() else v for k, v in self.weights.items()}
        )
        return net


def read_seg_source(path: Path, average: bool = True) -> SegSource:
    """A map network's weights, steps, hours, start and configuration, read once (its moving
    average where a checkpoint kept one, unless ``average`` is off)."""
    state = _load_weights(path)
    if "model" in state:
        weights, _ = trained_weights(state, average)
        steps, hours = int(state.get("step", 0)), float(state.get("hours", 0.0))
        cfg = _recipe(state)
        return SegSource(weights, steps, hours, _start_of(cfg), str(cfg.get("model", "default")))
    from semcodec.zoo.bundles import load_bundle  # a bundle: loaded and checked by the zoo

    bundle = load_bundle(str(path))
    info = bundle.info
    steps, hours = int(info.get("seg_steps", 0)), float(info.get("seg_hours", 0.0))
    return SegSource(bundle.seg.state_dict(), steps, hours, "", bundle.spec.seg)


def _recipe(state: dict) -> dict:
    """The recipe a training checkpoint records (empty for a bundle file)."""
    import json

    return json.loads(state.get("config", "{}")) if "model" in state else {}


def seg_net_of(path: Path, average: bool = True):
    """The map network of a training checkpoint (its moving average where it kept one, unless
    ``average`` is off; no class offsets: a release fits them) or of a bundle file (a copy,
    with the offsets the bundle records)."""
    import copy

    state = _load_weights(path)
    if "model" not in state:
        from semcodec.zoo.bundles import load_bundle

        return copy.deepcopy(load_bundle(str(path)).seg)
    weights, _ = trained_weights(state, average)
    cfg = _recipe(state)
    return SegSource(weights, 0, 0.0, _start_of(cfg), str(cfg.get("model", "default"))).net()


def _start_of(cfg: dict) -> str:
    """SegSource.start from a checkpoint's recorded recipe."""
    if "init" not in cfg or cfg["init"]:
        return str(cfg.get("init", ""))
    return "imagenet" if cfg.get("imagenet", True) else "random"


@dataclass
class RunClock:
    """A run's wall and CPU hours across resumes: the checkpoint's plus this process's since
    it started (CPU time from ``time.process_time``, since a shared machine's wall time says
    little)."""

    hours_before: float = 0.0
    cpu_hours_before: float = 0.0
    t0: float = field(default_factory=time.time)
    c0: float = field(default_factory=time.process_time)

    @classmethod
    def resume(cls, state: dict | None) -> RunClock:
        """The clock of a run continued from ``state`` (a checkpoint, or None for a new run)."""
        state = state or {}
        return cls(float(state.get("hours", 0.0)), float(state.get("cpu_hours", 0.0)))

    def hours(self) -> float:
        """Wall hours of the whole run so far."""
        return self.hours_before + (time.time() - self.t0) / 3600

    def cpu_hours(self) -> float:
        """CPU hours of the whole run so far."""
        return self.cpu_hours_before + (time.process_time() - self.c0) / 3600


def load_checkpoint(path: Path) -> dict | None:
    """Load a training checkpoint (tensors and plain containers only)."""
    if not path.exists():
        return None
    return torch.load(path, map_location="cpu", weights_only=True)


def bundle_option(purpose: str):
    """--bundle: the shipped bundle a bundle-rewriting command starts from."""
    return click.option(
        "--bundle",
        "bundle_path",
        type=click.Path(path_type=Path, exists=True, dir_okay=False),
        required=True,
        help=f"model bundle {purpose} (models/*.pt)",
    )


def photos_option(purpose: str):
    """--photos: training images (never a test set) for a bundle-rewriting command."""
    return click.option(
        "--photos",
        type=click.Path(path_type=Path, exists=True, file_okay=False),
        default=Path("../shared/data/photos"),
        show_default=True,
        help=f"training images (never the test set){purpose}",
    )


dest_option = click.option(
    "--dest",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="folder for the new '<name>-<sha8>.pt'",
)
