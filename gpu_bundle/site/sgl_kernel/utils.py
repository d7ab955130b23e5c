"""``sgl_kernel.utils`` of the stand-in: programmatic dependent launch is never used."""


def is_arch_support_pdl() -> bool:
    return False


def __getattr__(name: str):
    import sgl_kernel

    return getattr(sgl_kernel, name)
