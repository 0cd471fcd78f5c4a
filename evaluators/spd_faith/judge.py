"""The LLM judge: a chat model reads an item's answers, extracts their claims and labels claim pairs.

This is the paper's GPT-4o judge (SPD-Faith appendix B.2.3: claim extraction for the Consistency
Ratio, semantic matching and error categories for DRF), made checkable: one call per item, text
only (the gold differences stand in for the images), temperature 0. The answer must be one JSON
object valid against schemas/spd_faith_judge.schema.json whose indices point at real claims and
gold differences; a bad answer is asked again once with the reason, and a second bad answer falls
back to the rule judge for that item (counted in `fallbacks`, source `rule-fallback`). The judge
only extracts and labels: every metric is recomputed from its claims and labels (spd_faith/metrics.py).

Valid answers are cached in the mmfaith cache (`mmfaith.cache`: ``<cache_dir>/judge/``), keyed by
the SHA-256 of the provider, the model name and the full prompt, never in the score folder: so
re-scoring asks nothing new and gives the same bytes, even into a new or replaced score folder.
`prompt_sha256` hashes the judge's template, version and answer schema (provenance).
"""
from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

from mmfaith.vocabulary import COLOR_NAMES
from mmfaith.clients import ModelEndpoint
from mmfaith.evaluators.spd_faith.claims import (CLAIM_PROBES, COCO_CATEGORIES, UNRELATED, Claim, Judgement, JudgeCase,
                                           RuleJudge)
from mmfaith.cache import ContentCache
from mmfaith.evaluators.judge_calls import JudgeCalls
from mmfaith.jsonl import canonical_json
from mmfaith.schema import schema_errors, validator

JUDGE_VERSION = "spd-faith-llm-judge/1"
MAX_TOKENS = 2048
CACHE_NAMESPACE = "judge"
_QUESTIONS = {"same": "Are the two pictures the same?", "different": "Are the two pictures different?",
              "describe": "Can you find the differences? (describe them)"}
TEMPLATE = """You judge answers to an image-pair benchmark (SPD-Faith). A model saw an original picture and an edited copy and answered three questions. You do not see the pictures; the true differences are listed below.

True differences (index: type, object, color in the second picture the model saw, description of the edit):
{gold}

{answers}

Do three things.
1. "claims": for each answer, every specific difference it asserts between the two pictures (not its overall yes/no verdict, not differences it denies), in order, each as {{"type": ..., "category": ..., "color": ...}}:
   - "type": "color" (the object changed color), "remove" (the object is in one picture only: removed, missing, added, appeared), "position" (the object moved), or "other";
   - "category": the object's COCO category, one of: {categories}; or "other" when it is none of them;
   - "color": the object's color in the second picture, one of: {colors}; or null when the answer does not say.
   An answer shown as (no answer) has no claims.
2. "drf": for each related pair of a describe claim i and a true difference j, a label: "faithful" (the claim states that difference correctly), "attribute_error" (right object and kind of change, wrong color), "type_confusion" (right object, wrong kind of change), "type_category_mismatch" (right kind of change, wrong object). Leave unrelated pairs out. Each claim and each true difference appears in at most one "faithful" pair.
3. "consistency": for each pair of a claim i of the [same] answer and a claim j of the [different] answer about the same object, a label: "consistent" (they state the same difference) or "contradictory" (they conflict about it). Leave unrelated pairs out.
Indices count from 0 in your own claim lists and in the true differences.

Reply with one JSON object and nothing else:
{{"claims": {{"same": [...], "different": [...], "describe": [...]}}, "drf": [{{"claim": 0, "gold": 0, "label": "faithful"}}], "consistency": [{{"same": 0, "different": 0, "label": "consistent"}}]}}"""
PROMPT_SHA256 = hashlib.sha256(canonical_json({
    "version": JUDGE_VERSION, "template": TEMPLATE, "questions": _QUESTIONS,
    "schema": validator("spd_faith_judge").schema}).encode("utf-8")).hexdigest()


def judge_prompt(case: JudgeCase) -> str:
    """The judge's prompt for one item."""
    gold_lines = "\n".join(f"{j}: {g.type}, {g.category}, {g.color or '-'}, {text}"
                           for j, (g, text) in enumerate(zip(case.gold, case.descriptions, strict=True))) or "(none)"
    answers = "\n\n".join(f'[{probe}] answer to "{_QUESTIONS[probe]}":\n<<<\n'
                          f'{case.responses[probe] if case.responses.get(probe) is not None else "(no answer)"}\n>>>'
                          for probe in CLAIM_PROBES)
    return TEMPLATE.format(gold=gold_lines, answers=answers, categories=", ".join(COCO_CATEGORIES),
                           colors=", ".join(COLOR_NAMES))


def answer_errors(answer: Any, responses: dict[str, str | None], n_gold: int) -> list[str]:
    """Why a judge answer cannot be used: schema violations, indices out of range, claims of a missing answer."""
    errors = schema_errors("spd_faith_judge", answer)
    if errors:
        return errors
    claims = answer["claims"]
    errors += [f"claims.{p}: the [{p}] answer is missing, list no claims" for p in CLAIM_PROBES
               if responses.get(p) is None and claims[p]]
    sizes = {"claim": len(claims["describe"]), "gold": n_gold, "same": len(claims["same"]),
             "different": len(claims["different"])}
    for section, keys in (("drf", ("claim", "gold")), ("consistency", ("same", "different"))):
        for k, pair in enumerate(answer[section]):
            errors += [f"{section}.{k}.{key}: index {pair[key]} out of range (0..{sizes[key] - 1})"
                       for key in keys if pair[key] >= sizes[key]]
    return errors


def judgement_of(answer: dict[str, Any], n_gold: int) -> Judgement:
    """A validated judge answer as a Judgement (pairs not listed are unrelated; a later label of a pair wins)."""
    claims = {p: [Claim(c["type"], c["category"], c["color"]) for c in answer["claims"][p]] for p in CLAIM_PROBES}
    drf = [[UNRELATED] * n_gold for _ in claims["describe"]]
    for pair in answer["drf"]:
        drf[pair["claim"]][pair["gold"]] = pair["label"]
    consistency = [[UNRELATED] * len(claims["different"]) for _ in claims["same"]]
    for pair in answer["consistency"]:
        consistency[pair["same"]][pair["different"]] = pair["label"]
    return Judgement(claims, drf, consistency, {p: "llm" for p in CLAIM_PROBES})


class LlmJudge:
    """Judge through a chat model (module docstring); `name` is the model, `fallbacks` counts rule fallbacks."""

    prompt_sha256 = PROMPT_SHA256

    def __init__(self, endpoint: ModelEndpoint, workers: int = 4, cache: ContentCache | None = None) -> None:
        self.endpoint = endpoint
        self.name = endpoint.model
        self.workers = workers
        self.cache = cache or ContentCache(CACHE_NAMESPACE)
        self.fallbacks = 0

    def judge_all(self, cases: Sequence[JudgeCase]) -> list[Judgement]:
        """Judgements of the cases, in order (cached answers first, new ones asked in parallel)."""
        calls = JudgeCalls(self.endpoint, self.workers, self.cache, MAX_TOKENS)
        answers = calls.answers([judge_prompt(case) for case in cases],
                                lambda i, answer: answer_errors(answer, cases[i].responses, len(cases[i].gold)))
        judgements = []
        for case, answer in zip(cases, answers, strict=True):
            if answer is not None:
                judgements.append(judgement_of(answer, len(case.gold)))
            else:
                self.fallbacks += 1
                rule = RuleJudge().judge(case)
                judgements.append(Judgement(rule.claims, rule.drf, rule.consistency,
                                            {p: "rule-fallback" for p in CLAIM_PROBES}))
        return judgements


def claim_agreement(rule: Sequence[Judgement], llm: Sequence[Judgement],
                    answered: Sequence[dict[str, bool]]) -> dict[str, Any]:
    """Share of answered responses where both judges extract the same multiset of (type, category)."""
    same: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for by_rule, by_llm, present in zip(rule, llm, answered, strict=True):
        for probe in CLAIM_PROBES:
            if present[probe]:
                total[probe] += 1
                same[probe] += Counter((c.type, c.category) for c in by_rule.claims[probe]) == \
                    Counter((c.type, c.category) for c in by_llm.claims[probe])
    n = sum(total.values())
    return {"measure": "share of answered responses where the rule and LLM judges extract the same multiset "
                       "of (type, category)",
            "n_responses": n, "claims_multiset": round(sum(same.values()) / n, 6) if n else None,
            "by_probe": {p: round(same[p] / total[p], 6) if total[p] else None for p in CLAIM_PROBES}}
