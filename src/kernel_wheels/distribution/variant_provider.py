"""``kernel_wheels.distribution.variant_provider:TorchBackendPlugin``, the provider name
that published variant wheels carry (see the package's docstring): the same objects as
:mod:`kernel_wheels.install.variant_provider`."""

from __future__ import annotations

from ..install.variant_provider import TorchBackendPlugin, VariantFeatureConfig, supported_values

__all__ = ["TorchBackendPlugin", "VariantFeatureConfig", "supported_values"]
