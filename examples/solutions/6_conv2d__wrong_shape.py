"""A direct convolution in Triton that forgets the padding: its output is 62x62 instead of 64x64, so the verdict
is 'incorrect' with a shape mismatch."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def conv2d_valid_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, C, H, W, OC, OH, OW, K: tl.constexpr, BLOCK: tl.constexpr, OCB: tl.constexpr
):
    n = tl.program_id(0)  # one image; a block of output pixels; every output channel at once
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ocs = tl.arange(0, OCB)
    mask, oc_mask = offs < OH * OW, ocs < OC
    oh, ow = offs // OW, offs % OW
    acc = tl.zeros((BLOCK, OCB), dtype=tl.float32) + tl.load(b_ptr + ocs, mask=oc_mask, other=0.0)[None, :]
    for ic in range(C):
        for kh in tl.static_range(K):
            for kw in tl.static_range(K):
                x = tl.load(x_ptr + ((n * C + ic) * H + oh + kh) * W + ow + kw, mask=mask, other=0.0)
                w = tl.load(w_ptr + ((ocs * C + ic) * K + kh) * K + kw, mask=oc_mask, other=0.0)
                acc += x[:, None] * w[None, :]
    out = y_ptr + (n * OC + ocs[None, :]) * OH * OW + offs[:, None]
    tl.store(out, acc, mask=mask[:, None] & oc_mask[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)  # weights only

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, c, h, w = x.shape
        k = self.conv.kernel_size[0]
        oh, ow = h - k + 1, w - k + 1  # bug: no padding ('valid' instead of 'same')
        oc = self.conv.out_channels
        y = torch.empty((n, oc, oh, ow), device=x.device, dtype=x.dtype)
        grid = (n, triton.cdiv(oh * ow, 1024))
        ocb = triton.next_power_of_2(oc)
        conv2d_valid_kernel[grid](
            x, self.conv.weight, self.conv.bias, y, c, h, w, oc, oh, ow, K=k, BLOCK=1024, OCB=ocb
        )
        return y
