"""The colour words the project reads and writes: builders name colours with them, answer readers and judges
normalise a model's words to them. Pure data and a look-up, so a reader need not load the pixel code
(builders/colors.py, which maps pixels to these names with OpenCV).
"""
from __future__ import annotations

COLOR_NAMES: tuple[str, ...] = ("black", "white", "gray", "red", "orange", "yellow", "green", "blue", "purple",
                                "pink", "brown")
COLOR_SYNONYMS: dict[str, str] = {
    "grey": "gray", "silver": "gray", "crimson": "red", "scarlet": "red", "maroon": "red",
    "navy": "blue", "cyan": "blue", "turquoise": "blue", "teal": "green", "olive": "green",
    "lime": "green", "violet": "purple", "magenta": "purple", "lavender": "purple",
    "gold": "yellow", "golden": "yellow", "beige": "brown", "tan": "brown", "ivory": "white",
    "cream": "white", "charcoal": "black", "rose": "pink",
}


def normalize_color(word: str) -> str | None:
    """A color word to its vocabulary name, or None when it is not a color we know."""
    key = word.strip().lower()
    if key in COLOR_NAMES:
        return key
    return COLOR_SYNONYMS.get(key)
