"""What ``scripts/gpu-check --bundle`` carries to a bare GPU image (not part of the product).

``ops/``: torch stand-ins for the sgl-kernel operators SGLang 0.5.23's CUDA path calls in
gpu-check's configuration; ``site/sgl_kernel``: the importable ``sgl_kernel`` package made
of them; ``bootstrap.py``: the after-import hooks that route SGLang's JIT tree kernels to
them. See docs/gpu-check.md ("The bundle").
"""
