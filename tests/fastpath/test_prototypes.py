"""The C prototype parser and the argument conversion built on it (no GPU needed)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from kernels_env.fastpath.args import ArgSpec, ctypes_restype, specs_for
from kernels_env.fastpath.prototypes import (
    parse_extern_c,
    parse_kernels,
    parse_signature,
    strip_comments_and_strings,
)

from .support import FIXTURES, RELU_CU

TRICKY = r"""
// extern "C" int commented_out(int);
/* extern "C" int also_commented(int); */
#define EXPORT extern "C"
#define LONG_MACRO(x) \
    extern "C" int in_macro(int x)
const char* s = "extern \"C\" int in_string(int);";
extern "C" {
  static inline __host__ cudaError_t a(const float * __restrict__ x, float y[], unsigned n,
                                       long long m, size_t k, cudaStream_t s) { return cudaSuccess; }
  int b(void);
  __global__ void kern_in_block(float* x) {}
  int fnptr(int (*fp)(int), int x);
  const char* name_of(int);
  int defaults(unsigned long int q, signed char sc, unsigned short int us, std::int64_t z, bool f = true);
  int variable;
  void refs(float& r);
}
extern "C" __attribute__((visibility("default"))) void vararg(float* out, int n, ...);
extern "C" __host__ __forceinline__ int __launch_bounds_fake(int);
extern "C" int unterminated(int x
"""


def test_extern_c_single_declaration_and_kernels():
    (p,) = parse_extern_c(RELU_CU)
    assert str(p) == "int relu_launch(const float * x, float * y, int n, cudaStream_t stream)"
    assert p.line == 9
    (k,) = parse_kernels(RELU_CU)
    assert k.kernel and k.name == "relu_kernel" and [q.name for q in k.params] == ["x", "y", "n"]


def test_extern_c_block_qualifiers_arrays_and_malformed_input():
    protos = {p.name: p for p in parse_extern_c(TRICKY)}
    assert set(protos) == {"a", "b", "name_of", "defaults", "vararg", "refs", "__launch_bounds_fake"}
    assert protos["refs"].params[0].reference  # parsed, but calling it raises (ctypes has no references)
    a = protos["a"]
    assert a.ret == "cudaError_t"
    assert [(q.name, q.base, q.pointer, q.const) for q in a.params] == [
        ("x", "float", 1, True),
        ("y", "float", 1, False),
        ("n", "unsigned int", 0, False),
        ("m", "long long", 0, False),
        ("k", "size_t", 0, False),
        ("s", "cudaStream_t", 0, False),
    ]
    assert protos["b"].params == ()
    assert protos["name_of"].ret == "const char *" and protos["name_of"].params[0].name is None
    d = protos["defaults"]
    assert [q.base for q in d.params] == [
        "unsigned long",
        "signed char",
        "unsigned short",
        "std::int64_t",
        "bool",
    ]
    assert protos["vararg"].variadic and protos["vararg"].ret == "void"


def test_kernels_with_templates_and_launch_bounds():
    kernels = {k.name: k for k in parse_kernels((FIXTURES / "resources.cu").read_text())}
    assert set(kernels) == {"softmax_kernel", "stack_kernel", "spill_kernel", "half_kernel"}
    assert [q.base for q in kernels["half_kernel"].params] == ["__half", "__half", "int"]
    assert kernels["spill_kernel"].params[0].const


def test_strip_keeps_lines_and_extern_c():
    text = 'a // x\n/* b\n c */ extern "C" int f(); "str"\n#define X \\\n  1\n'
    out = strip_comments_and_strings(text)
    assert out.count("\n") == text.count("\n")
    assert 'extern "C" int f();' in out and "str" not in out and "define" not in out


def test_signature_strings():
    p = parse_signature('extern "C" int gemm(const float* A, const float* B, float* C, int m, int n, int k);')
    assert p.name == "gemm" and len(p.params) == 6
    assert parse_signature("void f()").params == ()
    for bad in ("", "int", "int f(", "struct { int x; }", "int (*f)(int)"):
        with pytest.raises(ValueError):
            parse_signature(bad)


def test_garbage_never_raises():
    for junk in [
        'extern "C"',
        'extern "C" {',
        "}}}{{{",
        '\x00extern "C" ((((',
        'extern "C" int f(int a,, int b);',
    ]:
        parse_extern_c(junk)
        parse_kernels(junk + "__global__ void")


def _spec(sig: str, i: int = 0) -> ArgSpec:
    return specs_for(parse_signature(sig))[i]


def test_integer_and_float_conversion_with_range_checks():
    s = _spec("int f(int n)")
    assert s.convert(5, "f", set()) == 5 and s.convert(np.int64(7), "f", set()) == 7
    with pytest.raises(OverflowError, match="does not fit in int"):
        s.convert(2**31, "f", set())
    with pytest.raises(TypeError, match="needs an integer"):
        s.convert(1.5, "f", set())
    u = _spec("int f(unsigned int n)")
    with pytest.raises(OverflowError):
        u.convert(-1, "f", set())
    assert _spec("int f(long long n)").convert(2**40, "f", set()) == 2**40
    f = _spec("int f(float a)")
    assert f.convert(2, "f", set()) == 2.0 and f.ctype is ctypes.c_float
    with pytest.raises(TypeError):
        f.convert("2", "f", set())
    assert _spec("int f(bool b)").convert(True, "f", set()) is True


def test_pointer_conversion_and_tensor_checks():
    p = _spec("int f(const float* x)")
    assert p.kind == "pointer" and p.dtypes == ("float32",)
    assert p.convert(None, "f", set()) == 0 and p.convert(0xDEAD, "f", set()) == 0xDEAD
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        p.convert(torch.zeros(3), "f", set())

    class FakeCuda:  # what the checks read from a CUDA tensor, without a GPU
        def __init__(self, dtype, contiguous=True):
            self.dtype, self._c = dtype, contiguous
            self.device = torch.device("cuda", 0)
            self.shape = (4, 4)

        def is_contiguous(self):
            return self._c

        def stride(self):
            return (1, 4)

        def data_ptr(self):
            return 4096

    devices: set = set()
    assert p.convert(FakeCuda(torch.float32), "f", devices) == 4096 and devices == {0}
    with pytest.raises(TypeError, match="torch.float64 tensor but the parameter is 'const float \\*'"):
        p.convert(FakeCuda(torch.float64), "f", set())
    with pytest.raises(ValueError, match="not contiguous"):
        p.convert(FakeCuda(torch.float32, contiguous=False), "f", set())
    void = _spec("int f(void* x)")
    assert void.dtypes is None and void.convert(FakeCuda(torch.int8), "f", set()) == 4096

    class Iface:
        __cuda_array_interface__ = {"data": (1234, False)}

    assert p.convert(Iface(), "f", set()) == 1234


def test_streams_handles_and_opaque_types():
    s = _spec("int f(float* x, cudaStream_t s)", 1)
    assert s.kind == "stream" and s.convert(99, "f", set()) == 99

    class TorchLikeStream:
        cuda_stream = 1234

    assert s.convert(TorchLikeStream(), "f", set()) == 1234
    assert _spec("int f(cublasHandle_t h)").kind == "pointer"
    opaque = _spec("int f(T alpha)")
    assert opaque.kind == "opaque"
    with pytest.raises(TypeError, match="numpy scalar"):
        opaque.convert(1.0, "f", set())
    buf = opaque.c_value(opaque.convert(np.float32(2.5), "f", set()))
    assert bytes(buf) == np.float32(2.5).tobytes()
    assert _spec("int f(float& r)").kind == "unsupported"


def test_return_types():
    assert ctypes_restype("void") is None
    assert ctypes_restype("int") is ctypes.c_int32
    assert ctypes_restype("double") is ctypes.c_double
    assert ctypes_restype("const char *") is ctypes.c_char_p
    assert ctypes_restype("float *") is ctypes.c_void_p
