"""cuTensorMapEncodeTiled (TENSOR_MAP_ENCODE): a TMA descriptor (CUtensorMap, 128 opaque bytes) is encoded by
the driver of the device that will read it, so the shim asks the server. Its fields on the wire, all unsigned:

    [dtype, rank, global address, dims[rank], strides[rank - 1], box[rank], element strides[rank],
     interleave, swizzle, l2 promotion, oob fill]

The layout of the descriptor is the driver's own and undocumented: the emulator cannot encode one (nor run
the tensormap/cp.async.bulk.tensor PTX that reads it) and refuses with NOT_SUPPORTED."""

from __future__ import annotations

from dataclasses import dataclass

from gpushim.cuda_errors import CudaError, Err

MAX_RANK = 5  # cuda.h, cuTensorMapEncodeTiled: "tensorRank ... must be non-zero and less than or equal to 5"


@dataclass(frozen=True)
class TiledMap:
    dtype: int
    rank: int
    address: int
    dims: list[int]
    strides: list[int]
    box: list[int]
    element_strides: list[int]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int


def parse(fields: list[int]) -> TiledMap:
    if len(fields) < 2 or not 1 <= fields[1] <= MAX_RANK:
        raise CudaError(Err.INVALID_VALUE, f"cuTensorMapEncodeTiled: rank {fields[1] if len(fields) > 1 else '?'} "
                                           f"is not 1 to {MAX_RANK}")
    r = fields[1]
    if len(fields) != 4 * r + 6:
        raise CudaError(Err.INVALID_VALUE, f"TENSOR_MAP_ENCODE: {len(fields)} fields for rank {r}, not {4 * r + 6}")
    dims, strides = fields[3:3 + r], fields[3 + r:2 + 2 * r]
    box, elem = fields[2 + 2 * r:2 + 3 * r], fields[2 + 3 * r:2 + 4 * r]
    if max(box + elem) > 0xFFFF_FFFF or max(fields[-4:] + [fields[0]]) > 0xFFFF_FFFF:
        raise CudaError(Err.INVALID_VALUE, "cuTensorMapEncodeTiled: a 32-bit field out of range")
    return TiledMap(fields[0], r, fields[2], dims, strides, box, elem, *fields[-4:])
