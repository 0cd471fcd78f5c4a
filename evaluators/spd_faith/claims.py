"""Claims about differences, normalised, and the rule judge that extracts and relates them.

A claim is one difference a response asserts: (type, category, color). Normalisation (fixed by
the project, issue 3; SPD-Faith appendix B.2.2 scores types and the 80 COCO categories):

- category: one of the 80 COCO names, after lower-casing, dropping articles and plurals and
  mapping common synonyms (people, man, woman, boy, girl, child -> person; bike -> bicycle;
  motorbike -> motorcycle; plane -> airplane; sofa -> couch; television -> tv; phone -> cell phone;
  table -> dining table; ...). The first COCO name mentioned wins (longest phrase first, so
  "hot dog" is not "dog"); "orange" right before another name, or after a change word ("turned
  orange"), is a color, not the fruit. Anything else is `other`, which never matches. A dataset
  built from a user's COCO file may name categories its own way (`my vase`): the rule judge reads
  the pair's gold category names first (`extra`), so such a name is scored as itself.
- type: color | remove | position, from words and synonyms (recolor, colour, changed color,
  turned -> color; removed, missing, gone, added, appeared, disappeared -> remove; moved, shifted,
  position, location, relocated -> position); anything else is `other`, which never matches.
- color: the color after the change (in the second picture), in the builder's vocabulary
  (mmfaith.vocabulary.normalize_color, so crimson -> red); compared with the gold color_after
  (color_before when the pair was shown edited-first, gold_claims). The last color named after a
  change word (to, into, now, turned, became) wins; without one, the last color not named after
  "from", "was", "originally" or "of".

Extraction by the rule judge: the response's JSON list when it has one (parse_claims), each object
read through its type, object and detail fields; otherwise claims are read from the text sentence
by sentence with the same lexicons: a clause (split at ; , and but while whereas) that holds a
type word, or a color after a change word, and a category is one claim; a typed clause without a
category takes the last unclaimed category of its sentence ("The cup, which was red, turned
blue"); negated clauses ("nothing was removed") are skipped, except a corrected colour ("is not red
anymore but green", "no longer red but green": the change to green) and an object that "is not there
anymore" / "is no longer visible" / "was taken out" / "flew away", or that "the second picture has
no" (removed); "is gray instead of red" is the change to gray.

Relations (what a judge labels; the metrics in spd_faith/metrics.py match on them):
- DRF, claim vs gold (SPD-Faith appendix B.2.3, phase 2): `faithful` (same type and category,
  colors equal when both give one), `attribute_error` (same type and category, other color),
  `type_confusion` (same category, other type), `type_category_mismatch` (same type, other
  category), else `unrelated`.
- Consistency, claim of `same` vs claim of `different` (appendix B.2.3, Consistency Ratio):
  `consistent` (same category, same type, colors equal when both give one), `contradictory`
  (same category otherwise), else `unrelated`.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, Protocol

from mmfaith.vocabulary import COLOR_NAMES, COLOR_SYNONYMS, normalize_color
from mmfaith.evaluators.spd_faith.parse import parse_claims
from mmfaith.loaders.spd_faith.difference_types import TYPE_SYNONYMS
from mmfaith.nouns import noun_forms

RULES_VERSION = "spd-faith-rule-judge/1"
CLAIM_TYPES = ("color", "remove", "position")
OTHER = "other"
CLAIM_PROBES = ("same", "different", "describe")
DRF_LABELS = ("faithful", "attribute_error", "type_confusion", "type_category_mismatch")
CONSISTENCY_LABELS = ("consistent", "contradictory")
UNRELATED = "unrelated"

COCO_CATEGORIES: tuple[str, ...] = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light",
    "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow",
    "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee",
    "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove", "skateboard", "surfboard",
    "tennis racket", "bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple",
    "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch",
    "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard",
    "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase",
    "scissors", "teddy bear", "hair drier", "toothbrush",
)
CATEGORY_SYNONYMS: dict[str, str] = {
    **{w: "person" for w in ("people", "man", "men", "woman", "women", "boy", "girl", "child", "children", "kid",
                             "baby", "lady", "guy", "gentleman", "human", "adult", "player", "pedestrian",
                             "skier", "surfer", "skateboarder", "rider")},
    "bike": "bicycle", "automobile": "car", "taxi": "car", "sedan": "car", "suv": "car", "van": "car", "jeep": "car",
    "motorbike": "motorcycle", "scooter": "motorcycle", "moped": "motorcycle",
    "plane": "airplane", "aeroplane": "airplane", "jet": "airplane", "aircraft": "airplane", "airliner": "airplane",
    "locomotive": "train", "tram": "train", "lorry": "truck", "pickup": "truck", "pickup truck": "truck",
    "ship": "boat", "canoe": "boat", "kayak": "boat", "sailboat": "boat", "yacht": "boat",
    "traffic signal": "traffic light", "stoplight": "traffic light", "stop light": "traffic light",
    "hydrant": "fire hydrant", "seagull": "bird", "gull": "bird", "pigeon": "bird", "duck": "bird",
    "kitten": "cat", "kitty": "cat", "puppy": "dog", "pup": "dog", "pony": "horse", "lamb": "sheep",
    "cattle": "cow", "calf": "cow", "bull": "cow", "ox": "cow", "rucksack": "backpack", "knapsack": "backpack",
    "parasol": "umbrella", "purse": "handbag", "bag": "handbag", "necktie": "tie", "luggage": "suitcase",
    "flying disc": "frisbee", "ski": "skis", "ball": "sports ball", "football": "sports ball",
    "soccer ball": "sports ball", "tennis ball": "sports ball", "baseball": "sports ball",
    "basketball": "sports ball", "bat": "baseball bat", "glove": "baseball glove", "mitt": "baseball glove",
    "surf board": "surfboard", "racket": "tennis racket", "racquet": "tennis racket",
    "tennis racquet": "tennis racket", "glass": "wine glass", "wineglass": "wine glass", "mug": "cup",
    "hotdog": "hot dog", "doughnut": "donut", "stool": "chair", "sofa": "couch", "plant": "potted plant",
    "houseplant": "potted plant", "flowerpot": "potted plant", "flower pot": "potted plant",
    "table": "dining table", "television": "tv", "tv set": "tv", "monitor": "tv", "screen": "tv",
    "computer": "laptop", "laptop computer": "laptop", "computer mouse": "mouse", "remote control": "remote",
    "controller": "remote", "phone": "cell phone", "cellphone": "cell phone", "mobile phone": "cell phone",
    "smartphone": "cell phone", "microwave oven": "microwave", "stove": "oven", "fridge": "refrigerator",
    "teddy": "teddy bear", "stuffed animal": "teddy bear", "stuffed toy": "teddy bear",
    "hair dryer": "hair drier", "hairdryer": "hair drier", "blow dryer": "hair drier",
}
_TO_MARKERS = {"to", "into", "now", "turned", "turns", "became", "becomes"}
_FROM_MARKERS = {"from", "was", "originally", "previously", "of"}
_NOT_BUT = re.compile(r"\b(?:is\s+|was\s+|are\s+)?(?:not|no longer)\s+(\w+)(?:\s+any\s?more)?,?\s+but\s+"
                      r"(?:is\s+|now\s+|rather\s+)*(\w+)", re.IGNORECASE)
_GONE = re.compile(r"\b(?:is|are)\s+(?:not\s+there|no\s+longer\s+there|not\s+visible|no\s+longer\s+visible)"
                   r"(?:\s+any\s?more)?(?=\s+in\s+the\s+(?:second|other|edited|right|bottom)|[.,;!]|$)", re.IGNORECASE)
_TAKEN = re.compile(r"\b(?:was|were|has been|have been)\s+taken\s+(?:out|away)\b|\bflew\s+away\b", re.IGNORECASE)
_HAS_NO = re.compile(r"\b(?:the\s+)?(?:second|other|edited|right|bottom)\s+(?:picture|image|one)\s+(?:has|shows)\s+no\s+"
                     r"([\w ]+?)(?=[.,;!]|$)", re.IGNORECASE)
_INSTEAD = re.compile(r"\b(?:is|are)\s+(?:now\s+)?(\w+)\s+instead\s+of\s+(\w+)", re.IGNORECASE)
_NEGATION = re.compile(r"\b(not|no|never|nothing|none|neither|nor|without)\b|n't\b")
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSES = re.compile(r"[;,]|\b(?:and|but|while|whereas)\b")
_TYPE_KEYS = ("type", "kind", "change_type", "change")
_OBJECT_KEYS = ("object", "category", "item", "name", "target")
_COLOR_KEYS = ("color", "colour", "color_after", "new_color", "after", "to")
_DETAIL_KEYS = ("detail", "details", "description", "change")


@dataclass(frozen=True)
class Claim:
    """One asserted difference: type (color|remove|position|other), category (COCO name|other), color after."""

    type: str
    category: str
    color: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "category": self.category, "color": self.color}


@dataclass(frozen=True)
class Judgement:
    """A judge's reading of one item: the claims of each claiming probe and the labelled pairs.

    `drf[i][j]` labels describe-claim i against gold difference j; `consistency[i][j]` labels
    claim i of `same` against claim j of `different` (labels: module docstring). `source[probe]`
    says where the claims came from: json, text, llm, or none (no response).
    """

    claims: dict[str, list[Claim]]
    drf: list[list[str]]
    consistency: list[list[str]]
    source: dict[str, str]


@dataclass(frozen=True)
class JudgeCase:
    """What a judge reads for one item: the responses by probe (None: no answer) and the gold."""

    responses: dict[str, str | None]
    gold: list[Claim]
    descriptions: list[str]

    @cached_property
    def listed(self) -> dict[str, list[dict[str, Any]] | None]:
        """Each response's JSON list of claims (parse.parse_claims; None: none, or no response), read once for the
        rule judge and the item's answer status."""
        return {probe: None if text is None else parse_claims(text) for probe, text in self.responses.items()}


class Judge(Protocol):
    """Reads items into Judgements; `name` and `prompt_sha256` are provenance, `fallbacks` counts items it
    could not judge itself (an LLM judge falling back to the rules)."""

    name: str
    prompt_sha256: str | None
    fallbacks: int

    def judge_all(self, cases: Sequence[JudgeCase]) -> list[Judgement]: ...


_NON_WORD = re.compile(r"[^a-z0-9]+")


def _tokens(text: str) -> list[str]:
    return _NON_WORD.sub(" ", text.lower().replace("'s ", " ")).split()


class _Lexicon(dict[tuple[str, ...], str]):
    """Phrase (its tokens) -> canonical name; `longest`: the most tokens of a phrase (the scan's window); `firsts`:
    the tokens a phrase starts with (a scan looks up no window at another token)."""

    longest: int = 0
    firsts: frozenset[str] = frozenset()


def _lexicon(entries: Iterable[tuple[str, str]], plurals: bool) -> _Lexicon:
    lexicon = _Lexicon()
    for phrase, canonical in entries:
        for form in (noun_forms(phrase) if plurals else {phrase}):
            lexicon.setdefault(tuple(form.split()), canonical)
    lexicon.longest = max((len(phrase) for phrase in lexicon), default=0)
    lexicon.firsts = frozenset(phrase[0] for phrase in lexicon if phrase)
    return lexicon


_CATEGORY_LEXICON = _lexicon([*((c, c) for c in COCO_CATEGORIES), *CATEGORY_SYNONYMS.items()], plurals=True)
_TYPE_LEXICON = _lexicon(TYPE_SYNONYMS.items(), plurals=False)
_COLOR_WORDS = set(COLOR_NAMES) | set(COLOR_SYNONYMS)
_COCO_SET = frozenset(COCO_CATEGORIES)


@lru_cache(maxsize=64)
def _category_lexicon(extra: tuple[str, ...]) -> _Lexicon:
    """The category lexicon with a dataset's own category names (`extra`) first (module docstring)."""
    if not extra:
        return _CATEGORY_LEXICON
    return _lexicon([*((" ".join(_tokens(c)), c) for c in extra), *((c, c) for c in COCO_CATEGORIES),
                     *CATEGORY_SYNONYMS.items()], plurals=True)


def _mentions(tokens: list[str], lexicon: _Lexicon) -> list[tuple[int, int, str]]:
    """(start, end, canonical) of each lexicon phrase in the tokens, longest phrase first, left to right."""
    found, i = [], 0
    while i < len(tokens):
        if tokens[i] not in lexicon.firsts:
            i += 1
            continue
        for size in range(min(lexicon.longest, len(tokens) - i), 0, -1):
            canonical = lexicon.get(tuple(tokens[i:i + size]))
            if canonical is not None:
                found.append((i, i + size, canonical))
                i += size
                break
        else:
            i += 1
    return found


def _category_mentions(tokens: list[str], extra: tuple[str, ...] = ()) -> list[tuple[int, int, str]]:
    """Category mentions, without color words used as colors ("orange cup", "turned orange")."""
    mentions = _mentions(tokens, _category_lexicon(extra))
    starts = {start for start, _, _ in mentions}
    return [(s, e, c) for s, e, c in mentions
            if not (e - s == 1 and tokens[s] in _COLOR_WORDS
                    and (e in starts or (s > 0 and tokens[s - 1] in _TO_MARKERS | _FROM_MARKERS | {"is", "are"})))]


def _first_category(tokens: list[str], extra: tuple[str, ...] = ()) -> tuple[str, range]:
    mentions = _category_mentions(tokens, extra)
    if not mentions:
        return OTHER, range(0)
    start, end, canonical = mentions[0]
    return canonical, range(start, end)


def _color_after(tokens: list[str], skip: range = range(0)) -> tuple[str | None, bool]:
    """(color after the change, whether a change word named it); `skip` holds a category's tokens."""
    named_after, plain = None, None
    for i, token in enumerate(tokens):
        color = normalize_color(token) if i not in skip else None
        if color is None:
            continue
        before = tokens[i - 1] if i > 0 else ""
        if before in _TO_MARKERS:
            named_after = color
        elif before not in _FROM_MARKERS:
            plain = color
    return (named_after, True) if named_after else (plain, False)


@lru_cache(maxsize=4096)  # a response's object and type fields repeat: a few dozen names make most of them
def normalize_category(text: str, extra: tuple[str, ...] = ()) -> str:
    """The category (of `extra`, else COCO) the text mentions first, or `other`."""
    return _first_category(_tokens(text), extra)[0]


@lru_cache(maxsize=4096)
def normalize_type(text: str) -> str:
    """color | remove | position for the first type word in the text, or `other`."""
    mentions = _mentions(_tokens(text), _TYPE_LEXICON)
    return mentions[0][2] if mentions else OTHER


def claim_from_object(item: dict[str, Any], extra: tuple[str, ...] = ()) -> Claim:
    """One claim from an object of a response's JSON list (type, object, detail; synonyms of those keys)."""
    def field(keys: tuple[str, ...]) -> str:
        return " ".join(str(item[k]) for k in keys if isinstance(item.get(k), (str, int, float)))

    detail = field(_DETAIL_KEYS)
    kind = normalize_type(field(_TYPE_KEYS))
    if kind == OTHER:
        kind = normalize_type(detail)
    category = normalize_category(field(_OBJECT_KEYS), extra)
    if category == OTHER:
        category = normalize_category(detail, extra)
    explicit = [normalize_color(str(item[k])) for k in _COLOR_KEYS if isinstance(item.get(k), str)]
    detail_tokens = _tokens(detail)
    color = next((c for c in explicit if c), None) or _color_after(detail_tokens,
                                                                    _first_category(detail_tokens, extra)[1])[0]
    return Claim(kind, category, color)


def claims_from_text(text: str, extra: tuple[str, ...] = ()) -> list[Claim]:
    """Claims read from free text, clause by clause (module docstring gives the rule)."""
    body = _NOT_BUT.sub(_corrected, re.sub(r"\\boxed\s*\{[^{}]*\}", " ", text or ""))
    body = _GONE.sub("was removed", _TAKEN.sub("was removed", body))
    body = _HAS_NO.sub(lambda m: f"the {m.group(1)} was removed", body)
    body = _INSTEAD.sub(lambda m: f"turned {m.group(1)}" if normalize_color(m.group(1).lower()) else m.group(0), body)
    claims = []
    for sentence in _SENTENCES.split(body):
        unclaimed: list[tuple[str, range, list[str]]] = []
        for clause in _CLAUSES.split(sentence):
            if not clause or _NEGATION.search(re.sub(r"\bno longer\b", "", clause.lower())):
                continue
            tokens = _tokens(clause)
            category, where = _first_category(tokens, extra)
            kind = normalize_type(clause)
            color, named = _color_after(tokens, where)
            if kind == OTHER and named:
                kind = "color"
            if category != OTHER and kind == OTHER:
                unclaimed.append((category, where, tokens))
                continue
            if kind == OTHER:
                continue
            if category == OTHER and unclaimed:
                category, where, earlier = unclaimed.pop()
                color = color or _color_after(earlier, where)[0]
            if category != OTHER:
                claims.append(Claim(kind, category, color))
    return claims


def _corrected(match: re.Match[str]) -> str:
    """"not red anymore but green" (two colours) as the change it states, "turned green"; else unchanged."""
    if normalize_color(match.group(1).lower()) and normalize_color(match.group(2).lower()):
        return f"turned {match.group(2)}"
    return match.group(0)


def extract_claims(response: str | None, extra: tuple[str, ...] = ()) -> tuple[list[Claim], str]:
    """The rule judge's claims of one response and their source: json, text, or none (no response); `extra`: the
    dataset's own category names, read before COCO's (module docstring)."""
    return _claims_of(response, None if response is None else parse_claims(response), extra)


def _claims_of(response: str | None, listed: list[dict[str, Any]] | None,
               extra: tuple[str, ...]) -> tuple[list[Claim], str]:
    """`extract_claims` of a response whose JSON list (`parse_claims`) is already read."""
    if response is None:
        return [], "none"
    if listed is not None:
        return [claim_from_object(item, extra) for item in listed], "json"
    return claims_from_text(response, extra), "text"


def gold_claims(record: dict[str, Any], edited_first: bool = False) -> list[Claim]:
    """The gold differences of a pair record as claims; color is what the second picture the model saw shows.

    That is color_after, except for a color change shown edited-first (meta.order), where the
    second picture is the original and shows color_before.
    """
    return [Claim(d["type"], d["category"],
                  d["color_before"] if edited_first and d["type"] == "color" else d["color_after"])
            for d in record["differences"]]


def _colors_agree(a: Claim, b: Claim) -> bool:
    return a.color is None or b.color is None or a.color == b.color


def _known(value: str) -> bool:
    return value != OTHER


def drf_relation(claim: Claim, gold: Claim) -> str:
    """The DRF label of a claim against one gold difference (module docstring)."""
    same_type = _known(claim.type) and claim.type == gold.type
    same_category = _known(claim.category) and claim.category == gold.category
    if same_type and same_category:
        return "faithful" if _colors_agree(claim, gold) else "attribute_error"
    if same_category:
        return "type_confusion"
    return "type_category_mismatch" if same_type else UNRELATED


def consistency_relation(a: Claim, b: Claim) -> str:
    """The consistency label of a `same` claim against a `different` claim (module docstring)."""
    if not (_known(a.category) and a.category == b.category):
        return UNRELATED
    return "consistent" if _known(a.type) and a.type == b.type and _colors_agree(a, b) else "contradictory"


class RuleJudge:
    """The deterministic offline judge: rule extraction and field-by-field relations."""

    name = "rule"
    prompt_sha256: str | None = None
    fallbacks = 0

    def judge(self, case: JudgeCase) -> Judgement:
        own = tuple(sorted({g.category for g in case.gold} - _COCO_SET))  # a user's category names
        extracted = {probe: _claims_of(case.responses.get(probe), case.listed.get(probe), own)
                     for probe in CLAIM_PROBES}
        claims = {probe: found for probe, (found, _) in extracted.items()}
        return Judgement(
            claims=claims,
            drf=[[drf_relation(c, g) for g in case.gold] for c in claims["describe"]],
            consistency=[[consistency_relation(a, b) for b in claims["different"]] for a in claims["same"]],
            source={probe: source for probe, (_, source) in extracted.items()})

    def judge_all(self, cases: Sequence[JudgeCase]) -> list[Judgement]:
        return [self.judge(case) for case in cases]
