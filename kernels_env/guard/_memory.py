"""Poisoned memory: fresh allocations and freed cache blocks hold a NaN payload the candidate must overwrite.

The pattern repeats the 16-bit word 0x7FF1 (bytes F1 7F). Read at any even offset it is a NaN in float16,
bfloat16, float32 and float64 alike, so an output (or part of one) that no kernel wrote shows up as the exact
poison bits, and an output that inherited a freed reference result (catalogue #4) or read uninitialised
scratch (#13) fails instead of passing by luck.
"""

from __future__ import annotations

import torch

POISON_WORD16 = 0x7FF1
POISON_BYTE = 0xF1
_PATTERNS = {
    2: (torch.int16, POISON_WORD16),
    4: (torch.int32, 0x7FF17FF1),
    8: (torch.int64, 0x7FF17FF17FF17FF1),
}


def poison_storage(storage: torch.UntypedStorage) -> None:
    """Overwrite a whole storage with the poison pattern (caller disables any guard modes)."""
    nbytes = storage.nbytes()
    if nbytes == 0:
        return
    words = nbytes // 2
    if words:
        view = torch.empty(0, dtype=torch.int16, device=storage.device)
        view.set_(storage, 0, (words,), (1,))
        view.fill_(POISON_WORD16)
    if nbytes % 2:
        tail = torch.empty(0, dtype=torch.uint8, device=storage.device)
        tail.set_(storage, nbytes - 1, (1,), (1,))
        tail.fill_(POISON_BYTE)


def poison_tensor(t: torch.Tensor) -> torch.Tensor:
    if isinstance(t, torch.Tensor) and t.device.type != "meta" and t.layout == torch.strided:
        poison_storage(t.untyped_storage())
    return t


def poisoned_mask(t: torch.Tensor) -> torch.Tensor | None:
    """Elements of a floating/complex tensor still holding the exact poison bits; None if not checkable."""
    if not (t.is_floating_point() or t.is_complex()) or t.device.type == "meta":
        return None
    if t.is_complex():
        t = torch.view_as_real(t)
    pattern = _PATTERNS.get(t.element_size())
    if pattern is None:
        return None  # 1-byte floats: the pattern is ambiguous there
    dtype, value = pattern
    mask = t.view(dtype) == value
    return mask


def poisoned_count(t: torch.Tensor) -> tuple[int, list[int] | None]:
    """(number of never-written elements, index of the first one)."""
    mask = poisoned_mask(t)
    if mask is None:
        return 0, None
    n = int(mask.sum())
    if not n:
        return 0, None
    first = torch.nonzero(mask)[0].tolist()
    return n, first


def poison_free_cuda_memory(device: torch.device | str | int | None = None) -> int:
    """Fill every free block of PyTorch's CUDA caching allocator with the poison pattern; return the bytes.

    Blocks are claimed largest first with exact-size requests (best fit hands back exactly those blocks),
    poisoned, and released to the cache again, which keeps their contents.
    """
    if not torch.cuda.is_available():
        return 0
    dev = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    if dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    sizes = []
    for segment in torch.cuda.memory_snapshot():
        if segment.get("device", dev.index) != dev.index:
            continue
        sizes.extend(b["size"] for b in segment.get("blocks", ()) if b.get("state") == "inactive")
    held = []
    total = 0
    for size in sorted(sizes, reverse=True):
        block = torch.empty(size, dtype=torch.uint8, device=dev)
        poison_storage(block.untyped_storage())
        held.append(block)
        total += size
    torch.cuda.synchronize(dev)
    del held
    return total
