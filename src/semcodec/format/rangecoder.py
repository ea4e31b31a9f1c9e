"""Thin wrapper over constriction's range coder: words <-> bytes, errors as CorruptData."""

from __future__ import annotations

import constriction
import numpy as np

from semcodec.errors import CorruptData


def categorical_family():
    """Categorical model family with probabilities given per symbol (fast, deterministic mode)."""
    return constriction.stream.model.Categorical(perfect=False)


def encode_words(symbols: np.ndarray, family, probabilities: np.ndarray) -> bytes:
    """Range-code int32 symbols with one probability row each; little-endian 32-bit words."""
    enc = constriction.stream.queue.RangeEncoder()
    enc.encode(
        np.ascontiguousarray(symbols, dtype=np.int32), family, np.ascontiguousarray(probabilities)
    )
    return enc.get_compressed().astype("<u4").tobytes()


def decode_words(data: bytes, what: str):
    """A range decoder over a payload; rejects payloads that are not whole 32-bit words."""
    if len(data) % 4:
        raise CorruptData(f"{what}: payload length {len(data)} is not a multiple of 4")
    words = np.frombuffer(data, dtype="<u4").astype(np.uint32)
    try:
        return constriction.stream.queue.RangeDecoder(words)
    except (ValueError, RuntimeError) as exc:
        raise CorruptData(f"{what}: {exc}") from None
