"""The judge of free-form VFaith answers (VFaith section 4.1: "for cases where direct answer extraction and
comparison fail, we use Claude-3.5-Sonnet for further accuracy assessment").

A free-form answer is first compared with the gold after normalisation (parse.normalize). Where that
fails, `--judge rule` counts it as different; `--judge MODEL` asks the model whether the answer means
the same as the edited image's gold, then the original's (so the repeat ratio sees an answer that
restates the original gold in other words). Verdicts are cached in the mmfaith cache
(`<cache_dir>/vfaith-judge/`), keyed by provider, model and prompt, so a re-score asks nothing again.
"""
from __future__ import annotations

import hashlib

from mmfaith.cache import ContentCache
from mmfaith.clients import ModelCallError, ModelEndpoint, ask_with_images
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.vfaith.parse import normalize
from mmfaith.redact import redact_url

CACHE_NAMESPACE = "vfaith-judge"
PROMPT = ("Question: {question}\nReference answer: {gold}\nCandidate answer: {answer}\n\nDoes the candidate answer "
          "mean the same as the reference answer for this question? Reply with one word: yes or no.")
PROMPT_SHA256 = hashlib.sha256(PROMPT.encode("utf-8")).hexdigest()


class FreeFormJudge:
    """Equivalence of a free-form answer and a gold (module docstring); `endpoint` None is the rule judge."""

    def __init__(self, endpoint: ModelEndpoint | None, cache: ContentCache | None = None) -> None:
        self.endpoint = endpoint
        self.name = "rule" if endpoint is None else endpoint.model
        self.cache = cache or ContentCache(CACHE_NAMESPACE)
        self.asked = 0

    def same(self, question: str, gold: str, answer: str) -> bool:
        """Whether `answer` means `gold` (both already normalised)."""
        if answer == gold:
            return True
        if self.endpoint is None:
            return False
        prompt = PROMPT.format(question=question, gold=gold, answer=answer)
        key = hashlib.sha256(f"{self.endpoint.provider}\n{self.endpoint.model}\n{prompt}".encode("utf-8")).hexdigest()
        known = self.cache.get(key)
        if known is None:
            try:
                reply = ask_with_images(self.endpoint, prompt, [], max_tokens=8)
            except ModelCallError as exc:
                raise MmfaithError(f"judge {self.endpoint.model} at {redact_url(self.endpoint.base_url or self.endpoint.provider)} "
                                   f"failed ({exc}); check --judge-base-url and the key in --judge-api-key-env.") from exc
            self.asked += 1
            known = normalize(reply).split(" ")[0] == "yes"
            self.cache.put(key, known, model=self.endpoint.model, provider=self.endpoint.provider)
        return bool(known)

    def resolve(self, question: str, answer: str | None, gold_edited: str, gold_original: str) -> str | None:
        """The gold an answer means (the edited one first), else the answer itself; None stays None."""
        if answer is None or answer in (gold_edited, gold_original):
            return answer
        for gold in (gold_edited, gold_original):
            if self.same(question, gold, answer):
                return gold
        return answer
