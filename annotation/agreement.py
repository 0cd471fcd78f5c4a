"""Agreement between annotators on categorical verdicts: Cohen's kappa (two raters) and Fleiss' kappa.

Both return None where kappa is undefined (no items, or chance agreement is 1: everybody always
gave the same single label).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Cohen's kappa of two raters over items, each item given as (rater 1's label, rater 2's label)."""
    n = len(pairs)
    if n == 0:
        return None
    observed = sum(a == b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(first[label] * second[label] for label in first) / (n * n)
    if expected == 1:
        return None
    return (observed - expected) / (1 - expected)


def fleiss_kappa(items: Sequence[Sequence[str]]) -> float | None:
    """Fleiss' kappa over items rated by two or more raters each (counts may differ between items:
    each item's agreement uses its own rater count, the label shares pool all ratings). Items with
    fewer than two ratings are ignored."""
    rated = [list(labels) for labels in items if len(labels) >= 2]
    if not rated:
        return None
    per_item = []
    totals: Counter[str] = Counter()
    for labels in rated:
        counts = Counter(labels)
        m = len(labels)
        per_item.append((sum(c * c for c in counts.values()) - m) / (m * (m - 1)))
        totals.update(counts)
    observed = sum(per_item) / len(per_item)
    all_ratings = sum(totals.values())
    expected = sum((c / all_ratings) ** 2 for c in totals.values())
    if expected == 1:
        return None
    return (observed - expected) / (1 - expected)
