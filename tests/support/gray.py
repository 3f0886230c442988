"""The img2gray reference, importable without pytest: the scripts the tests run inside
fresh venvs (torch and the kernel only) import it from here."""


def reference_gray(image):  # type: ignore[no-untyped-def]
    """float32 reference: products and sums rounded separately, then truncated."""
    f = image.float()
    return ((0.21 * f[..., 0] + 0.72 * f[..., 1]) + 0.07 * f[..., 2]).to(image.dtype)
