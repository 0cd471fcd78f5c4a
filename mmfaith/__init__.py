"""mmfaith: build, verify, release, load and score benchmarks of faithful multimodal reasoning."""
from __future__ import annotations

# The one place the version is written: pyproject.toml reads it (`[tool.setuptools.dynamic]`), so importing
# mmfaith costs no importlib.metadata look-up (about 0.1 s of `mmfaith --help`).
__version__ = "0.1.0"

__all__ = ["__version__"]
