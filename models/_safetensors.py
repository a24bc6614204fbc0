"""Minimal safetensors reader/writer on numpy (bf16 through ml_dtypes), memory-mapped for large files.

The format: 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}}, raw data.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import ml_dtypes
import numpy as np

_DTYPES = {
    "F64": np.dtype(np.float64),
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "I64": np.dtype(np.int64),
    "I32": np.dtype(np.int32),
    "I16": np.dtype(np.int16),
    "I8": np.dtype(np.int8),
    "U8": np.dtype(np.uint8),
    "BOOL": np.dtype(np.bool_),
}
_NAMES = {v: k for k, v in _DTYPES.items()}


class SafetensorsError(ValueError):
    """A malformed or unreadable safetensors file."""


def read_header(path: str | Path) -> tuple[dict, int]:
    """The JSON header (without ``__metadata__``) and the byte offset where tensor data starts."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > 100_000_000:
                raise SafetensorsError(f"{path}: implausible header length {n}")
            header = json.loads(f.read(n))
    except (OSError, struct.error, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SafetensorsError(f"cannot read safetensors file {path}: {exc}") from None
    header.pop("__metadata__", None)
    return header, 8 + n


def load(path: str | Path, names=None) -> dict[str, np.ndarray]:
    """Tensors of one file as read-only memory-mapped numpy arrays (``names``: a subset)."""
    header, start = read_header(path)
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, info in header.items():
        if names is not None and name not in names:
            continue
        if info["dtype"] not in _DTYPES:
            raise SafetensorsError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        dtype = _DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        if end - begin != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize or start + end > mm.size:
            raise SafetensorsError(f"{path}: tensor {name} has inconsistent offsets {info['data_offsets']}")
        out[name] = mm[start + begin : start + end].view(dtype).reshape(shape)
    return out


def save(path: str | Path, tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> int:
    """Write ``tensors`` (C-contiguous copies are made as needed); returns the bytes of tensor data."""
    header: dict = {"__metadata__": dict(metadata or {"format": "pt"})}
    offset = 0
    arrays = []
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        if arr.dtype not in _NAMES:
            raise SafetensorsError(f"tensor {name}: dtype {arr.dtype} cannot be stored in safetensors")
        header[name] = {
            "dtype": _NAMES[arr.dtype],
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + arr.nbytes],
        }
        offset += arr.nbytes
        arrays.append(arr)
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # data aligned to 8 bytes, as the reference writer does
    with Path(path).open("wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for arr in arrays:
            arr.reshape(-1).view(np.uint8).tofile(f)
    return offset
