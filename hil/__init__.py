"""exynos-hil: hardware-in-the-loop CI for ExecuTorch's Samsung Exynos (ENN) backend."""

__version__ = "0.1.0"
