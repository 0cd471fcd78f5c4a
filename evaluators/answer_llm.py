"""The optional LLM reader (`score --reader-model MODEL`, docs/answers.md#the-llm-reader).

Contract
--------
`ChoiceReader(endpoint=None, rule)`: `choice(reply, options)` reads a multiple-choice reply with the
rules (evaluators/answers.read_choice); with an endpoint, every non-empty reply is also shown to the
model with the fixed prompt `PROMPT` (version `PROMPT_VERSION`), which answers one option letter or
NONE, cached by a hash of (provider, model, prompt) under `<cache dir>/answer-reader`. The LLM's
reading is used only where the rules read nothing; `agreement()` reports, over the replies both read,
how often they agree, and how many replies the LLM read that the rules left (`filled`).
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from mmfaith.cache import ContentCache
from mmfaith.clients import ModelEndpoint, ask_with_images
from mmfaith.evaluators.answers import read_choice

PROMPT_VERSION = "answer-reader/1"
PROMPT = """A model answered a multiple-choice question. Which option does its reply finally choose?
Options:
{options}
Reply:
<<<
{reply}
>>>
Answer with the option's letter only. Answer NONE if the reply chooses no option, several options, or refuses."""


class ChoiceReader:
    """The rules, and an LLM for what they leave (module docstring)."""

    def __init__(self, endpoint: ModelEndpoint | None = None, rule: str = "default",
                 cache: ContentCache | None = None) -> None:
        self.endpoint = endpoint
        self.rule = rule
        self.cache = cache or (ContentCache("answer-reader") if endpoint is not None else None)
        self.both = self.agree = self.filled = 0

    @property
    def name(self) -> str:
        return "rules" if self.endpoint is None else f"rules+llm:{self.endpoint.model}:{PROMPT_VERSION}"

    def choice(self, reply: str | None, options: Sequence[dict[str, Any]]) -> str | None:
        """The label the reply picks: the rules' reading, else the LLM's (None: unanswered)."""
        ruled = read_choice(reply, options, self.rule)
        if self.endpoint is None or not reply or not reply.strip():
            return ruled
        llm = self._ask(reply, options)
        if ruled is not None and llm is not None:
            self.both += 1
            self.agree += int(ruled == llm)
        if ruled is None and llm is not None:
            self.filled += 1
        return ruled if ruled is not None else llm

    def agreement(self) -> dict[str, Any] | None:
        """{"reader", "n_both", "agreement", "filled"}; None without an LLM."""
        if self.endpoint is None:
            return None
        return {"reader": self.name, "n_both": self.both,
                "agreement": round(self.agree / self.both, 6) if self.both else None, "filled": self.filled}

    def _ask(self, reply: str, options: Sequence[dict[str, Any]]) -> str | None:
        assert self.endpoint is not None and self.cache is not None
        listed = "\n".join(f"({option['label']}) {option['text']}" for option in options)
        prompt = PROMPT.format(options=listed, reply=reply)
        key = hashlib.sha256(f"{self.endpoint.provider}\n{self.endpoint.model}\n{prompt}".encode("utf-8")).hexdigest()
        answer = self.cache.get(key)
        if answer is None:
            answer = ask_with_images(self.endpoint, prompt, [], max_tokens=8)
            self.cache.put(key, answer, model=self.endpoint.model, prompt_version=PROMPT_VERSION)
        match = re.fullmatch(r"\W*\(?([A-Za-z])\)?\W*", answer)
        labels = {option["label"].upper(): option["label"] for option in options}
        return labels.get(match.group(1).upper()) if match else None
