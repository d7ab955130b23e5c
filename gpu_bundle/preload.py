"""Imported first in every process of a patched server run with the bundle (named in
``SPECCONSOLE_SGLANG_PRELOAD`` by gpu_bundle/run.py; not part of the product).

Routes SGLang's JIT CUDA tree kernels (``sglang.kernels.ops.speculative.tree``, compiled
with nvcc through tvm-ffi at first use) to the tested torch stand-ins of
``gpu_bundle.ops.spec_tree``, and its sampled verify
(``sglang.kernels.ops.speculative.sampling``, which also needs FlashInfer's headers) to
``gpu_bundle.ops.spec_sampling``, right after each module is imported, unless
``SPECCONSOLE_GPU_BUNDLE_TREE=jit`` keeps SGLang's own. Nothing else is replaced.
"""

from __future__ import annotations

import importlib.abc
import os
import sys

TREE_MODULE = "sglang.kernels.ops.speculative.tree"
SAMPLING_MODULE = "sglang.kernels.ops.speculative.sampling"
APPLIED: list[str] = []


def route_tree(module) -> None:
    from gpu_bundle.ops import spec_tree

    module.build_tree_kernel_efficient = spec_tree.build_tree_kernel_efficient
    module.verify_tree_greedy = spec_tree.verify_tree_greedy
    APPLIED.append(TREE_MODULE)


def route_sampling(module) -> None:
    """The sampled verify (temperature > 0): its JIT kernel needs FlashInfer's headers."""
    from gpu_bundle.ops import spec_sampling

    module.tree_speculative_sampling_target_only = spec_sampling.tree_speculative_sampling_target_only
    APPLIED.append(SAMPLING_MODULE)


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, hooks: dict) -> None:
        self.hooks = hooks

    def find_spec(self, fullname, path, target=None):
        hook = self.hooks.get(fullname)
        if hook is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                run = spec.loader.exec_module

                def exec_and_hook(module, _run=run, _hook=hook):
                    _run(module)
                    _hook(module)

                spec.loader.exec_module = exec_and_hook
                return spec
        return None


def install() -> None:
    if os.environ.get("SPECCONSOLE_GPU_BUNDLE_TREE", "torch") == "jit" or APPLIED:
        return
    hooks = {TREE_MODULE: route_tree, SAMPLING_MODULE: route_sampling}
    pending = {}
    for name, hook in hooks.items():
        if name in sys.modules:
            hook(sys.modules[name])
        else:
            pending[name] = hook
    if pending and not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(pending))


install()
