"""What the machine offers the sandbox: the CUDA toolkit (``cuda``: nvcc, ncu, compute-sanitizer, nvdisasm,
libraries), a description of the environment a verdict was produced in (``environment``), a small on-disk
JSON cache (``cache``) and killing a process tree (``processes``).

Imports nothing of ``kernels_env`` beyond ``rules``; torch only lazily.
"""
