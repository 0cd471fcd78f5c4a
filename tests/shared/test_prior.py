"""mmfaith/prior.py: the leave-one-out template prior, checked against answers worked out by hand."""
from __future__ import annotations

from mmfaith.prior import leave_one_out_prior


def test_each_item_gets_the_majority_of_the_other_items_of_its_template() -> None:
    rows = [("a", "count", "1"), ("b", "count", "1"), ("c", "count", "2"), ("d", "count", "2"), ("e", "count", "2"),
            ("f", "color", "red"), ("g", "color", "blue")]
    # By hand: a sees {1, 2, 2, 2} -> 2; c sees {1, 1, 2, 2} -> tie, "1" sorts first; f sees {blue} only.
    assert leave_one_out_prior(rows) == {"a": "2", "b": "2", "c": "1", "d": "1", "e": "1", "f": "blue", "g": "red"}


def test_a_lone_item_has_no_prior_and_order_does_not_matter() -> None:
    rows = [("x", "exists", "yes"), ("y", "exists", "yes"), ("z", "exists", "no"), ("w", "relation", "left")]
    answers = leave_one_out_prior(rows)
    assert answers == leave_one_out_prior(list(reversed(rows)))
    assert answers["w"] is None
    # x sees {yes, no}: tie -> "no"; y the same; z sees {yes, yes} -> "yes": 0 right of 4 (w has no answer).
    assert answers == {"x": "no", "y": "no", "z": "yes", "w": None}
    skewed = [(str(i), "exists", "yes") for i in range(9)] + [("9", "exists", "no")]
    # the nine "yes" items each see 8 yes / 1 no; the "no" item sees 9 yes: every answer is "yes"
    assert set(leave_one_out_prior(skewed).values()) == {"yes"}
    # several golds of one item (VFaith-like): none of its own rows vote for it
    assert leave_one_out_prior([("p", "t", "a"), ("p", "t", "a"), ("q", "t", "b")]) == {"p": "b", "q": "a"}
