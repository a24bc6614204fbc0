"""NVRTC through CuPy, in this process: compile one kernel, ask the version. A leaf that both paths share:
``nvrtc`` and ``toolchain`` call it directly in processes that launch kernels, the fresh build-only process
(``_nvrtc_proc``) calls it for them. CuPy is imported on first use (it is heavy and optional).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping


def compile_here(source: str, filename: str, name: str, options: list[str], headers: Mapping[str, str]):
    from cupy_backends.cuda.libs import nvrtc

    names = [k.encode() for k in headers]
    prog = nvrtc.createProgram(source, filename, [v.encode() for v in headers.values()], names)
    try:
        nvrtc.addNameExpression(prog, name)
        try:
            nvrtc.compileProgram(prog, options)
            ok = True
        except nvrtc.NVRTCError:
            ok = False
        log = nvrtc.getProgramLog(prog).rstrip("\x00")
        if not ok:
            return None, None, None, log
        lowered = nvrtc.getLoweredName(prog, name)
        try:
            image, fmt = _whole_cubin(nvrtc.getCUBIN(prog)), "cubin"
        except nvrtc.NVRTCError:
            image = b""
        if not image:  # compiled for a virtual arch (compute_XX): load PTX, the driver JITs it
            image, fmt = nvrtc.getPTX(prog), "ptx"
            image = image.encode() if isinstance(image, str) else image
        return image, fmt, lowered, log
    finally:
        nvrtc.destroyProgram(prog)


def _whole_cubin(image: bytes) -> bytes:
    """The whole cubin. CuPy's ``getCUBIN`` returns one byte less than ``nvrtcGetCUBINSize`` (it treats the
    image as a NUL-terminated string): the driver still loads it, but cuobjdump/nvdisasm reject it as an
    invalid ELF. The missing byte is the image's trailing NUL; the ELF headers say how long the file is, so
    restore it when they ask for exactly one more byte. (Calling libnvrtc through ctypes instead is unsafe:
    a process may map several libnvrtc builds, e.g. torch's and CuPy's, and a program handle from one
    crashes the other.)"""
    try:
        if image[:5] == b"\x7fELF\x02" and _elf_end(image + b"\0") == len(image) + 1:
            return image + b"\0"
    except struct.error:
        pass
    return image


def _elf_end(b: bytes) -> int:
    """One past the last byte any header, section or segment of a 64-bit little-endian ELF image covers."""
    phoff, shoff = struct.unpack_from("<QQ", b, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", b, 0x36)
    end = max(phoff + phentsize * phnum, shoff + shentsize * shnum)
    for i in range(shnum):
        o = shoff + i * shentsize
        (sh_type,) = struct.unpack_from("<I", b, o + 4)
        off, size = struct.unpack_from("<QQ", b, o + 0x18)
        if sh_type != 8:  # SHT_NOBITS occupies no file space
            end = max(end, off + size)
    for i in range(phnum):
        o = phoff + i * phentsize
        (off,) = struct.unpack_from("<Q", b, o + 8)
        (filesz,) = struct.unpack_from("<Q", b, o + 0x20)
        end = max(end, off + filesz)
    return end


def nvrtc_version_here() -> str:
    from cupy_backends.cuda.libs import nvrtc

    major, minor = nvrtc.getVersion()
    text = f"nvrtc {major}.{minor}"
    try:
        from importlib import metadata

        for dist in ("nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu13", "nvidia-cuda-nvrtc-cu12"):
            try:
                return f"{text} ({dist} {metadata.version(dist)})"
            except metadata.PackageNotFoundError:
                continue
    except ImportError:
        pass
    return text
