"""SPD-Faith's audit keys (builders/spd_faith/audit.py): a recolour pair's key names its rendering."""
from __future__ import annotations

from typing import Any

from mmfaith.builders.spd_faith.audit import RENDER_HASH, item_key


def _record(plan: list[dict[str, Any]], image_b_sha256: str) -> dict[str, Any]:
    return {"source": {"dataset": "mmfaith-coco-sample", "image_id": 30}, "subset": "single",
            "build": {"plan": plan}, "image_b_sha256": image_b_sha256}


def test_a_recolour_key_changes_with_its_rendering_and_a_removal_key_does_not() -> None:
    # A verdict on a recolour judges how it was painted: the same edit rendered anew is a new item to look at.
    colour = [{"type": "color", "ann_id": 1155486, "color_after": "red", "offset": None}]
    first, second = item_key(_record(colour, "ab" * 32)), item_key(_record(colour, "cd" * 32))
    assert first == "mmfaith-coco-sample/30/single/color:1155486:red@" + ("ab" * 32)[:RENDER_HASH]
    assert first != second
    removal = [{"type": "remove", "ann_id": 1155486, "color_after": None, "offset": None}]
    assert item_key(_record(removal, "ab" * 32)) == item_key(_record(removal, "cd" * 32)) == \
        "mmfaith-coco-sample/30/single/remove:1155486"
