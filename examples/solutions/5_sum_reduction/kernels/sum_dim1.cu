#include <cuda_runtime.h>

// out[b, 0, j] = sum_i x[b, i, j]; one thread per (b, j), consecutive threads read consecutive j.
__global__ void sum_dim1_kernel(const float* __restrict__ x, float* __restrict__ out, int B, int D1, int D2) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.y;
    if (j >= D2) return;
    const float* col = x + (long long)b * D1 * D2 + j;
    float acc = 0.0f;
    for (int i = 0; i < D1; ++i) acc += col[(long long)i * D2];
    out[(long long)b * D2 + j] = acc;
}

extern "C" int sum_dim1_launch(const float* x, float* out, int B, int D1, int D2, cudaStream_t stream) {
    dim3 grid((D2 + 255) / 256, B);
    sum_dim1_kernel<<<grid, 256, 0, stream>>>(x, out, B, D1, D2);
    return (int)cudaGetLastError();
}
