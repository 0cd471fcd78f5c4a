"""Planners choose the objects and edits of a slot: the seeded rule planner, or an LLM.

The LLM planner (SPD-Faith, appendix A.1: the authors' planner sees the object layout and labels)
gets the image with numbered boxes on the objects that may be edited, the list of those objects
with the edits and colors each allows, and must answer with JSON matching
schemas/spd_faith_llm_plan.schema.json. An answer that is not JSON, breaks the schema, or names an
impossible edit falls back to the rule planner, and the record says so (`build.planner.fallback`).
Placement of a moved object is always computed (the model chooses what to move, not where).
"""
from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from PIL import Image, ImageDraw

from mmfaith.builders.spd_faith.planning import EDIT_TYPES, PlannedEdit, SceneView, Slot, rule_plan, seeded_rng
from mmfaith.clients import ModelEndpoint, ask_with_images, failure_text, first_json_object
from mmfaith.schema import schema_errors

PLANNER_CHOICES = ("rule", "llm")
LLM_PROMPT_VERSION = "spd-faith-plan/1"
LLM_PROMPT = """You plan edits for an image-difference benchmark. The picture shows numbered boxes around the objects that may be edited.
Choose exactly {count} different object(s) and one edit for each, preferring edits that stay plausible in this scene:
- "color": recolor the object to one of its listed target colors,
- "remove": erase the object,
- "position": move the object to another free place.
Objects (number: category, current color, allowed edits):
{objects}
Answer with JSON only, in this form: {{"edits": [{{"object": 1, "type": "color", "color": "red"}}]}}
("color" is required for a color edit and must be one of that object's targets; leave it out otherwise)."""
PROMPT_SHA256 = hashlib.sha256((LLM_PROMPT_VERSION + LLM_PROMPT).encode("utf-8")).hexdigest()


@dataclass
class PlanResult:
    edits: list[PlannedEdit] | None
    provenance: dict[str, Any]
    failure: str | None = None
    calls: int = 0


class SlotPlanner(Protocol):
    def plan(self, view: SceneView, slot: Slot, seed: int, used: frozenset[str] = frozenset()) -> PlanResult:
        """Edits for the slot. `used` holds "ann_id:type" options earlier pairs of this image and
        subset already took; a planner that cannot vary by itself leaves them out."""


@dataclass(frozen=True)
class PlannerSpec:
    """A picklable description of the planner, built inside each worker."""

    name: str = "rule"
    endpoint: ModelEndpoint | None = None
    edit_types: tuple[str, ...] = EDIT_TYPES

    def build(self) -> SlotPlanner:
        if self.name == "llm" and self.endpoint:
            return LlmPlanner(self.endpoint, self.edit_types)
        return RulePlanner(self.edit_types)

    def provenance(self) -> dict[str, Any]:
        types = {} if self.edit_types == EDIT_TYPES else {"edit_types": list(self.edit_types)}
        if self.name != "llm" or self.endpoint is None:
            return {"name": "rule", **types}
        return {"name": "llm", "provider": self.endpoint.provider, "model": self.endpoint.model,
                "prompt_sha256": PROMPT_SHA256, **types}


class RulePlanner:
    """Seeded rule planner (planning.rule_plan)."""

    def __init__(self, edit_types: tuple[str, ...] = EDIT_TYPES) -> None:
        self.edit_types = edit_types

    def plan(self, view: SceneView, slot: Slot, seed: int, used: frozenset[str] = frozenset()) -> PlanResult:
        # `used` is ignored: the seeded rotation already varies the objects, and ignoring it keeps
        # the output independent of how many workers ran ahead.
        edits = rule_plan(view, slot, seed, self.edit_types)
        provenance = PlannerSpec("rule", None, self.edit_types).provenance()
        return PlanResult(edits, provenance, None if edits else "no object satisfies the constraints")


def boxed_image_png(view: SceneView, numbered: list[int]) -> bytes:
    """The scene with a numbered box on each candidate object, as PNG."""
    image = Image.fromarray(view.rgb)
    draw = ImageDraw.Draw(image)
    for number, ann_id in enumerate(numbered, start=1):
        x, y, w, h = view.instances[ann_id].bbox
        draw.rectangle([x, y, x + w, y + h], outline=(255, 0, 0), width=2)
        draw.rectangle([x, y, x + 14 + 6 * len(str(number)), y + 14], fill=(255, 0, 0))
        draw.text((x + 3, y + 1), str(number), fill=(255, 255, 255))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


class LlmPlanner:
    """Asks a multimodal model to choose the edits; validates; falls back to the rule planner."""

    def __init__(self, endpoint: ModelEndpoint, edit_types: tuple[str, ...] = EDIT_TYPES) -> None:
        self.endpoint = endpoint
        self.edit_types = edit_types
        self.rule = RulePlanner(edit_types)

    def plan(self, view: SceneView, slot: Slot, seed: int, used: frozenset[str] = frozenset()) -> PlanResult:
        rng = seeded_rng(seed, "llm-plan", slot.key)
        provenance = PlannerSpec("llm", self.endpoint, self.edit_types).provenance()
        candidates = view.editable_for(slot.tier if slot.subset == "single" else None)
        # A deterministic model would answer every visit of an image alike: offer only the options
        # earlier pairs of this image did not take.
        options = {inst.ann_id: [k for k in view.feasible_types(inst.ann_id)
                                 if k in self.edit_types and f"{inst.ann_id}:{k}" not in used]
                   for inst in candidates}
        numbered = [ann_id for ann_id, kinds in options.items() if kinds]
        if len(numbered) < slot.num_edits:  # the model is not asked, so nothing fell back
            return PlanResult(None, {**provenance, "fallback": None}, "no object satisfies the constraints")
        lines = []
        for number, ann_id in enumerate(numbered, start=1):
            allowed = ", ".join(options[ann_id])
            targets = f" (targets: {', '.join(view.color_targets(ann_id))})" if "color" in options[ann_id] else ""
            lines.append(f"{number}: {view.instances[ann_id].category}, {view.color_name(ann_id)}, {allowed}{targets}")
        prompt = LLM_PROMPT.format(count=slot.num_edits, objects="\n".join(lines))
        try:
            answer = ask_with_images(self.endpoint, prompt, [boxed_image_png(view, numbered)])
            edits = self._validate(answer, view, slot, numbered, options, rng)
        except Exception as exc:  # any failure of the model or its answer means: fall back, and say why
            fallback = self.rule.plan(view, slot, seed, used)
            reason = failure_text(exc)[:300]
            return PlanResult(fallback.edits, {**provenance, "fallback": reason}, fallback.failure, calls=1)
        return PlanResult(edits, {**provenance, "fallback": None}, calls=1)

    def _validate(self, answer: str, view: SceneView, slot: Slot, numbered: list[int],
                  options: dict[int, list[str]], rng: np.random.Generator) -> list[PlannedEdit]:
        plan = first_json_object(answer)
        errors = schema_errors("spd_faith_llm_plan", plan)
        if errors:
            raise ValueError("answer breaks the plan schema: " + "; ".join(errors[:3]))
        chosen = plan["edits"]
        if len(chosen) != slot.num_edits:
            raise ValueError(f"asked for {slot.num_edits} edits, got {len(chosen)}")
        blocked = np.zeros(view.rgb.shape[:2], dtype=bool)
        edits: list[PlannedEdit] = []
        for item in chosen:
            number = item["object"]
            if not 1 <= number <= len(numbered):
                raise ValueError(f"object {number} is not in the list")
            ann_id = numbered[number - 1]
            if item["type"] not in options[ann_id]:
                raise ValueError(f"object {number} does not allow a {item['type']} edit")
            if any(e.ann_id == ann_id for e in edits):
                raise ValueError(f"object {number} chosen twice")
            edit = view.concretize(ann_id, item["type"], blocked, rng, color=item.get("color"), edits=tuple(edits))
            if edit is None or view.clashes(ann_id, item["type"], edits, blocked):
                raise ValueError(f"object {number}: the {item['type']} edit cannot be made as asked")
            edits.append(edit)
            blocked |= view.footprint(edit)
        return edits
