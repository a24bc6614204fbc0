"""The fast path on a real GPU: results against torch, cuBLAS linking, stream semantics, error surfacing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from .support import RELU_CU, REPO

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

SOFTMAX_KERNEL = r"""
extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int rows,
                                        int cols) {
  extern __shared__ float red[];  // blockDim.x floats; blockDim.x is a power of two
  int row = blockIdx.x;
  if (row >= rows) return;
  const float* xr = x + (long long)row * cols;
  float* yr = y + (long long)row * cols;
  float m = __int_as_float(0xff800000);  // -inf
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
  red[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  float sum = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(xr[c] - m);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  float inv = 1.f / red[0];
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
}
"""
SOFTMAX_LAUNCHER = r"""
#include <cuda_runtime.h>
extern "C" int softmax_launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax_rows<<<rows, 256, 256 * sizeof(float), stream>>>(x, y, rows, cols);
  return (int)cudaGetLastError();
}
"""
SGEMM_CU = r"""
#include <cublas_v2.h>
#include <cuda_runtime.h>
static cublasHandle_t handle = nullptr;
// Row-major C[M,N] = A[M,K] B[K,N] is column-major C^T = B^T A^T.
extern "C" int sgemm_launch(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s) {
  if (handle == nullptr && cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1000;
  if (cublasSetStream(handle, s) != CUBLAS_STATUS_SUCCESS) return 1001;
  const float alpha = 1.f, beta = 0.f;
  cublasStatus_t st = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, B, N, A, K, &beta, C, N);
  return st == CUBLAS_STATUS_SUCCESS ? 0 : 1000 + (int)st;
}
"""
SPIN_KERNEL = r"""
extern "C" __global__ void spin_write(float* out, long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) { }
  out[0] = 42.f;
}
"""
SPIN_LAUNCHER = r"""
#include <cuda_runtime.h>
extern "C" int spin_launch(float* out, long long cycles, cudaStream_t s) {
  spin_write<<<1, 1, 0, s>>>(out, cycles);
  return (int)cudaGetLastError();
}
"""
BAD_CU = r"""
#include <cuda_runtime.h>
__global__ void touch(float* x) { if (x) x[threadIdx.x] = 0.f; }
__global__ void far_away(float* x) { x[1ll << 40] = 1.f; }
extern "C" int bad_checked(float* x, cudaStream_t s) {
  touch<<<1, 2048, 0, s>>>(x);
  return (int)cudaGetLastError();
}
extern "C" int bad_unchecked(float* x, cudaStream_t s) { touch<<<1, 2048, 0, s>>>(x); return 0; }
extern "C" void bad_void(float* x, cudaStream_t s) { touch<<<1, 2048, 0, s>>>(x); }
extern "C" int returns_code(int code) { return code; }
extern "C" int good(float* x, cudaStream_t s) { touch<<<1, 32, 0, s>>>(x); return (int)cudaGetLastError(); }
extern "C" int illegal_address(float* x, cudaStream_t s) { far_away<<<1, 1, 0, s>>>(x); return 0; }
extern "C" double add_halves(double a, float b) { return a + b; }
"""
SPIN_CYCLES = 200_000_000  # ~0.1 s at H200 clocks: far longer than a launch and a stream query


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("fastpath_gpu_cache")
    old = os.environ.get("KERNELS_ENV_CACHE_DIR")
    os.environ["KERNELS_ENV_CACHE_DIR"] = str(path)
    os.environ.pop("KERNELS_ENV_BUILD_ONLY", None)
    yield path
    if old is None:
        os.environ.pop("KERNELS_ENV_CACHE_DIR", None)
    else:
        os.environ["KERNELS_ENV_CACHE_DIR"] = old


@pytest.fixture(scope="module")
def fp(cache_dir):
    import kernels_env.fastpath as fp

    return fp


def test_relu_library_matches_torch(fp):
    lib = fp.cuda_library({"relu.cu": RELU_CU}, name="relu")
    assert lib.loaded and lib.build.arch.startswith("sm_")
    x = torch.randn((1 << 20) + 3, device="cuda")
    y = torch.empty_like(x)
    assert lib.relu_launch(x, y, x.numel()) is None
    torch.testing.assert_close(y, torch.relu(x), rtol=0, atol=0)


def test_softmax_library_and_nvrtc_match_torch(fp):
    x = torch.randn(257, 1000, device="cuda") * 4
    expected = torch.softmax(x, dim=1)
    lib = fp.cuda_library({"softmax.cu": SOFTMAX_KERNEL + SOFTMAX_LAUNCHER})
    y = torch.empty_like(x)
    lib.softmax_launch(x, y, x.shape[0], x.shape[1])
    torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-6)
    k = fp.nvrtc_kernel(SOFTMAX_KERNEL, "softmax_rows")
    y2 = torch.empty_like(x)
    k((x.shape[0],), (256,), (x, y2, x.shape[0], x.shape[1]), shared_mem=256 * 4)
    torch.testing.assert_close(y2, expected, rtol=1e-5, atol=1e-6)
    assert k.resource_usage.registers > 0 and k.build.toolchain.startswith("nvrtc")


def test_cublas_linked_sgemm_matches_matmul(fp):
    lib = fp.cuda_library({"sgemm.cu": SGEMM_CU}, libraries=("cublas",))
    M, N, K = 257, 129, 65
    a, b = torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")
    c = torch.empty(M, N, device="cuda")
    lib.sgemm_launch(a, b, c, M, N, K)
    assert not torch.backends.cuda.matmul.allow_tf32
    torch.testing.assert_close(c, a @ b, rtol=1e-5, atol=1e-5)


def _spin_checks(launch):
    out = torch.zeros(1, device="cuda")
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    launch(out, side)
    side_busy = not side.query()
    default_idle = torch.cuda.default_stream().query()
    side.synchronize()
    assert side_busy, "the kernel did not run on the side stream"
    assert default_idle, "the kernel ran on (or synchronised with) the default stream"
    assert out.item() == 42.0


def test_library_launches_on_the_current_stream(fp):
    lib = fp.cuda_library({"spin.cu": SPIN_KERNEL + SPIN_LAUNCHER})

    def current(out, side):
        with torch.cuda.stream(side):
            lib.spin_launch(out, SPIN_CYCLES)

    _spin_checks(current)
    _spin_checks(lambda out, side: lib.spin_launch(out, SPIN_CYCLES, side))  # explicit stream argument


def test_nvrtc_launches_on_the_current_stream(fp):
    k = fp.nvrtc_kernel(SPIN_KERNEL, "spin_write")

    def current(out, side):
        with torch.cuda.stream(side):
            k(1, 1, (out, SPIN_CYCLES))

    _spin_checks(current)
    _spin_checks(lambda out, side: k(1, 1, (out, SPIN_CYCLES), stream=side))


def test_bad_launches_raise_runtime_errors(fp):
    lib = fp.cuda_library({"bad.cu": BAD_CU})
    x = torch.zeros(4096, device="cuda")
    # The H200 image's CUDA 13 reports these bad launches as "invalid argument" (error 1).
    for fn in (lib.bad_checked, lib.bad_unchecked, lib.bad_void):
        with pytest.raises(RuntimeError, match="invalid (configuration )?argument"):
            fn(x)
    with pytest.raises(RuntimeError, match=r"returned error 2: out of memory"):
        lib.returns_code(2)
    assert lib.returns_code(0) is None
    lib.good(x)  # launch-configuration errors are not sticky: the library keeps working
    torch.cuda.synchronize()
    assert lib.add_halves(1.25, 2.5) == pytest.approx(3.75)
    k = fp.nvrtc_kernel('extern "C" __global__ void touch(float* x) { x[threadIdx.x] = 1.f; }', "touch")
    with pytest.raises(RuntimeError, match="launch of kernel touch failed"):
        k(1, 2048, (x,))
    k(1, 32, (x,))
    torch.cuda.synchronize()
    assert x[:32].sum().item() == 32.0


def test_argument_checks_on_cuda_tensors(fp):
    lib = fp.cuda_library({"relu.cu": RELU_CU}, name="relu")
    x = torch.randn(64, 64, device="cuda")
    y = torch.empty_like(x)
    with pytest.raises(TypeError, match="torch.float64"):
        lib.relu_launch(x.double(), y, x.numel())
    with pytest.raises(ValueError, match="not contiguous"):
        lib.relu_launch(x.t(), y, x.numel())
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        lib.relu_launch(x.cpu(), y, x.numel())
    with pytest.raises(OverflowError):
        lib.relu_launch(x, y, 1 << 40)
    with pytest.raises(TypeError, match="takes 3"):
        lib.relu_launch(x, y)
    lib.relu_launch(x.t().contiguous(), y, x.numel())
    torch.testing.assert_close(y, torch.relu(x.t().contiguous()))
    k = fp.nvrtc_kernel(SOFTMAX_KERNEL, "softmax_rows")
    with pytest.raises(TypeError, match="takes 4 arguments"):
        k(1, 256, (x, y), shared_mem=1024)


def test_nvrtc_large_dynamic_shared_memory_and_template(fp):
    src = r"""
    extern "C" __global__ void reverse_via_smem(const float* x, float* y, int n) {
      extern __shared__ float buf[];
      for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = x[i];
      __syncthreads();
      for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = buf[n - 1 - i];
    }
    template <typename T> __global__ void axpy(T* y, const T* x, T a, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) y[i] += a * x[i];
    }
    """
    n = 100 * 1024 // 4
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    fp.nvrtc_kernel(src, "reverse_via_smem")(1, 256, (x, y, n), shared_mem=n * 4)
    torch.testing.assert_close(y, x.flip(0), rtol=0, atol=0)
    axpy = fp.nvrtc_kernel(src, "axpy<double>")
    xd, yd = (
        torch.randn(1000, device="cuda", dtype=torch.float64),
        torch.zeros(1000, device="cuda", dtype=torch.float64),
    )
    axpy(4, 256, (yd, xd, np.float64(2.0), 1000))
    torch.testing.assert_close(yd, 2 * xd)


def test_workspace_library_runs(fp, tmp_path):
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / "kernels" / "relu.cu").write_text(RELU_CU)
    (ws / "kernels" / "softmax.cu").write_text(SOFTMAX_KERNEL + SOFTMAX_LAUNCHER)
    lib = fp.workspace_library(ws)
    x = torch.randn(33, 300, device="cuda")
    y, z = torch.empty_like(x), torch.empty_like(x)
    lib.relu_launch(x, y, x.numel())
    lib.softmax_launch(x, z, 33, 300)
    torch.testing.assert_close(y, torch.relu(x))
    torch.testing.assert_close(z, torch.softmax(x, 1), rtol=1e-5, atol=1e-6)


def _run_py(code: str, env_extra: dict) -> subprocess.CompletedProcess:
    env = dict(os.environ, **env_extra)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_build_only_worker_fills_the_cache_for_the_gpu_worker(fp, tmp_path):
    """The sandbox flow: a CPU compile worker (GPU hidden, build-only) builds; the GPU worker only loads."""
    arch = "sm_{}{}".format(*torch.cuda.get_device_capability())
    env = {"KERNELS_ENV_CACHE_DIR": str(tmp_path / "shared"), "KERNELS_ENV_CUDA_ARCH": arch}
    src = RELU_CU.replace("0.f ? x[i]", "0.0f ? x[i]")  # a source no other test built
    built = _run_py(
        f"""
        from kernels_env.fastpath import cuda_library
        lib = cuda_library({{"relu.cu": {src!r}}})
        assert not lib.loaded and not lib.build.cache_hit
        """,
        {**env, "CUDA_VISIBLE_DEVICES": "", "KERNELS_ENV_BUILD_ONLY": "1"},
    )
    assert built.returncode == 0, built.stderr
    ran = _run_py(
        f"""
        import torch
        from kernels_env.fastpath import cuda_library
        lib = cuda_library({{"relu.cu": {src!r}}})
        assert lib.loaded and lib.build.cache_hit and lib.build.compile_seconds == 0.0, lib.build
        x = torch.randn(1000, device="cuda"); y = torch.empty_like(x)
        lib.relu_launch(x, y, 1000)
        assert torch.equal(y, torch.relu(x))
        print("ok")
        """,
        env,
    )
    assert ran.returncode == 0 and "ok" in ran.stdout, ran.stderr


def test_illegal_address_surfaces_as_runtime_error(fp):
    """A sticky error poisons the context, so it runs in its own process."""
    out = _run_py(
        f"""
        import torch
        from kernels_env.fastpath import cuda_library
        lib = cuda_library({{"bad.cu": {BAD_CU!r}}})
        x = torch.zeros(16, device="cuda")
        lib.illegal_address(x)
        try:
            torch.cuda.synchronize()
            print("no error at sync")
        except RuntimeError as e:
            print("sync:", e)
        try:
            lib.good(x)
            print("no error at next call")
        except RuntimeError as e:
            print("next call:", e)
        """,
        {},
    )
    assert "illegal memory access" in out.stdout, out.stdout + out.stderr
    assert "next call:" in out.stdout and "no error at next call" not in out.stdout, out.stdout
