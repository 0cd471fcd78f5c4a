"""One LLM judge call per prompt, for every family's judge: cached, parallel, validated, asked twice at most.

Contract (`JudgeCalls(endpoint, workers, cache, max_tokens).answers(prompts, errors_of)`)
-----------------------------------------------------------------------------------------
- Each prompt is sent as one text-only chat call (`clients.ask_with_images`); the reply's first
  JSON object is the answer. `errors_of(index, answer)` lists why an answer is unusable; an
  unusable one is asked again once with the reasons appended, and a second one gives None (the
  family falls back to its rule for that item).
- Valid answers are cached in the mmfaith cache (`ContentCache`, the family's namespace) by the
  SHA-256 of provider, model and prompt: re-scoring asks nothing new and gives the same bytes.
  Equal prompts are asked once; new ones in parallel (`workers`), in a fixed order.
- A call that fails (connection, HTTP status, timeout) is one MmfaithError naming the judge and
  the flags to check; the key is never shown (messages are redacted).
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mmfaith.cache import ContentCache
from mmfaith.clients import ModelCallError, ModelEndpoint, ask_with_images, first_json_object
from mmfaith.errors import MmfaithError
from mmfaith.redact import redact_url


class JudgeCalls:
    """Cached, validated judge calls (module docstring)."""

    def __init__(self, endpoint: ModelEndpoint, workers: int, cache: ContentCache, max_tokens: int) -> None:
        self.endpoint, self.workers, self.cache, self.max_tokens = endpoint, workers, cache, max_tokens

    def key(self, prompt: str) -> str:
        return hashlib.sha256(f"{self.endpoint.provider}\n{self.endpoint.model}\n{prompt}".encode("utf-8")).hexdigest()

    def _ask(self, prompt: str) -> str:
        try:
            return ask_with_images(self.endpoint, prompt, [], max_tokens=self.max_tokens)
        except ModelCallError as exc:  # connection, HTTP status, timeout; the message is redacted
            where = redact_url(self.endpoint.base_url or self.endpoint.provider)
            raise MmfaithError(f"judge {self.endpoint.model} at {where} failed ({exc}); "
                               "check --judge-base-url, --judge-provider and the key in --judge-api-key-env.") from exc

    def _answer(self, prompt: str, errors_of: Callable[[Any], list[str]]) -> Any | None:
        asked = prompt
        for _ in range(2):
            reply = self._ask(asked)
            try:
                answer = first_json_object(reply)
                errors = errors_of(answer)
            except ValueError as exc:  # json.JSONDecodeError is a ValueError
                errors = [str(exc)]
            if not errors:
                return answer
            asked = f"{prompt}\n\nYour previous reply was not usable ({'; '.join(errors[:5])}). Reply again."
        return None

    def answers(self, prompts: Sequence[str], errors_of: Callable[[int, Any], list[str]]) -> list[Any | None]:
        """The valid answer to each prompt, or None where two replies were unusable (module docstring)."""
        keys = [self.key(p) for p in prompts]
        known = {key: answer for key in set(keys) if (answer := self.cache.get(key)) is not None}
        todo = sorted({k: i for i, k in enumerate(keys) if k not in known}.values())
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            made = pool.map(lambda i: self._answer(prompts[i], lambda answer: errors_of(i, answer)), todo)
            for i, answer in zip(todo, made):
                if answer is not None:
                    known[keys[i]] = answer
                    self.cache.put(keys[i], answer, model=self.endpoint.model, provider=self.endpoint.provider)
        return [known.get(key) for key in keys]
