"""Stand-in ``sgl_kernel`` for a GPU image without sglang-kernel (gpu_bundle; not SGLang's).

Put ``gpu_bundle/site`` (and the repo root) on ``sys.path``. What it exposes:
  * the operators implemented in ``gpu_bundle.ops`` (torch, capturable), under sgl-kernel's
    names and signatures;
  * every ``*_cpu`` name as a call into ``torch.ops.sgl_kernel.<name>`` at call time (the CPU
    rig registers those), so the CPU path runs with this package too;
  * any other name, and any ``sgl_kernel.<submodule>``, as a stub that imports fine and
    raises ``NotImplementedError`` naming itself when called: SGLang imports dozens of
    kernels at module level that gpu-check's configuration never calls; a call to one is
    a loud failure, never a silent wrong answer.
``CALLED_STUBS`` records the stubs called in this process (tests and reports read it).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

import torch

from gpu_bundle.ops.elementwise import (  # noqa: F401
    fused_add_rmsnorm,
    gelu_and_mul,
    gelu_quick,
    gelu_tanh_and_mul,
    gemma_fused_add_rmsnorm,
    gemma_rmsnorm,
    rmsnorm,
    rotary_embedding,
    silu_and_mul,
)
from gpu_bundle.ops.sampling import (  # noqa: F401
    min_p_sampling_from_probs,
    top_k_renorm_prob,
    top_k_renorm_probs,
    top_k_top_p_sampling_from_probs,
    top_p_renorm_prob,
    top_p_renorm_probs,
)
from gpu_bundle.ops.spec_tree import build_tree_kernel_efficient, verify_tree_greedy  # noqa: F401

__version__ = "0.4.10+gpu-bundle-stand-in"
STAND_IN = True
CALLED_STUBS: list[str] = []


def weak_ref_tensor(tensor):
    """sgl-kernel returns a tensor sharing the storage without owning it; this returns the
    same storage as a view that does own it (values identical, memory freed later)."""
    return tensor.view(tensor.shape) if isinstance(tensor, torch.Tensor) else tensor


class _Stub:
    """An unimplemented name: attributes are stubs too (``scalar_types.uint4b8``); a call
    raises ``NotImplementedError`` naming it."""

    def __init__(self, qualname: str) -> None:
        self.__qualname = qualname
        self.__name__ = qualname.rsplit(".", 1)[-1]

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub(f"{self.__qualname}.{name}")

    def __call__(self, *args, **kwargs):
        CALLED_STUBS.append(self.__qualname)
        raise NotImplementedError(
            f"{self.__qualname} is not implemented by the gpu_bundle "
            "stand-in sgl_kernel (gpu-check's configuration was not "
            "expected to call it)"
        )

    def __repr__(self) -> str:
        return f"<gpu_bundle stub {self.__qualname}>"


def _stub(qualname: str) -> _Stub:
    return _Stub(qualname)


def _cpu_op(name: str):
    def call(*args, **kwargs):
        return getattr(torch.ops.sgl_kernel, name)(*args, **kwargs)

    call.__name__ = name
    return call


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _cpu_op(name) if name.endswith("_cpu") else _stub(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    value = _cpu_op(name) if name.endswith("_cpu") else _stub(f"sgl_kernel.{name}")
    globals()[name] = value
    return value


class _SubmoduleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import sgl_kernel.<x>`` for any x without a file here: a stub module."""

    def find_spec(self, fullname, path, target=None):
        if fullname.startswith("sgl_kernel.") and fullname.count(".") >= 1:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


if not any(isinstance(f, _SubmoduleFinder) for f in sys.meta_path):
    sys.meta_path.append(_SubmoduleFinder())
