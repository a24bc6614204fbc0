"""Python values -> C arguments, checked against the parsed C parameter types.

Pointers take a CUDA torch tensor (its ``data_ptr()``; must be contiguous, on the current device, and of a
dtype matching the pointee, e.g. ``float*`` <- torch.float32; ``void*`` and unknown pointees take any
dtype), an object with ``__cuda_array_interface__`` (CuPy, Numba), a raw address ``int`` (the escape hatch
for strided views: pass ``t.data_ptr()``), or None (NULL). Integers take Python/numpy integers and are
range-checked against the C type (no silent wrap-around); floating types take ints and floats; streams
take a torch stream, a raw ``cudaStream_t`` int, or None (the current stream).
"""

from __future__ import annotations

import ctypes
import operator
from dataclasses import dataclass

from .prototypes import Param, Prototype

_INTS = {
    "char": ctypes.c_int8,
    "signed char": ctypes.c_int8,
    "unsigned char": ctypes.c_uint8,
    "int8_t": ctypes.c_int8,
    "uint8_t": ctypes.c_uint8,
    "short": ctypes.c_int16,
    "unsigned short": ctypes.c_uint16,
    "int16_t": ctypes.c_int16,
    "uint16_t": ctypes.c_uint16,
    "int": ctypes.c_int32,
    "unsigned int": ctypes.c_uint32,
    "int32_t": ctypes.c_int32,
    "uint32_t": ctypes.c_uint32,
    "long": ctypes.c_int64,
    "unsigned long": ctypes.c_uint64,
    "long long": ctypes.c_int64,
    "unsigned long long": ctypes.c_uint64,
    "int64_t": ctypes.c_int64,
    "uint64_t": ctypes.c_uint64,
    "size_t": ctypes.c_uint64,
    "ssize_t": ctypes.c_int64,
    "ptrdiff_t": ctypes.c_int64,
    "intptr_t": ctypes.c_int64,
    "uintptr_t": ctypes.c_uint64,
    "cudaError_t": ctypes.c_int32,
    "cudaError": ctypes.c_int32,
    "CUresult": ctypes.c_int32,
}
_FLOATS = {"float": ctypes.c_float, "double": ctypes.c_double}
_STREAMS = {"cudaStream_t", "CUstream"}
_HANDLES = _STREAMS | {
    "cudaEvent_t",
    "CUevent",
    "cublasHandle_t",
    "cublasLtHandle_t",
    "cudnnHandle_t",
    "CUdeviceptr",
    "cudaGraphExec_t",
}
ERROR_RETURNS = {"int", "cudaError_t", "cudaError", "CUresult"}

_F32, _F64, _F16, _BF16 = ("float32",), ("float64",), ("float16",), ("bfloat16",)
_POINTEE_DTYPES = {
    "float": _F32,
    "float2": _F32,
    "float4": _F32,
    "double": _F64,
    "double2": _F64,
    "half": _F16,
    "__half": _F16,
    "half2": _F16,
    "__half2": _F16,
    "__nv_bfloat16": _BF16,
    "nv_bfloat16": _BF16,
    "__nv_bfloat162": _BF16,
    "__nv_fp8_e4m3": ("float8_e4m3fn",),
    "__nv_fp8_e5m2": ("float8_e5m2",),
    "int": ("int32",),
    "int2": ("int32",),
    "int4": ("int32",),
    "int32_t": ("int32",),
    "unsigned int": ("int32", "uint32"),
    "uint32_t": ("int32", "uint32"),
    "long": ("int64",),
    "long long": ("int64",),
    "int64_t": ("int64",),
    "unsigned long": ("int64", "uint64"),
    "unsigned long long": ("int64", "uint64"),
    "uint64_t": ("int64", "uint64"),
    "size_t": ("int64", "uint64"),
    "short": ("int16",),
    "int16_t": ("int16",),
    "unsigned short": ("int16", "uint16", "float16", "bfloat16"),
    "uint16_t": ("int16", "uint16", "float16", "bfloat16"),
    "signed char": ("int8",),
    "int8_t": ("int8",),
    "unsigned char": ("uint8", "bool"),
    "uint8_t": ("uint8", "bool"),
    "char": ("int8", "uint8", "bool"),
    "bool": ("bool",),
}


def _base(param_base: str) -> str:
    return param_base[5:] if param_base.startswith("std::") else param_base


@dataclass
class ArgSpec:
    """How one C parameter is filled. ``kind``: pointer, stream, int, float, bool, or opaque (unknown type
    passed by value: accepts numpy scalars / ctypes instances only)."""

    name: str
    ctype_text: str
    kind: str
    ctype: type | None
    dtypes: tuple[str, ...] | None = None  # accepted torch dtypes for a pointer; None: any

    @classmethod
    def from_param(cls, p: Param, index: int) -> ArgSpec:
        name = p.name or f"arg{index}"
        base = _base(p.base)
        if p.reference:
            return cls(name, p.ctype, "unsupported", None)
        if p.pointer:
            return cls(
                name,
                p.ctype,
                "pointer",
                ctypes.c_void_p,
                _POINTEE_DTYPES.get(base) if base != "void" else None,
            )
        if base in _STREAMS:
            return cls(name, p.ctype, "stream", ctypes.c_void_p)
        if base in _HANDLES:
            return cls(name, p.ctype, "pointer", ctypes.c_void_p)
        if base in ("bool", "_Bool"):
            return cls(name, p.ctype, "bool", ctypes.c_bool)
        if base in _INTS:
            return cls(name, p.ctype, "int", _INTS[base])
        if base in _FLOATS:
            return cls(name, p.ctype, "float", _FLOATS[base])
        return cls(name, p.ctype, "opaque", None)

    def convert(self, value, where: str, devices: set):
        """The value to hand to ctypes (an int address, int, float, bool, or a ctypes instance)."""
        kind = self.kind
        if kind == "pointer":
            return _pointer(value, self, where, devices)
        if kind == "stream":
            if value is None:
                return current_stream()
            if hasattr(value, "cuda_stream"):
                return int(value.cuda_stream)
            if hasattr(value, "ptr") and isinstance(value.ptr, int):  # a CuPy stream
                return value.ptr
            return self._int(value, where)
        if kind == "int":
            return self._int(value, where)
        if kind == "float":
            if isinstance(value, (int, float)) or _is_numpy_number(value):
                return float(value)
            raise TypeError(
                f"{where}: argument '{self.name}' ({self.ctype_text}) needs a number, got {_kind(value)}"
            )
        if kind == "bool":
            if isinstance(value, (bool, int)) or _is_numpy_number(value):
                return bool(value)
            raise TypeError(f"{where}: argument '{self.name}' (bool) needs a bool, got {_kind(value)}")
        if kind == "opaque":
            if isinstance(value, ctypes._SimpleCData | ctypes.Structure | ctypes.Union):
                return value
            if _is_numpy_number(value):
                return ctypes.create_string_buffer(value.tobytes(), len(value.tobytes()))
            raise TypeError(
                f"{where}: cannot tell the C type of parameter '{self.name}' ({self.ctype_text}); "
                "pass a numpy scalar of the right dtype (e.g. numpy.float32(1.0)) or a ctypes value"
            )
        raise TypeError(f"{where}: parameter '{self.name}' ({self.ctype_text}) cannot be passed from Python")

    def _int(self, value, where: str) -> int:
        try:
            v = operator.index(value)
        except TypeError:
            raise TypeError(
                f"{where}: argument '{self.name}' ({self.ctype_text}) needs an integer, got {_kind(value)}"
            ) from None
        ctype = self.ctype or ctypes.c_void_p
        bits = ctypes.sizeof(ctype) * 8
        signed = ctype not in (
            ctypes.c_uint8,
            ctypes.c_uint16,
            ctypes.c_uint32,
            ctypes.c_uint64,
            ctypes.c_void_p,
        )
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        if not lo <= v <= hi:
            raise OverflowError(
                f"{where}: argument '{self.name}'={v} does not fit in {self.ctype_text} ({bits}-bit); "
                "declare a wider type (e.g. long long / int64_t)"
            )
        return v

    def c_value(self, converted):
        """A ctypes object holding ``converted`` (kernel parameters are passed by address)."""
        if self.kind == "opaque":
            return converted
        return (self.ctype or ctypes.c_void_p)(converted)


def current_stream(device: int | None = None) -> int:
    """torch's current CUDA stream handle on ``device`` (default: the current device)."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what Triton uses: no Stream object built
    if raw is not None:
        return raw(torch.cuda.current_device() if device is None else device)
    return torch.cuda.current_stream(device).cuda_stream


def _is_numpy_number(value) -> bool:
    return type(value).__module__ == "numpy" and hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0


def _kind(value) -> str:
    t = type(value)
    return f"{t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else t.__qualname__


def _pointer(value, spec: ArgSpec, where: str, devices: set) -> int:
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0 or value >= 1 << 64:
            raise OverflowError(f"{where}: argument '{spec.name}' is not a valid address: {value}")
        return value
    if hasattr(value, "data_ptr") and hasattr(value, "is_contiguous"):  # torch.Tensor
        dev = value.device
        if dev.type != "cuda":
            raise ValueError(
                f"{where}: argument '{spec.name}' ({spec.ctype_text}) is a tensor on '{dev}'; the fast path "
                "passes device pointers, so it must be a CUDA tensor"
            )
        if not value.is_contiguous():
            raise ValueError(
                f"{where}: argument '{spec.name}' is not contiguous (shape {tuple(value.shape)}, strides "
                f"{tuple(value.stride())}); pass x.contiguous(), or x.data_ptr() to index strides yourself"
            )
        if spec.dtypes is not None:
            dtype = str(value.dtype).removeprefix("torch.")
            if dtype not in spec.dtypes:
                expected = " or ".join(f"torch.{d}" for d in spec.dtypes)
                raise TypeError(
                    f"{where}: argument '{spec.name}' is a torch.{dtype} tensor but the parameter is "
                    f"'{spec.ctype_text}' (expects {expected})"
                )
        devices.add(dev.index)
        return value.data_ptr()
    iface = getattr(value, "__cuda_array_interface__", None)
    if iface is not None:
        return int(iface["data"][0])
    raise TypeError(
        f"{where}: argument '{spec.name}' ({spec.ctype_text}) needs a CUDA tensor, got {_kind(value)}"
    )


def specs_for(proto: Prototype) -> list[ArgSpec]:
    return [ArgSpec.from_param(p, i) for i, p in enumerate(proto.params)]


def ctypes_restype(ret: str):
    """ctypes return type for a prototype's return type (None for void)."""
    text = ret.replace("const ", "").strip()
    if text == "void":
        return None
    if text in ("char *", "char*"):
        return ctypes.c_char_p
    if text.endswith("*"):
        return ctypes.c_void_p
    base = _base(text)
    if base in ("bool", "_Bool"):
        return ctypes.c_bool
    if base in _INTS:
        return _INTS[base]
    if base in _FLOATS:
        return _FLOATS[base]
    if base in _HANDLES:
        return ctypes.c_void_p
    return None
