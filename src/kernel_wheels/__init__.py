"""kernel-wheels: Hub kernels as validated, reproducible wheels."""

try:  # written by setuptools-scm from git when the package is built or installed
    from ._version import __version__ as __version__  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # a source tree that was never built or installed
    __version__ = "0+unknown"

# The typed Python API (docs/api.md): every command's entry point and the values it takes
# and gives; the CLI is a thin layer over these. Imported on first use, so that
# `kernel-wheels build` on a machine with torch needs none of the checkers' libraries.
# "module" gives the attribute of the same name; "module:attribute" another one (the
# package's folders are named mirror/ and install/, so their functions go by longer names).
_API = {
    # to-wheel
    "to_wheels": "convert.pipeline", "ConvertOptions": "convert.pipeline",
    "ConversionResult": "convert.pipeline", "WheelResult": "convert.pipeline",
    "TagOptions": "wheel.plan", "VariantFilter": "kernel.selection",
    "open_source": "sources", "KernelSource": "sources",
    "parse_request": "kernel.versions", "VersionRequest": "kernel.versions",
    "NetworkSettings": "network",
    "read_lock": "locked.lockfile", "convert_locked": "locked.pipeline",
    "LockedConversion": "locked.pipeline", "write_conversion_pylocks": "locked.pylock",
    # variants, versions
    "list_variants": "sources.variant_list", "VariantList": "sources.variant_list",
    "Variant": "kernel.variants", "parse_variant": "kernel.variants",
    "list_versions": "sources.releases", "KernelVersion": "sources.releases",
    # check, verify
    "judge_wheel": "checks.verdict", "judge_wheels": "checks.verdict", "Target": "checks.verdict",
    # the names of earlier releases, kept for scripts: the same one verdict
    "check_wheel": "checks.verdict:judge_wheel", "check_wheels": "checks.verdict:judge_wheels",
    "CheckReport": "checks.report",
    "wheels_in": "checks.paths", "wheels_under": "checks.paths",
    "verify_wheels": "checks.proof", "ProofResult": "checks.proof", "Proof": "checks.proof",
    "verify_installed": "install.audit",
    "Policy": "provenance.policy", "PolicyOptions": "provenance.policy",
    # index, yank, publish
    "build_site": "site.build", "yank_release": "site.build", "SiteResult": "site.build",
    "publish": "remote.publish", "PublishOutcome": "remote.publish",
    "resolve_repository": "remote.credentials", "Repository": "remote.credentials",
    # install, local-kernels
    "install_kernel": "install.core:install", "install_kernels": "install.core:install_many",
    "InstallOptions": "install.core", "InstallResult": "install.core",
    "IndexFlags": "remote.index_settings", "index_settings": "remote.index_settings:resolve",
    "installed_kernels": "install.installed", "local_kernels_value": "install.installed",
    "unmet_pins": "install.installed",
    # mirror, serve, build
    "mirror_kernels": "mirror.pipeline:mirror", "MirrorOptions": "mirror.pipeline",
    "MirrorResult": "mirror.pipeline", "open_target": "mirror.pipeline",
    "HubLister": "mirror.listing", "mirror_listings": "mirror.listing:gather",
    "run_server": "serve.server", "ServeSettings": "serve.settings", "parse_kernels": "serve.settings",
    "build": "building.pipeline", "BuildOptions": "building.pipeline", "BuildReport": "building.pipeline",
}
__all__ = sorted(_API)


def __getattr__(name: str) -> object:
    if name in _API:
        import importlib

        module, _, attribute = _API[name].partition(":")
        return getattr(importlib.import_module(f".{module}", __name__), attribute or name)
    raise AttributeError(f"module 'kernel_wheels' has no attribute {name!r}")
