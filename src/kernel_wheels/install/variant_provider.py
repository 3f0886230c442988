"""The provider of the ``torch_backend`` variant namespace (kernel-wheels' proposal;
``wheel/variant_label.py`` says why it exists): which kernel builds the installed torch
can load, in the order the Hub's loader prefers them.

A variant-aware installer (PEP 825/826 drafts) runs it through its plugin API
(``TorchBackendPlugin.get_supported_configs()``) in the target environment. The answer
is exactly what ``kernel-wheels install`` accepts (:mod:`kernel_wheels.index.targets`), so the two pick the
same build: for torch 2.13 + CUDA 12.9, ``abi`` is ``stable213`` ... ``stable210``,
``torch213``; ``backend`` is ``cu129`` ... ``cu120``; ``noarch`` is ``cuda``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .environment import Environment, running_environment

#: The first torch with a stable ABI that kernel builds target.
_FIRST_STABLE = (2, 10)


@dataclass(frozen=True)
class VariantFeatureConfig:
    """One feature and its supported values, best first (PEP 826 plugin API)."""

    name: str
    values: list[str]
    multi_value: bool = False


def supported_values(environment: Environment) -> dict[str, list[str]]:
    """``torch_backend`` features and their supported values, best first; empty when
    the environment has no usable torch."""
    target = environment.target
    if target is None:
        return {}
    major, minor = target.torch
    abi = [f"stable{major}{m}" for m in range(minor, _FIRST_STABLE[1] - 1, -1)
           if (major, m) >= _FIRST_STABLE and major == _FIRST_STABLE[0]]
    abi.append(f"torch{major}{minor}")
    if environment.tvm_ffi is not None:
        abi.append("tvmffi{}{}".format(*environment.tvm_ffi))
    if target.backend == "cuda" and target.backend_version is not None:
        cuda_major, cuda_minor = target.backend_version
        backend = [f"cu{cuda_major}{m}" for m in range(cuda_minor, -1, -1)]
    else:
        backend = [target.backend_tag]
    noarch = "npu" if target.backend == "cann" else target.backend
    return {"abi": abi, "backend": backend, "noarch": [noarch]}


class TorchBackendPlugin:
    """The PEP 826 plugin API: ``get_supported_configs`` for the running torch."""

    namespace = "torch_backend"

    @classmethod
    def get_supported_configs(cls) -> list[VariantFeatureConfig]:
        # The probe install runs in its target, here in this process: the two see one torch.
        # Without a usable torch the values are empty: no kernel build is supported.
        return [VariantFeatureConfig(name, values)
                for name, values in supported_values(running_environment()).items()]

