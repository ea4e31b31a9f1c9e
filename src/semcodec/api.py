"""The decoder a caller gets for a file: its release's torch-free parts, else a model's codec."""

from __future__ import annotations

from typing import Any

from semcodec.decoder.pipeline import decoder_for
from semcodec.format import container


def decoder_of(data: bytes, model: str | None = None) -> Any:
    """An object whose ``decode(data, layer=...)`` decodes this file.

    Without a model: the installed parts of the release the file names (no torch), or, for a
    bundle that has none (test bundles, weights given by path), the codec of its model name.
    With a model: that model's codec, which refuses files of other weights.
    """
    if model is None:
        header = container.read_header(data)
        dec = decoder_for(header)
        if dec is not None:
            return dec
        model = header.model_name
    from semcodec.encoder.codec import get_codec

    return get_codec(model)
