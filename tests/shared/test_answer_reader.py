"""The shared answer reader (evaluators/answers.py, docs/answers.md) on tables of realistic replies, written
from how models answer (markdown, LaTeX, explanations, second thoughts, refusals), each with what a person
reads from it; and the same replies through each family's entry point (VFaith, CRM, MCoT read alike)."""
from __future__ import annotations

import pytest

from mmfaith.evaluators.answer_llm import ChoiceReader
from mmfaith.evaluators.answers import read_choice, read_choice_set, read_count, read_yes_no
from mmfaith.evaluators.coverage import Tally, status_of
from mmfaith.evaluators.crm.metrics import final_answer as crm_answer
from mmfaith.evaluators.mcot.protocol import answer_letter as mcot_answer
from mmfaith.evaluators.spd_faith.claims import claims_from_text
from mmfaith.evaluators.vfaith.score import _answer as vfaith_answer

OPTIONS = [{"label": "A", "text": "red"}, {"label": "B", "text": "blue car"}, {"label": "C", "text": "green"},
           {"label": "D", "text": "yellow"}]

MULTIPLE_CHOICE = [
    # a label in every dress
    ("A", "A"), ("a", "A"), ("(A)", "A"), ("A.", "A"), ("A)", "A"), ("**A**", "A"), ("*A*", "A"), ("`A`", "A"),
    ("Answer: A", "A"), ("Answer: **A**", "A"), ("**Answer: B**", "B"), ("Final answer: C", "C"),
    ("The answer is (A) because the car is red.", "A"), ("The answer is B.", "B"), ("The correct option is D.", "D"),
    ("Option B", "B"), ("option c", "C"), ("I choose B.", "B"), ("I think it's C.", "C"), ("I would say D", "D"),
    ("\\boxed{A}", "A"), ("\\boxed{\\text{A}}", "A"), ("\\boxed{\\textbf{B}}", "B"), ("\\boxed{Option B}", "B"),
    ("\\boxed{B) blue car}", "B"), ("\\boxed{(C)}", "C"), ("$\\boxed{D}$", "D"), ("\\boxed{\\mathrm{C}}", "C"),
    ("<answer>A</answer>", "A"), ("<ANSWER>B</ANSWER>", "B"), ("<answer>b</answer>", "B"),
    ("<answer>**B**</answer>", "B"), ("<answer> (C) green </answer>", "C"),
    # a label with its own option's text, or an option's text alone
    ("A. red", "A"), ("(B) blue car", "B"), ("B) Blue car.", "B"), ("blue car", "B"), ("Green.", "C"),
    ("\\boxed{yellow}", "D"),
    # explanations around the answer
    ("Looking at the image, the vehicle near the curb is painted blue.\n\nAnswer: B", "B"),
    ("B. The car in the foreground is blue car.", "B"),
    ("(B) because the car is clearly blue", "B"),
    ("A careful look at the picture shows a vehicle. The answer is B", "B"),
    ("A red sign is visible, but the car itself is blue. So the answer is B.", "B"),
    ("Step 1: find the car. Step 2: check its colour.\n**B**", "B"),
    ("The car appears green in the shade.\n\nC", "C"),
    # second thoughts: the last answer wins
    ("C. Green - no wait, B.", "B"),
    ("<answer>B</answer> ... on reflection <answer>A</answer>", "A"),
    ("\\boxed{A} Hmm, actually the car is blue: \\boxed{B}", "B"),
    ("The answer is A. Actually, B.", "B"),
    ("I first thought C, but on second thought, D.", "D"),
    # two options, refusals, nothing recognisable: unanswered
    ("A and C", None), ("B and C", None), ("The answer is B or C", None), ("\\boxed{A, C}", None),
    ("I cannot determine the colour from this image.", None), ("It is impossible to tell.", None),
    ("None of the options.", None), ("", None), ("   ", None), ("\\boxed{}", None), ("<answer>none</answer>", None),
    ("<answer>purple</answer>", None), ("The car looks purple.", None), ("E", None), ("A. green", None),
    ("It could be red and it could be green.", None), ("A car.", None), ("hello", None),
]

PERCEPTION = [
    ("\\boxed{A, C}", {"A", "C"}), ("\\boxed{A,C}", {"A", "C"}), ("\\boxed{AC}", {"A", "C"}), ("\\boxed{A C}", {"A", "C"}),
    ("\\boxed{A and C}", {"A", "C"}), ("\\boxed{A; C}", {"A", "C"}), ("\\boxed{A/C}", {"A", "C"}),
    ("\\boxed{A & D}", {"A", "D"}), ("\\boxed{(A), (C)}", {"A", "C"}), ("\\boxed{\\text{A, C}}", {"A", "C"}),
    ("\\boxed{A}", {"A"}), ("\\boxed{Only A}", {"A"}), ("\\boxed{B}", {"B"}), ("\\boxed{red, green}", {"A", "C"}),
    ("\\boxed{red and blue car}", {"A", "B"}), ("\\boxed{none}", set()), ("\\boxed{None}", set()),
    ("\\boxed{}", set()), ("\\boxed{none of them}", set()), ("\\boxed{ABCD}", {"A", "B", "C", "D"}),
    ("\\boxed{A, B, C, D}", {"A", "B", "C", "D"}), ("\\boxed{A,B}", {"A", "B"}), ("\\boxed{B,D}", {"B", "D"}),
    ("\\boxed{C}", {"C"}), ("\\boxed{D.}", {"D"}), ("\\boxed{a, c}", {"A", "C"}), ("\\boxed{**A**, **C**}", {"A", "C"}),
    ("<answer>A, C</answer>", {"A", "C"}), ("<answer>B</answer>", {"B"}), ("<ANSWER>A and D</ANSWER>", {"A", "D"}),
    ("A, C", {"A", "C"}), ("A/C", {"A", "C"}), ("Only A", {"A"}), ("AC", {"A", "C"}), ("A and C", {"A", "C"}),
    ("A", {"A"}), ("B", {"B"}), ("red, green", {"A", "C"}), ("A; B", {"A", "B"}), ("A & C", {"A", "C"}),
    ("The answers are A and D.", {"A", "D"}), ("The options are B, C.", {"B", "C"}),
    ("I see the red and green objects. The answer is A and C.", {"A", "C"}),
    ("Looking closely: the answers are A, C", {"A", "C"}),
    ("The answer is B.", {"B"}),
    ("Answer: A/C", {"A", "C"}),
    ("\\boxed{A} then corrected \\boxed{A, C}", {"A", "C"}),
    ("\\boxed{A, C} wait \\boxed{C}", {"C"}),
    ("\\boxed{A, E}", None), ("\\boxed{purple}", None), ("\\boxed{A, purple}", None), ("\\boxed{red, pink}", None),
    ("I cannot tell.", None), ("", None), ("The image is blurry.", None), ("\\boxed{E}", None),
    ("\\boxed{Z, Y}", None), ("<answer>purple</answer>", None), ("\\boxed{B. red}", None), ("\\boxed{all of them?}", None),
    ("Hmm.", None),
]

# (reply, asked: same | different, read): True yes, False no, None unread
YES_NO = [
    ("\\boxed{yes}", "same", True), ("\\boxed{no}", "same", False), ("\\boxed{Yes}", "different", True),
    ("\\boxed{No}", "different", False), ("\\boxed{\\text{Yes}}", "same", True), ("\\boxed{\\textbf{No}}", "different", False),
    ("\\boxed{YES}", "same", True), ("\\boxed{yes.}", "same", True), ("\\boxed{No.}", "different", False),
    ("Yes.", "same", True), ("No.", "same", False), ("yes", "different", True), ("no", "different", False),
    ("Yes, there are no differences.", "same", True), ("No, they are not the same.", "same", False),
    ("Yes, the pictures differ.", "different", True), ("No, they look identical.", "different", False),
    ("\\boxed{No difference}", "same", True), ("\\boxed{No difference}", "different", False),
    ("\\boxed{No differences}", "same", True), ("\\boxed{identical}", "same", True),
    ("\\boxed{identical}", "different", False), ("\\boxed{different}", "different", True),
    ("\\boxed{different}", "same", False), ("\\boxed{not the same}", "same", False),
    ("\\boxed{The same}", "same", True), ("\\boxed{they differ}", "different", True),
    ("I compared them carefully. The bus is gone in the second one.\n\\boxed{no}", "same", False),
    ("The cup changed from red to blue. \\boxed{yes}", "different", True),
    ("Everything matches: sky, bus, people. \\boxed{yes}", "same", True),
    ("I see no differences between the two pictures.", "different", False),
    ("I see no differences between the two pictures.", "same", True),
    ("After comparing, the pictures are identical.", "same", True),
    ("After comparing, the pictures are identical.", "different", False),
    ("The dog is missing from the second picture, so they are different.", "different", True),
    ("The dog is missing from the second picture, so they are different.", "same", False),
    ("The answer is yes.", "same", True), ("The answer is no.", "different", False),
    ("Answer: Yes", "different", True), ("Answer: No", "same", False),
    ("Conclusion: yes", "same", True),
    ("**Yes**", "same", True), ("**No**", "different", False),
    ("Yes, a chair moved.", "different", True),
    ("No. There is a difference: the car is red now.", "same", False),
    ("There are no visible changes. \\boxed{yes}", "same", True),
    ("There are no visible changes. \\boxed{no}", "different", False),
    ("\\boxed{no} (the umbrella changed colour)", "same", False),
    ("\\boxed{yes} because nothing changed", "same", True),
    ("```json\n[]\n```\n\\boxed{yes}", "same", True),
    ("```json\n[{\"type\": \"remove\", \"object\": \"dog\"}]\n```\nFinally: \\boxed{yes}", "different", True),
    ("", "same", None), ("   ", "different", None), ("I am not sure.", "same", None),
    ("\\boxed{maybe}", "same", None), ("\\boxed{}", "different", None), ("The image is too small.", "different", None),
    ("It depends on the lighting.", "same", None), ("\\boxed{?}", "different", None),
    ("Hard to say.", "same", None),
]

COUNTS = [
    ("\\boxed{3}", 3), ("\\boxed{0}", 0), ("\\boxed{ 2 }", 2), ("\\boxed{\\text{2}}", 2), ("\\boxed{two}", 2),
    ("\\boxed{Three}", 3), ("\\boxed{none}", 0), ("\\boxed{None}", 0), ("\\boxed{no differences}", 0),
    ("\\boxed{2 differences}", 2), ("\\boxed{\\text{2 differences}}", 2), ("\\boxed{N = 4}", 4), ("\\boxed{1}", 1),
    ("\\boxed{10}", 10), ("\\boxed{twelve}", 12), ("\\boxed{5}.", 5),
    ("There are 3 differences.", 3), ("There are three differences.", 3), ("I found two differences.", 2),
    ("I found 1 difference.", 1), ("No differences.", 0), ("There are no differences.", 0),
    ("The pictures are identical.", 0), ("The two pictures are exactly the same.", 0),
    ("The number of differences is 2, located at (120, 45).", 2),
    ("The number of differences is 4.", 4),
    ("Total: 3", 3), ("Answer: 2", 2), ("The answer is 5.", 5),
    ("Differences found: 2", 2),
    ("1. The car at (120, 45) is red now.\n2. The dog at (300, 210) is gone.\nThere are 2 differences.", 2),
    ("There are 2 differences: 1. the car at [10, 20, 30, 40] changed colour. 2. the dog is gone.", 2),
    ("The bus (bbox [12, 40, 200, 180]) moved. In total there are 1 differences.", 1),
    ("I count four changes in total.", 4),
    ("The man moved 50 pixels left. That is 1 difference.", 1),
    ("There are 3 discrepancies between the images.", 3),
    ("After a careful look I spotted 2 differences: a cup and a chair.", 2),
    ("Three differences: the cup, the dog and the bench.", 3),
    ("The sign at (34, 56) changed. 1", 1),
    ("The count is 3.", 3),
    ("Looking at region 1 and region 2, there are 2 differences.", 2),
    ("I see 2 differences in the 640x480 images.", 2),
    ("The images differ in 3 places; \\boxed{3}", 3),
    ("I think there are 2 differences, no wait, \\boxed{3}", 3),
    ("\\boxed{2} ... on reflection \\boxed{1}", 1),
    ("```json\n[{\"type\": \"remove\"}]\n```\n\\boxed{1}", 1),
    ("Zero differences.", 0),
    ("one difference", 1),
    ("There is one difference: the dog is missing.", 1),
    ("Two differences.", 2),
    ("5", 5),
    ("2.", 2),
    ("I found 3 differences (at 10%, 20% and 30% of the width).", 3),
    ("The number of differences: 6", 6),
    ("", None), ("   ", None), ("I cannot tell.", None), ("\\boxed{}", None), ("\\boxed{many}", None),
    ("It is hard to say.", None), ("\\boxed{?}", None), ("Some things changed.", None),
]

# MCoT replies as the agent loop reads them: the answering turn's text
MCOT_TAGS = [
    ("<answer>A</answer>", "A"), ("<answer>B</answer>", "B"), ("<answer>b</answer>", "B"),
    ("<answer>**B**</answer>", "B"), ("<ANSWER>C</ANSWER>", "C"), ("<Answer>D</Answer>", "D"),
    ("<answer>(A)</answer>", "A"), ("<answer> (A) red </answer>", "A"), ("<answer>A.</answer>", "A"),
    ("<answer>Option B</answer>", "B"), ("<answer>blue car</answer>", "B"), ("<answer>\\boxed{C}</answer>", "C"),
    ("<answer>The answer is D</answer>", "D"), ("<answer>B) blue car</answer>", "B"),
    ("In the crop the car is blue. <answer>B</answer>", "B"),
    ("The zoomed region shows a red vehicle.\n<answer>A</answer>", "A"),
    ("I zoomed in and saw green leaves. <answer>C</answer>", "C"),
    ("<think>The car is blue.</think>\n<answer>B</answer>", "B"),
    ("<think>Maybe A?</think><answer>D</answer>", "D"),
    ("<answer>B</answer> ... on reflection <answer>A</answer>", "A"),
    ("<answer>C</answer> wait, the crop was green: <answer>C</answer>", "C"),
    ("<answer>A</answer><answer>B</answer>", "B"),
    ("\\boxed{B}", "B"), ("\\boxed{\\text{B}}", "B"), ("so \\boxed{B} and <answer>A</answer>", "A"),
    ("<answer>A</answer> hmm \\boxed{D}", "D"),
    ("Based on the reasoning above, \\boxed{C}", "C"),
    ("The answer is B.", "B"), ("B", "B"), ("b", "B"), ("Answer: **A**", "A"),
    ("The answer is (A) because the zoomed crop is red.", "A"),
    ("<answer>\nB\n</answer>", "B"), ("<answer> b. </answer>", "B"), ("<answer>[B]</answer>", "B"),
    ("<answer>yellow</answer>", "D"), ("<answer>Yellow.</answer>", "D"), ("<answer>the green one</answer>", "C"),
    ("<answer>A and C</answer>", None), ("<answer>B or C</answer>", None), ("<answer>none</answer>", None),
    ("<answer></answer>", None), ("<answer>unknown</answer>", None), ("<answer>purple</answer>", None),
    ("<answer>I cannot tell</answer>", None), ("<answer>E</answer>", None),
    ("I need to look closer.", None), ("", None), ("<answer>A. green</answer>", None),
    ("<answer>A careful look is needed</answer>", None),
    ("The crop is blurry; I cannot determine the colour.", None),
    ("<answer>A</answer> Hmm, <answer>A and C</answer>", None),
    ("<answer>C</answer> no wait <answer>none</answer>", None),
    ("<answer>(D)</answer>", "D"), ("<answer>d</answer>", "D"), ("<answer>**Answer: C**</answer>", "C"),
    ("<answer>\\text{A}</answer>", "A"), ("Final: <answer>B</answer>.", "B"),
    ("<answer>Option (C)</answer>", "C"), ("<answer>C: green</answer>", "C"),
]


# SPD-Faith free-text claims (the rule judge's extractor, evaluators/spd_faith/claims.py), as a person reads
# each sentence: (type, COCO category, colour after the change)
SPD_CLAIMS = [
    ('The car is not red anymore but green.', [('color', 'car', 'green')]),
    ('The umbrella is no longer blue but yellow.', [('color', 'umbrella', 'yellow')]),
    ('The dog is not there anymore.', [('remove', 'dog', None)]),
    ('The dog is no longer visible in the second picture.', [('remove', 'dog', None)]),
    ('Nothing was removed.', []),
    ('The car did not change colour.', []),
    ('There are no differences.', []),
    ('The cup turned blue.', [('color', 'cup', 'blue')]),
    ('The cup changed from red to blue.', [('color', 'cup', 'blue')]),
    ('The cup is now blue.', [('color', 'cup', 'blue')]),
    ('The cup became blue.', [('color', 'cup', 'blue')]),
    ('The cup, which was red, turned blue.', [('color', 'cup', 'blue')]),
    ('The bus was removed.', [('remove', 'bus', None)]),
    ('The bus is missing in the second image.', [('remove', 'bus', None)]),
    ('The bus disappeared.', [('remove', 'bus', None)]),
    ('The bus is gone.', [('remove', 'bus', None)]),
    ('The chair moved to the left.', [('position', 'chair', None)]),
    ('The chair was moved.', [('position', 'chair', None)]),
    ('The person moved to the right.', [('position', 'person', None)]),
    ('The bench has been relocated.', [('position', 'bench', None)]),
    ('The bottle changed position.', [('position', 'bottle', None)]),
    ('The kite was removed and the car turned white.', [('remove', 'kite', None), ('color', 'car', 'white')]),
    ('The red car turned green.', [('color', 'car', 'green')]),
    ('A dog was removed from the scene.', [('remove', 'dog', None)]),
    ('The second picture has no cat.', [('remove', 'cat', None)]),
    ('The color of the bus changed to yellow.', [('color', 'bus', 'yellow')]),
    ("The bus's color is now yellow instead of red.", [('color', 'bus', 'yellow')]),
    ('The umbrella changed color from blue to pink.', [('color', 'umbrella', 'pink')]),
    ('The pizza is missing.', [('remove', 'pizza', None)]),
    ('In the second image, the clock has been removed.', [('remove', 'clock', None)]),
    ('The vase is not blue anymore but purple.', [('color', 'vase', 'purple')]),
    ('The truck no longer red but black.', [('color', 'truck', 'black')]),
    ("I don't see any change in the dog.", []),
    ('The cat was not removed.', []),
    ('Neither the bus nor the car changed.', []),
    ('The sheep changed to black.', [('color', 'sheep', 'black')]),
    ('The boat moved up.', [('position', 'boat', None)]),
    ('The horse was removed; the car turned red.', [('remove', 'horse', None), ('color', 'car', 'red')]),
    ('The elephant is no longer there.', [('remove', 'elephant', None)]),
    ('The sofa (couch) turned green.', [('color', 'couch', 'green')]),
    ('The laptop was deleted.', [('remove', 'laptop', None)]),
    ('The TV has been erased.', [('remove', 'tv', None)]),
    ('The handbag changed its color into brown.', [('color', 'handbag', 'brown')]),
    ('The bird flew away.', [('remove', 'bird', None)]),
    ('The stop sign is now orange.', [('color', 'stop sign', 'orange')]),
    ('The traffic light was removed.', [('remove', 'traffic light', None)]),
    ('The tie is gray instead of red.', [('color', 'tie', 'gray')]),
    ('The bicycle shifted to the left.', [('position', 'bicycle', None)]),
    ('Both pictures show a dog.', []),
    ('The kite became pink.', [('color', 'kite', 'pink')]),
    ("The train's colour turned blue.", [('color', 'train', 'blue')]),
    ('The frisbee was taken out.', [('remove', 'frisbee', None)]),
    ('The giraffe moved slightly.', [('position', 'giraffe', None)]),
    ('The cow is absent in the second image.', [('remove', 'cow', None)]),
    ('The suitcase is now purple.', [('color', 'suitcase', 'purple')]),
    ('The bowl is not there in the second picture.', [('remove', 'bowl', None)]),
    ('The skateboard changed from white to black.', [('color', 'skateboard', 'black')]),
    ('The motorcycle was removed from the street.', [('remove', 'motorcycle', None)]),
    ('The person on the left is gone.', [('remove', 'person', None)]),
    ('The airplane turned red.', [('color', 'airplane', 'red')]),
]


@pytest.mark.parametrize(("text", "claims"), SPD_CLAIMS)
def test_spd_claims_from_text(text: str, claims: list[tuple]) -> None:
    assert [(claim.type, claim.category, claim.color) for claim in claims_from_text(text)] == claims


def test_each_table_has_at_least_60_replies() -> None:
    for table in (MULTIPLE_CHOICE, PERCEPTION, YES_NO, COUNTS, MCOT_TAGS, SPD_CLAIMS):
        assert len(table) >= 60


@pytest.mark.parametrize(("reply", "label"), MULTIPLE_CHOICE)
def test_multiple_choice(reply: str, label: str | None) -> None:
    assert read_choice(reply, OPTIONS) == label


@pytest.mark.parametrize(("reply", "labels"), PERCEPTION)
def test_perception_sets(reply: str, labels: set[str] | None) -> None:
    read = read_choice_set(reply, OPTIONS)
    assert (None if read is None else set(read)) == labels


@pytest.mark.parametrize(("reply", "asks", "value"), YES_NO)
def test_yes_no(reply: str, asks: str, value: bool | None) -> None:
    assert read_yes_no(reply, asks) is value


@pytest.mark.parametrize(("reply", "count"), COUNTS)
def test_counts(reply: str, count: int | None) -> None:
    assert read_count(reply) == count


@pytest.mark.parametrize(("reply", "label"), MCOT_TAGS)
def test_mcot_answer_tags(reply: str, label: str | None) -> None:
    assert mcot_answer(reply, OPTIONS) == label


class _Pair:
    record = {"question_type": "multiple-choice", "options": OPTIONS}


SAME_EVERYWHERE = ["A", "\\boxed{A}", "Answer: **A**", "The answer is (A) because the car is red.", "a",
                   "\\boxed{\\text{A}}", "<answer>B</answer> ... on reflection <answer>A</answer>"]


@pytest.mark.parametrize("reply", SAME_EVERYWHERE)
def test_vfaith_crm_and_mcot_read_a_reply_alike(reply: str) -> None:
    assert vfaith_answer(_Pair(), reply, ChoiceReader()) == crm_answer(reply, OPTIONS) == mcot_answer(reply, OPTIONS) == "A"


def test_two_options_are_unanswered_in_every_family() -> None:
    assert vfaith_answer(_Pair(), "A and C", ChoiceReader()) is None
    assert crm_answer("A and C", OPTIONS) is None and mcot_answer("A and C", OPTIONS) is None


def test_the_paper_rule_reads_only_the_box() -> None:
    # VFaith section 4.1: answers are extracted from \boxed{}; a bare label is unanswered under --extract paper
    assert read_choice("A", OPTIONS, "paper") is None and read_choice("\\boxed{A}", OPTIONS, "paper") == "A"
    assert read_choice_set("A, C", OPTIONS, "paper") is None
    assert read_yes_no("Yes.", "same", "paper") is None and read_count("There are 3 differences.", "paper") is None


def test_coverage_counts_each_ending_apart_and_warns() -> None:
    # by hand: 10 expected; 6 answered, 1 unparsed, 1 empty, 1 failed, 1 missing -> answered share 0.6 (< 0.9: a
    # warning); replies received 8 -> parse rate 6/8 = 0.75 (unread 25 % > 10 %: a second warning)
    tally = Tally()
    for _ in range(6):
        tally.add(status_of({"response": "A"}, False, "A"), True)
    tally.add(status_of({"response": "hmm"}, False, None), False)
    tally.add(status_of({"response": ""}, False, None))
    tally.add(status_of(None, True, None))
    tally.add(status_of(None, False, None))
    block = tally.to_json()
    assert {k: block[k] for k in ("expected", "answered", "unparsed", "empty", "failed", "missing")} == \
           {"expected": 10, "answered": 6, "unparsed": 1, "empty": 1, "failed": 1, "missing": 1}
    assert (block["answered_share"], block["parse_rate"], block["paper_format_share"]) == (0.6, 0.75, round(6 / 7, 6))
    assert len(block["warnings"]) == 2
