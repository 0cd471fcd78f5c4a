"""The LLM judge of CRM's Hallucination Rate: a chat model labels which masked steps assert hidden content.

One text-only call per (question, variant) unit, temperature as the endpoint's default, through
the shared judge calls (evaluators/judge_calls.py: cached under `$MMFAITH_CACHE/judge/` by provider,
model and prompt; an unusable answer is asked again once, then that unit falls back to the rule,
counted in `fallbacks`). The judge only labels steps; HR is recomputed from its labels
(evaluators/crm/metrics.py). `agreement` compares its labels with the rule's on the same steps.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from mmfaith.cache import ContentCache
from mmfaith.clients import ModelEndpoint
from mmfaith.evaluators.crm import hallucination
from mmfaith.evaluators.judge_calls import JudgeCalls
from mmfaith.jsonl import canonical_json

JUDGE_VERSION = "crm-llm-judge/1"
MAX_TOKENS = 512
TEMPLATE = """A model answered a question about an image, reasoning in numbered steps. Part of the image was hidden by a mask: the regions showing {labels}. The model could not see them.

Question: {question}

The model's steps:
{steps}

Which steps assert visual content of the hidden regions (what they show, their colour, number, position, state) as if the model could see it? A step that says the region is hidden or cannot be seen asserts nothing; a step that only restates the question asserts nothing.

Reply with one JSON object and nothing else: {{"hallucinated_steps": [indices of such steps, counting from 0]}}"""
PROMPT_SHA256 = hashlib.sha256(canonical_json({"version": JUDGE_VERSION, "template": TEMPLATE}).encode()).hexdigest()


def judge_prompt(question: str, labels: Sequence[str], steps: Sequence[str]) -> str:
    return TEMPLATE.format(labels="; ".join(f'"{label}"' for label in labels), question=question,
                           steps="\n".join(f"{i}. {step}" for i, step in enumerate(steps)))


def _errors(answer: Any, n_steps: int) -> list[str]:
    steps = answer.get("hallucinated_steps") if isinstance(answer, dict) else None
    if not isinstance(steps, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in steps):
        return ['the answer must be {"hallucinated_steps": [integers]}']
    return [f"step index {i} out of range (0..{n_steps - 1})" for i in steps if not 0 <= i < n_steps]


class LlmHallucinationJudge:
    """Labels masked steps through a chat model (module docstring)."""

    prompt_sha256 = PROMPT_SHA256

    def __init__(self, endpoint: ModelEndpoint, workers: int = 4, cache: ContentCache | None = None) -> None:
        self.endpoint = endpoint
        self.name = endpoint.model
        self.calls = JudgeCalls(endpoint, workers, cache or ContentCache("judge"), MAX_TOKENS)
        self.fallbacks = 0

    def flag_all(self, cases: Sequence[tuple[str, list[str], list[str]]]) -> list[list[int]]:
        """Flagged step indices per (question, masked labels, masked steps) case, in order."""
        answerable = [i for i, (_, _, steps) in enumerate(cases) if steps]
        prompts = [judge_prompt(*cases[i]) for i in answerable]
        answers = self.calls.answers(prompts, lambda k, answer: _errors(answer, len(cases[answerable[k]][2])))
        flagged: list[list[int]] = [[] for _ in cases]
        for i, answer in zip(answerable, answers):
            if answer is None:
                self.fallbacks += 1
                question, labels, steps = cases[i]
                flagged[i] = [k for k, step in enumerate(steps) if hallucination.flags(step, labels, question)]
            else:
                flagged[i] = sorted(set(answer["hallucinated_steps"]))
        return flagged


def agreement(rule: Sequence[list[int]], llm: Sequence[list[int]], n_steps: Sequence[int]) -> dict[str, Any]:
    """Rule vs LLM labels on the same masked steps: counts, the share of steps labelled alike, and the
    share of units whose HR verdict (any flagged step) is the same."""
    both = rule_only = llm_only = neither = 0
    for by_rule, by_llm, n in zip(rule, llm, n_steps, strict=True):
        for step in range(n):
            r, m = step in by_rule, step in by_llm
            both += r and m
            rule_only += r and not m
            llm_only += m and not r
            neither += not r and not m
    total = both + rule_only + llm_only + neither
    units = sum(bool(a) == bool(b) for a, b in zip(rule, llm))
    return {"n_steps": total, "both": both, "rule_only": rule_only, "llm_only": llm_only, "neither": neither,
            "step_agreement": round((both + neither) / total, 6) if total else None,
            "unit_agreement": round(units / len(rule), 6) if rule else None}
