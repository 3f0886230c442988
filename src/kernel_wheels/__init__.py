"""kernel-wheels: Hub kernels as validated, reproducible wheels."""
__version__ = "0.1.0"
