"""Gold balance of a multiple-choice build: each template's gold distribution, what blind guesses score, the cap.

One definition for every family's build (build.json, the summary line, the release card) and for
the `prior` reference model, so "what a guess scores" means the same thing everywhere.

- An item (`GoldItem`): its template, its options `(letter, text)` and its gold letter.
- chance of a template: the mean over its items of 1 / (number of options).
- majority share: the largest share of one gold text (e.g. "yes", "1", "left", "white") among the
  template's items.
- always-A: the share of the template's items whose gold letter is "A".
- prior (leave one out, `prior_choices`): for item i, each of its options scores how many *other*
  items of the same template have that option's text as gold, ties broken by how many have that
  option's letter as gold, then by the earliest letter. The prior answers the best option; it reads
  neither the image nor item i's gold. Its expected score is the share of items it answers right
  (it is deterministic, so that is also its score).
- cap (`GoldCap`): a template's majority share may exceed chance + margin (default 0.10) by at most
  one item: a candidate whose gold would make `count > (chance + margin) * n + 1` is refused with a
  reason. So a template of n >= 20 items never holds a gold beyond chance + margin + 1/20. The same
  bound holds for the items the prior answers right among the accepted ones and the candidate
  (leave one out, as above, so the final build obeys it): a skewed source (counts, where "1" is
  the most frequent gold and sits among the options of most count questions) cannot hand the
  prior more than the cap either.
- letters (`GoldCap.lettered`): the gold letter is settled when the build keeps an item, not when
  the generator proposes it. A build rejects candidates after they are made (placement, leaks,
  the cap), so letters balanced over the candidates are not balanced over the kept items (CRM's
  coco128 existence: A 27, B 13). `lettered` moves the gold to the letter least used as gold among
  the template's kept items with as many options (its own letter when that is among the least
  used, else the earliest), swapping it with the distractor there; each letter then holds its
  share of the kept golds within one item. It depends only on the kept items, in build order, so
  the same build (or its resume) letters the same way.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_MARGIN = 0.10


@dataclass(frozen=True)
class GoldItem:
    """One multiple-choice item as the balance sees it."""

    template: str
    options: tuple[tuple[str, str], ...]
    answer: str

    @property
    def gold_text(self) -> str:
        return next(text for label, text in self.options if label == self.answer)

    @classmethod
    def of_record(cls, template: str, options: Sequence[Mapping[str, str]], answer: str) -> GoldItem:
        """From a record's `options` list of {label, text} and its gold letter."""
        return cls(template, tuple((str(o["label"]), str(o["text"])) for o in options), answer)


def _prior_letter(item: GoldItem, texts: Counter[str], letters: Counter[str]) -> str:
    """The prior's letter for `item` given the other items' gold texts and gold letters (module docstring)."""
    return min(item.options, key=lambda option: (-texts[option[1]], -letters[option[0]], option[0]))[0]


def prior_choices(items: Sequence[GoldItem]) -> list[str]:
    """The prior's letter for each item (module docstring: leave one out, within the item's template)."""
    texts: dict[str, Counter[str]] = {}
    letters: dict[str, Counter[str]] = {}
    for item in items:
        texts.setdefault(item.template, Counter())[item.gold_text] += 1
        letters.setdefault(item.template, Counter())[item.answer] += 1
    choices = []
    for item in items:
        others_texts = texts[item.template] - Counter({item.gold_text: 1})
        others_letters = letters[item.template] - Counter({item.answer: 1})
        choices.append(_prior_letter(item, others_texts, others_letters))
    return choices


def gold_summary(items: Sequence[GoldItem]) -> dict[str, dict[str, Any]]:
    """Per template: items, chance, gold texts and letters with counts, majority share, always-A and prior scores."""
    priors = prior_choices(items)
    by_template: dict[str, list[tuple[GoldItem, str]]] = {}
    for item, prior in zip(items, priors):
        by_template.setdefault(item.template, []).append((item, prior))
    summary: dict[str, dict[str, Any]] = {}
    for template, pairs in sorted(by_template.items()):
        n = len(pairs)
        golds = Counter(item.gold_text for item, _ in pairs)
        majority, top = min(golds.items(), key=lambda kv: (-kv[1], kv[0]))
        summary[template] = {
            "items": n,
            "chance": round(sum(1 / len(item.options) for item, _ in pairs) / n, 4),
            "gold": dict(sorted(golds.items())),
            "gold_letters": dict(sorted(Counter(item.answer for item, _ in pairs).items())),
            "majority": majority,
            "majority_share": round(top / n, 4),
            "always_a": round(sum(item.answer == "A" for item, _ in pairs) / n, 4),
            "prior": round(sum(item.answer == prior for item, prior in pairs) / n, 4),
        }
    return summary


def summary_line(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """One line for a build's summary: each template's size, majority gold and what always-A and the prior score."""
    parts = [f"{template} {s['items']} (majority {s['majority']!r} {s['majority_share']:.2f}, "
             f"chance {s['chance']:.2f}, always-A {s['always_a']:.2f}, prior {s['prior']:.2f})" for template, s in summary.items()]
    return "gold: " + ("; ".join(parts) if parts else "no multiple-choice items")


def gold_table(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """The release card's table (Markdown rows after a header): per template, what a blind guess scores."""
    header = ("| template | items | chance | most frequent gold (share) | always-A | prior |\n"
              "|---|---|---|---|---|---|\n")
    return header + "".join(
        f"| {template} | {s['items']} | {s['chance']:.2f} | {s['majority']} ({s['majority_share']:.2f}) | "
        f"{s['always_a']:.2f} | {s['prior']:.2f} |\n" for template, s in summary.items())


class GoldCap:
    """The per-template cap on one gold text's share and on the prior's hits (module docstring), applied
    to candidates in build order."""

    def __init__(self, margin: float = DEFAULT_MARGIN, items: Iterable[GoldItem] = ()) -> None:
        if not 0 <= margin <= 1:
            raise ValueError(f"the gold cap margin must be in [0, 1], not {margin}")
        self.margin = margin
        self.accepted: dict[str, list[GoldItem]] = {}
        for item in items:
            self.add(item)

    def add(self, item: GoldItem) -> None:
        """Count an accepted item."""
        self.accepted.setdefault(item.template, []).append(item)

    def lettered(self, item: GoldItem) -> GoldItem:
        """`item` with its gold at the letter least used among the kept items of its template and option
        count (module docstring: its own letter on a tie that includes it, else the earliest), the
        distractor that held that letter moved to the gold's old one."""
        letters = [label for label, _ in item.options]
        used = Counter(i.answer for i in self.accepted.get(item.template, []) if len(i.options) == len(letters))
        low = min(used[letter] for letter in letters)
        target = item.answer if used[item.answer] == low else next(l for l in letters if used[l] == low)
        swap = {item.answer: target, target: item.answer}
        texts = dict(item.options)
        return GoldItem(item.template, tuple((label, texts[swap.get(label, label)]) for label in letters), target)

    def refusal(self, item: GoldItem) -> str | None:
        """Why accepting `item` would break the cap, or None when it may be accepted."""
        items = [*self.accepted.get(item.template, []), item]
        n = len(items)
        chance = sum(1 / len(i.options) for i in items) / n
        limit = chance + self.margin
        count = sum(i.gold_text == item.gold_text for i in items)
        if count > limit * n + 1:
            return (f"gold balance: {item.template} would hold {count} of {n} golds {item.gold_text!r} "
                    f"(share {count / n:.2f}), more than one item above chance {chance:.2f} + margin {self.margin:.2f}")
        hits = sum(i.answer == letter for i, letter in zip(items, prior_choices(items)))
        if hits > limit * n + 1:
            return (f"gold balance: the prior (the most frequent gold of the other items) would answer {hits} of {n} "
                    f"{item.template} items right ({hits / n:.2f}), more than one item above chance {chance:.2f} + "
                    f"margin {self.margin:.2f}")
        return None
