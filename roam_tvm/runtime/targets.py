"""Targets: turn user input into a ``tvm.target.Target`` and say what kind it is.

The bottom of ``roam_tvm.runtime``: it imports nothing from the package, and
``schedule``, ``pipeline`` and ``build`` import from it (data flows one way:
targets -> schedule/verify -> pipeline -> build).
"""

from __future__ import annotations

import tvm

__all__ = ["H100_TAG", "cuda_target", "cuda_target_for_device", "as_target", "is_gpu_target"]

H100_TAG = "nvidia/nvidia-h100"


def cuda_target(arch: str | None = None, host: str | None = "llvm") -> tvm.target.Target:
    """The H100 CUDA target: TVM's ``nvidia/nvidia-h100`` tag (arch sm_90a) with an llvm host.

    Parameters
    ----------
    arch : str, optional
        Overrides the architecture (e.g. "sm_80").
    host : str, optional
        The host target (default "llvm"); None keeps the tag's host.

    Returns
    -------
    tvm.target.Target
        Falls back to a plain ``{"kind": "cuda", "arch": "sm_90a"}`` target if the tag is
        missing (TVM 0.27 no longer parses CLI strings such as "cuda -arch=sm_90a").
    """
    try:
        target = tvm.target.Target(H100_TAG)
        if arch is not None and str(target.attrs.get("arch", "")) != arch:
            cfg = dict(target.export())
            cfg["arch"] = arch
            cfg.pop("tag", None)
            target = tvm.target.Target(cfg)
    except Exception:  # pylint: disable=broad-except
        target = tvm.target.Target({"kind": "cuda", "arch": arch or "sm_90a"})
    if host is not None and target.host is None:
        target = tvm.target.Target(target, host=tvm.target.Target(host))
    return target


def as_target(target: str | tvm.target.Target | None) -> tvm.target.Target:
    """Turn a string, a Target or None (the current target scope) into a Target.

    ``"cuda"`` means ``cuda_target()`` (the H100 with an llvm host).
    """
    if target is None:
        target = tvm.target.Target.current(allow_none=True)
        if target is None:
            raise ValueError(
                "no target given and no tvm.target.Target scope is active; "
                "pass target= or call inside `with tvm.target.Target(...)`"
            )
        return target
    if isinstance(target, tvm.target.Target):
        return target
    if isinstance(target, str) and target.strip() == "cuda":
        return cuda_target()
    return tvm.target.Target(target)


def is_gpu_target(target: tvm.target.Target) -> bool:
    """True for targets whose kernels need thread binding (cuda, rocm, metal, vulkan...)."""
    return "gpu" in target.keys


def cuda_target_for_device(index: int = 0, host: str | None = "llvm") -> tvm.target.Target:
    """``cuda_target`` for the architecture of the GPU present (``tvm.cuda(index)``).

    An H100 (compute 9.0) keeps the tag's ``sm_90a``; any other GPU gets ``sm_<major><minor>``
    so that the kernels run on it. Without a visible GPU this is ``cuda_target()``.
    """
    dev = tvm.cuda(index)
    version = dev.compute_version if tvm.runtime.enabled("cuda") and dev.exist else None
    if not version or version == "9.0":
        return cuda_target(host=host)
    return cuda_target(arch="sm_" + version.replace(".", ""), host=host)
