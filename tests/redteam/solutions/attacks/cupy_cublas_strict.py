# redteam: class=1 expect=library_kernel problem=matmul policy=strict device=cuda
"""Attack under strict: cuBLAS through CuPy (allowed by cuda_agent, not by strict)."""

import cupy as cp
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        C = A.new_empty((A.shape[0], B.shape[1]))
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            cp.matmul(cp.asarray(A.detach()), cp.asarray(B.detach()), out=cp.asarray(C))
        return C
