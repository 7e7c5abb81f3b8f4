"""exynos-hil: hardware-in-the-loop CI for ExecuTorch's Samsung Exynos (ENN) backend."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("exynos-hil")
    """The installed distribution's version: pyproject.toml's `version` is its one source."""
except PackageNotFoundError:  # imported from a folder that was never installed
    __version__ = "0+unknown"
