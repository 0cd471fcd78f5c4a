"""Image licenses as releases and cards name them (shared by every family's rows and cards)."""
from __future__ import annotations

import re
from typing import Any

CC_URL = re.compile(r"creativecommons\.org/licenses/([a-z-]+)/(\d+\.\d+)")


def license_id(license_: dict[str, Any]) -> str:
    """A short license id: `CC-BY-NC-SA-2.0` for a Creative Commons URL, else the license's name."""
    match = CC_URL.search(license_.get("url") or "")
    if match:
        return f"CC-{match.group(1).upper()}-{match.group(2)}"
    return license_["name"]
