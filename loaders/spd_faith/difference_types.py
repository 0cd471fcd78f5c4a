"""SPD-Faith's difference types and the words that name them, one vocabulary for the records (the official
import normalises its types with it), the loader's typed views and the judge that reads a model's claims."""
from __future__ import annotations

TYPE_SYNONYMS: dict[str, str] = {
    **{w: "color" for w in ("color", "colour", "colors", "colours", "recolor", "recolour", "recolored",
                            "recoloured", "changed color", "changed colour", "color change", "colour change",
                            "color changed", "colour changed", "changes color", "change color", "hue", "tint",
                            "painted", "turned", "turns")},
    **{w: "remove" for w in ("remove", "removed", "removal", "missing", "gone", "disappeared", "disappears",
                             "disappear", "vanished", "absent", "deleted", "delete", "erased", "added", "add",
                             "addition", "appeared", "appears", "appear", "no longer")},
    **{w: "position" for w in ("position", "positions", "moved", "move", "moves", "movement", "shifted", "shift",
                               "shifts", "relocated", "relocation", "repositioned", "displaced", "location",
                               "placement")},
}
