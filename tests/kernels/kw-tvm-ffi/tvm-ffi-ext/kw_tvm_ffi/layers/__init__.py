"""A sub-package, shipped with the variant as kernel-builder ships it."""

LAYERS = ["AddOne"]
