"""Residual backends (A5): registry, round trips, rate monotonicity, error bounds, corruption."""

from __future__ import annotations

import math

import numpy as np
import pytest

from semcodec.errors import CorruptData
from semcodec.format.residual import (
    BACKENDS,
    ResidualBackend,
    backend_by_code,
    get_backend,
)
from semcodec.format.residual_avif import (
    SequenceFields,
    as_bare,
    av1_still_size,
    av1c_of,
    chroma_layout,
    compact_payload,
    from_uint8,
    sequence_payload,
    split_avif,
    terse_payload,
    to_uint8,
    wrap_av1,
)
from semcodec.format.residual_native import NativeBackend, quality_to_step
from semcodec.format.varint import get_varint

ALL = pytest.mark.parametrize("name", BACKENDS)


def _bare_parts(payload: bytes, w: int, h: int) -> tuple[bytes, bytes]:
    """The av1C and AV1 bitstream a payload stands for."""
    bare = as_bare(payload, w, h)
    return bare[4:8], bare[8:]


def _residual(h: int, w: int, seed: int = 0, amp: float = 20.0) -> np.ndarray:
    """Residual-like test data: noise, a smooth component and a few sharp edges."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    smooth = 15 * np.sin(xx / 5.0 + 3 * seed)[..., None] * np.cos(yy / 7.0)[..., None]
    edges = np.where((xx // 11 + yy // 9) % 3 == 0, 30.0, 0.0)[..., None]
    noise = rng.normal(0, amp, (h, w, 3))
    r = smooth * np.array([1.0, 0.6, -0.3]) + edges * np.array([1.0, 1.0, 0.5]) + noise
    return np.clip(np.rint(r), -255, 255).astype(np.int16)


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b) ** 2))
    return 10 * np.log10(255**2 / max(mse, 1e-12))


def test_registry() -> None:
    assert BACKENDS == ("native", "avif")
    for name in BACKENDS:
        b = get_backend(name)
        assert isinstance(b, ResidualBackend)
        assert b.name == name
        assert backend_by_code(b.code) is b
    assert get_backend("native").code == 1 and get_backend("avif").code == 2
    with pytest.raises(ValueError):
        get_backend("jpeg")
    for code in (0, 3, 255, -1):
        with pytest.raises(CorruptData):
            backend_by_code(code)


@ALL
@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (1, 9), (9, 1), (24, 40)])
def test_roundtrip_shapes(name: str, shape: tuple[int, int]) -> None:
    b = get_backend(name)
    r = _residual(*shape, seed=shape[0] + shape[1])
    data = b.encode(r, 80)
    out = b.decode(data, *shape)
    assert out.dtype == np.int16 and out.shape == shape + (3,)
    assert out.min() >= -255 and out.max() <= 255
    assert _psnr(out, r) > 28


@ALL
def test_extreme_values_and_zero(name: str) -> None:
    b = get_backend(name)
    r = np.full((8, 12, 3), 255, np.int16)
    r[:, ::2] = -255
    out = b.decode(b.encode(r, 100), 8, 12)
    assert out.min() >= -255 and out.max() <= 255
    z = np.zeros((10, 9, 3), np.int16)
    np.testing.assert_array_equal(b.decode(b.encode(z, 30), 10, 9), z)


@ALL
def test_quality_monotonic_in_bytes(name: str) -> None:
    b = get_backend(name)
    r = _residual(40, 48, seed=3)
    sizes = [len(b.encode(r, q)) for q in (0, 30, 60, 90, 100)]
    assert sizes == sorted(sizes), sizes
    assert sizes[-1] > 2 * sizes[0]


@ALL
def test_deterministic(name: str) -> None:
    b = get_backend(name)
    r = _residual(24, 32, seed=4)
    assert b.encode(r, 55) == b.encode(r.copy(), 55)


@pytest.mark.slow
def test_native_error_bounded_by_step() -> None:
    b = get_backend("native")
    r = _residual(32, 40, seed=5, amp=30)
    for q in (0, 40, 70, 90):
        step = quality_to_step(q)
        out = b.decode(b.encode(r, q), 32, 40)
        rmse = float(np.sqrt(np.mean((out.astype(np.float64) - r) ** 2)))
        assert rmse <= step, (q, step, rmse)
    out = b.decode(b.encode(r, 100), 32, 40)
    assert np.abs(out.astype(np.int32) - r).max() <= 1


@pytest.mark.parametrize("shape", [(1, 1), (9, 17), (20, 12)])
def test_native_block_size_8_decodes_with_the_registered_backend(shape: tuple[int, int]) -> None:
    r = _residual(*shape, seed=11)
    data = NativeBackend(8).encode(r, 85)
    out = get_backend("native").decode(data, *shape)
    assert out.shape == shape + (3,)
    assert _psnr(out, r) > 30
    with pytest.raises(ValueError):
        NativeBackend(12)
    with pytest.raises(CorruptData):
        get_backend("native").decode(data[:3] + b"\x05" + data[4:], *shape)


def test_native_quality_to_step() -> None:
    steps = [quality_to_step(q) for q in range(101)]
    assert steps == sorted(steps, reverse=True)
    assert steps[100] == 0.5
    with pytest.raises(ValueError):
        quality_to_step(101)


def test_avif_mapping_inverts() -> None:
    r = np.arange(-255, 256, dtype=np.int16)
    for num, den in ((1, 1), (2, 1), (3, 2), (1, 2)):
        back = from_uint8(to_uint8(r, num, den, 128), num, den, 128)
        inside = np.abs(r * num / den) <= 127
        err = np.abs(back[inside].astype(np.int32) - r[inside]).max()
        assert err <= (0 if num >= den else 1), (num, den, err)
    np.testing.assert_array_equal(
        from_uint8(to_uint8(r, 1, 1, 128), 1, 1, 128), np.clip(r, -128, 127)
    )


def test_avif_byte_table_is_the_rounding_rule() -> None:
    """from_uint8 (a table lookup) against round((r8 - offset) * den / num) half up, clipped."""
    r8 = np.arange(256, dtype=np.uint8).reshape(16, 16)
    for num, den, offset in ((1, 1, 128), (3, 2, 128), (2, 5, 120), (7, 3, 100)):
        want = [max(-255, min(255, math.floor((v - offset) * den / num + 0.5))) for v in range(256)]
        got = from_uint8(r8, num, den, offset)
        assert got.dtype == np.int16
        assert got.ravel().tolist() == want, (num, den, offset)


@pytest.mark.parametrize("h, w", [(1, 1), (16, 24), (77, 131)])
def test_avif_bare_form_decodes_like_the_whole_file(h: int, w: int) -> None:
    """Version 2 drops the HEIF boxes; rebuilt, they give libavif's file and the same pixels."""
    b = get_backend("avif")
    data = as_bare(b.encode(_residual(h, w, seed=3), 40), w, h)
    assert data[0] == 2  # this libavif's layout is the one wrap_av1 rebuilds
    av1c, av1 = data[4:8], data[8:]
    whole = wrap_av1(w, h, av1c, av1)
    assert split_avif(whole, w, h) == (av1c, av1)
    assert len(whole) - len(av1c) - len(av1) == 271
    version1 = bytes([1]) + data[1:4] + whole
    np.testing.assert_array_equal(b.decode(version1, h, w), b.decode(data, h, w))


def test_avif_420_layout_keeps_the_bare_form_and_decodes() -> None:
    """4:2:0 (--chroma 420) is the baseline profile: its rebuilt file type box names MA1B, so
    the bare form still applies; the decoder needs no flag."""
    b = get_backend("avif")
    rgb = _residual(40, 56, seed=5, amp=3.0)
    data = as_bare(b.encode(rgb, 90, layout="4:2:0"), 56, 40)
    assert data[0] == 2 and data[5] >> 5 == 0  # bare form; av1C seq_profile 0
    assert as_bare(b.encode(rgb, 90), 56, 40)[5] >> 5 == 1  # 4:4:4: profile 1
    assert _psnr(b.decode(data, 40, 56), rgb) > 30
    assert as_bare(b.encode(rgb, 90, layout="4:2:0"), 56, 40) == data
    assert chroma_layout(data) == "4:2:0" and chroma_layout(b.encode(rgb, 90)) == "4:4:4"
    assert chroma_layout(b.encode(rgb, 90, layout="4:2:0")) == "4:2:0"  # version 4
    assert chroma_layout(compact_payload(data[4:8], data[8:])) == "4:2:0"  # version 3
    whole = bytes([1]) + data[1:4] + wrap_av1(56, 40, data[4:8], data[8:])  # version 1
    assert chroma_layout(whole) == "4:2:0" and chroma_layout(b"\x02\x01") is None
    with pytest.raises(ValueError, match="layout"):
        b.encode(rgb, 90, layout="4:2:2")
    with pytest.raises(ValueError, match="layout"):
        get_backend("native").encode(rgb, 90, layout="4:2:0")


@pytest.mark.parametrize("layout", ["4:4:4", "4:2:0"])
def test_avif_compact_form_is_the_bare_form_less_nine_bytes(layout: str) -> None:
    """Version 3 leaves out the mapping (always 1/1 + 128), the av1C (it follows from the
    sequence header) and the temporal delimiter; put back, they give the bare form's bytes,
    and both decode to the same pixels."""
    b = get_backend("avif")
    r = _residual(40, 56, seed=7)
    bare = as_bare(b.encode(r, 50, layout=layout), 56, 40)
    data = compact_payload(bare[4:8], bare[8:])
    assert data is not None and as_bare(data, 56, 40) == bare
    assert data[0] == 3 and bare[0] == 2 and len(bare) == len(data) + 9
    assert bare[1:4] == bytes([1, 1, 128]) and bare[8:10] == b"\x12\x00"
    assert data[1:] == bare[10:] and av1c_of(bare[8:]) == bare[4:8] == av1c_of(data[1:])
    np.testing.assert_array_equal(b.decode(data, 40, 56), b.decode(bare, 40, 56))
    other = bytes([bare[4], bare[5], bare[6] ^ 0x04, 0])  # another subsampling
    assert compact_payload(other, bare[8:]) is None  # the encoder then keeps the bare form
    assert compact_payload(bare[4:8], bare[10:]) is None  # no temporal delimiter
    with pytest.raises(CorruptData, match="sequence header"):
        b.decode(b"\x03" + data[5:], 40, 56)


def test_sequence_header_written_from_the_spec_is_libavifs() -> None:
    """The reduced still-picture sequence header written from AV1 5.5.1-5.5.2 for a 512x768
    4:4:4 picture (level 4; filter intra, intra edge filter and CDEF on; full range) is the
    payload libavif 1.4 with aom 3.14 wrote for kodim19 at effort 5."""
    fields = SequenceFields(1, 4, 0b011010, 1, 0, 0)
    assert sequence_payload(fields, 512, 768) == bytes.fromhex("39227ff7fb4808683480")
    assert SequenceFields.unpack(fields.pack()) == fields
    with pytest.raises(CorruptData, match="too large"):
        sequence_payload(fields, 1 << 17, 8)
    with pytest.raises(CorruptData, match="sample position"):
        SequenceFields.unpack(SequenceFields(1, 4, 0, 1, 2, 0).pack())


@pytest.mark.parametrize("layout", ["4:4:4", "4:2:0"])
@pytest.mark.parametrize("h, w", [(1, 1), (40, 56), (77, 131)])
def test_avif_terse_form_is_the_compact_form_less_its_obu_headers(
    layout: str, h: int, w: int
) -> None:
    """Version 4 keeps 2 bytes of the sequence header and the frame OBU's payload; the
    decoder rebuilds the OBU headers and sizes and the sequence header from them and the
    picture's size: the version-2 payload's bytes, the same pixels."""
    b = get_backend("avif")
    data = b.encode(_residual(h, w, seed=11), 50, layout=layout)
    bare = as_bare(data, w, h)
    compact = compact_payload(bare[4:8], bare[8:])
    assert data[0] == 4 and bare[0] == 2 and compact is not None
    seq = sequence_payload(SequenceFields.unpack(data[1:3]), w, h)
    assert compact[1:3] == bytes([0x0A, len(seq)]) and compact[3 : 3 + len(seq)] == seq
    frame = compact[3 + len(seq) :]
    assert frame[0] == 0x32 and get_varint(frame, 1) == (len(data) - 3, len(frame) - len(data) + 3)
    assert frame.endswith(data[3:])
    assert terse_payload(bare[4:8], bare[8:], w, h) == data
    np.testing.assert_array_equal(b.decode(data, h, w), b.decode(bare, h, w))
    assert chroma_layout(data) == layout
    if layout == "4:4:4":  # fields a 4:4:4 header cannot have: no readable layout, as in version 3
        assert chroma_layout(data[:2] + bytes([data[2] | 1]) + data[3:]) is None
        assert chroma_layout(compact[:1] + b"\x0a\x00" + compact[3:]) is None


def test_terse_form_only_where_it_rebuilds_exactly() -> None:
    """The encoder keeps version 3 where the rebuilt bytes would differ: another av1C, no
    temporal delimiter, another size, an OBU after the frame, a size field longer than it
    needs; and the decoder refuses a version-4 payload that stands for no valid header."""
    b = get_backend("avif")
    bare = as_bare(b.encode(_residual(40, 56, seed=2), 50), 56, 40)
    av1c, av1 = bare[4:8], bare[8:]
    assert terse_payload(av1c, av1, 56, 40) is not None
    assert terse_payload(bytes([av1c[0], av1c[1], av1c[2] ^ 0x04, 0]), av1, 56, 40) is None
    assert terse_payload(av1c, av1[2:], 56, 40) is None
    assert terse_payload(av1c, av1, 56, 41) is None
    assert terse_payload(av1c, av1 + b"\x7a\x00", 56, 40) is None  # a padding OBU
    seq_end = 2 + 2 + av1[3]
    frame = av1[seq_end:]
    assert frame[0] == 0x32 and frame[1] & 0x80  # a 2-byte size field here
    longer = frame[:1] + bytes([frame[1], frame[2] | 0x80, 0]) + frame[3:]
    assert terse_payload(av1c, av1[:seq_end] + longer, 56, 40) is None
    with pytest.raises(CorruptData):
        b.decode(b"\x04\x00", 40, 56)


def test_obu_sizes_are_read_in_any_form_av1_allows() -> None:
    """AV1's leb128 may take up to 8 bytes (spec 4.10.5): a sequence header whose size field
    is padded to 8 bytes still gives its av1C and frame size; the payloads' own varints stay
    at 5 bytes."""
    b = get_backend("avif")
    bare = as_bare(b.encode(_residual(40, 56, seed=4), 50), 56, 40)
    av1c, av1 = bare[4:8], bare[8:]
    assert av1[2] == 0x0A and av1[3] < 0x80  # the sequence header, a 1-byte size
    padded = av1[:3] + bytes([av1[3] | 0x80] + [0x80] * 6 + [0]) + av1[4:]
    assert av1c_of(padded) == av1c and av1_still_size(padded) == (56, 40)
    assert av1c_of(av1[:3] + b"\x80" * 8 + av1[4:]) is None  # a size longer than 8 bytes
    eight = bytes([0x85] + [0x80] * 6 + [0])
    assert get_varint(eight, 0, 8) == (5, 8)
    with pytest.raises(CorruptData, match="overlong"):
        get_varint(eight, 0)


def test_avif_split_refuses_a_layout_it_cannot_rebuild() -> None:
    b = get_backend("avif")
    data = as_bare(b.encode(_residual(16, 24), 40), 24, 16)
    whole = wrap_av1(24, 16, data[4:8], data[8:])
    assert split_avif(whole, 24, 17) is None  # another ispe
    assert split_avif(whole + b"\0", 24, 16) is None
    assert split_avif(b"not an avif file", 24, 16) is None


@ALL
def test_invalid_arguments(name: str) -> None:
    b = get_backend(name)
    r = _residual(8, 8)
    with pytest.raises(ValueError):
        b.encode(r.astype(np.int32), 50)
    with pytest.raises(ValueError):
        b.encode(r[..., :2], 50)
    with pytest.raises(ValueError):
        b.encode(np.full((4, 4, 3), 256, np.int16), 50)
    with pytest.raises(ValueError):
        b.encode(r, 101)
    with pytest.raises(ValueError):
        b.encode(np.zeros((0, 4, 3), np.int16), 50)
    with pytest.raises(ValueError):
        b.decode(b"\x01\x00\x00\x00", 0, 8)


@ALL
def test_truncated_payload_raises(name: str) -> None:
    b = get_backend(name)
    r = _residual(16, 24, seed=6)
    data = b.encode(r, 70)
    cuts = sorted(set(range(0, 24)) | set(range(24, len(data), max(1, len(data) // 40))))
    for cut in cuts:
        with pytest.raises(CorruptData):
            b.decode(data[:cut], 16, 24)


@ALL
def test_random_bytes_raise(name: str) -> None:
    b = get_backend(name)
    rng = np.random.default_rng(9)
    for _ in range(30):
        junk = rng.integers(0, 256, int(rng.integers(1, 300)), dtype=np.uint8).tobytes()
        with pytest.raises(CorruptData):
            b.decode(junk, 16, 16)


@pytest.mark.slow
def test_native_garbage_after_valid_header_never_crashes() -> None:
    """Valid streams with one word byte changed and a random (often huge) quantiser step:
    what still decodes stays in the residual's range."""
    b = get_backend("native")
    rng = np.random.default_rng(10)
    decoded = {0: 0, 10: 0, 40: 0}
    at_bound = 0  # decodes whose huge step drove a sample to -255 or 255
    for quality in decoded:  # one word at 0 and 10, four at 40
        for seed in range(5):
            data0 = b.encode(_residual(16, 16, seed=seed), quality)
            nwords, pos = get_varint(data0, 4)
            for i in range(20):
                data = bytearray(data0)
                j = pos + int(rng.integers(4 * nwords))
                if i % 2:
                    data[j] ^= 1 << int(rng.integers(8))
                else:
                    data[j] = (data[j] + int(rng.integers(1, 256))) % 256
                step = 0xFFFF if i % 3 == 0 else int(rng.integers(1, 1 << 16))
                data[1:3] = step.to_bytes(2, "little")
                try:
                    out = b.decode(bytes(data), 16, 16)
                except CorruptData:
                    continue
                decoded[quality] += 1
                assert out.shape == (16, 16, 3) and out.dtype == np.int16
                assert out.min() >= -255 and out.max() <= 255
                at_bound += int(np.abs(out).max() == 255)
    # 23, 44 and 7 of 100 when written, 69 of them at the range's bounds
    assert sum(decoded.values()) >= 50 and decoded[40] >= 4, decoded
    assert at_bound >= 40, at_bound


def test_avif_wrong_size_or_header_raises() -> None:
    """Payloads of versions 1-3 carry the frame size, checked against the container's (in
    version 4 it is the container's, under the header's CRC)."""
    b = get_backend("avif")
    data = b.encode(_residual(16, 24, seed=7), 50)
    for older in (as_bare(data, 24, 16), compact_payload(*_bare_parts(data, 24, 16))):
        with pytest.raises(CorruptData, match="size"):
            b.decode(older, 24, 16)
    with pytest.raises(CorruptData, match="payload version 5 is newer than this release"):
        b.decode(b"\x05" + data[1:], 16, 24)
    with pytest.raises(CorruptData):
        b.decode(data[:3], 16, 24)  # version 4 without a frame
    bare = as_bare(data, 24, 16)
    with pytest.raises(CorruptData):
        b.decode(bare[:1] + b"\x00" + bare[2:], 16, 24)  # a zero scale
    flipped = bytearray(data)
    for i in range(40, len(flipped), 7):
        flipped[i] ^= 0xFF
    try:
        out = b.decode(bytes(flipped), 16, 24)
    except CorruptData:
        pass
    else:
        assert out.shape == (16, 24, 3)


def test_residual_to_bytes_is_the_rounding_rule() -> None:
    """to_uint8 (a table lookup for residuals of two pictures, arithmetic beyond them) against
    clip(round(r * num / den) half up + offset, 0, 255)."""
    r = np.arange(-600, 601, dtype=np.int32)
    for num, den, offset in ((1, 1, 128), (3, 2, 128), (2, 5, 120), (7, 3, 100), (1, 4, 128)):
        want = [max(0, min(255, math.floor(v * num / den + 0.5) + offset)) for v in r.tolist()]
        assert to_uint8(r, num, den, offset).tolist() == want  # beyond ±255: the arithmetic
        inside = r[np.abs(r) <= 255].reshape(-1, 7).astype(np.int16)
        got = to_uint8(inside, num, den, offset)  # every value a residual: the table
        assert got.dtype == np.uint8 and got.shape == inside.shape
        assert got.ravel().tolist() == want[345:856]


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("prediction", ["flat", "offset", "array"])
def test_picture_is_prediction_plus_residual_clipped(name: str, prediction: str) -> None:
    """``picture`` (the AVIF backend's shortcut where the residual is the image itself
    included) gives the bytes of clip(prediction + decoded residual) for every prediction."""
    rng = np.random.default_rng(7)
    b = get_backend(name)
    h, w = 40, 56
    res = rng.integers(-200, 200, (h, w, 3)).astype(np.int16)
    data = b.encode(res, 70)
    pred: np.ndarray | int = {
        "flat": 128,
        "offset": 100,
        "array": rng.integers(0, 256, (h, w, 3)).astype(np.uint8),
    }[prediction]
    want = np.clip(b.decode(data, h, w) + pred, 0, 255).astype(np.uint8)
    got = b.picture(data, h, w, pred)
    assert got.dtype == np.uint8 and got.shape == (h, w, 3) and got.flags.writeable
    np.testing.assert_array_equal(got, want)
