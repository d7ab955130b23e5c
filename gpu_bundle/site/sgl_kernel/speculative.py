"""``sgl_kernel.speculative`` of the stand-in (topk-1 tree kernels)."""

from gpu_bundle.ops.spec_tree import build_tree_kernel_efficient, verify_tree_greedy  # noqa: F401


def __getattr__(name: str):
    import sgl_kernel

    return getattr(sgl_kernel, name)
