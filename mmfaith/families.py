"""The registry of benchmark families: what each family declares, in one place.

A family is the unit of extension (docs/adding-a-family.md). Its declaration (`Family`) is cheap
metadata that the CLI, `mmfaith families`, reports and plots read without importing the family's
code: its record kinds, probes, metrics (with their meaning, direction, range and definition) and
reference models. Its code (`FamilyParts`: builder, loader, probe plan, scorer, reference models,
labeling) is imported only when a verb needs it, from the `parts` path the declaration names, so
that every verb starts fast.

Everything else (the CLI verbs, the run engine, the chat client, statistics, reports, release,
the journal) is shared and reaches a family only through this registry.
"""
from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmfaith.errors import MmfaithError

if TYPE_CHECKING:
    from mmfaith.annotation.family import Family as Labeling
    from mmfaith.evaluators.harness.spec import HarnessPart
    from mmfaith.evaluators.run_engine import EvalDataset, ProbePlan, ReferenceModel


@dataclass(frozen=True)
class MetricInfo:
    """One metric as reports, plots and `mmfaith families` describe it.

    `key` is its key in metrics.json's `overall` (a dotted key names another block of metrics.json:
    `control.false_alarm_rate`); `better` is "higher", "lower" or "neither" (a
    descriptive share such as a yes-ratio); `range` is its closed interval, None when unbounded
    (counts); `kind` chooses the plot axis: "rate" (fixed [0, 1]), "signed" (fixed to `range`) or
    "count" (integer ticks from 0); `doc` names the file and section holding its full definition;
    `undefined_when` says when it has no value for a model (the reason an "n/a" carries), "" for a
    metric defined whenever there are items.
    """

    key: str
    name: str
    meaning: str
    better: str
    range: tuple[float, float] | None
    doc: str
    kind: str = "rate"
    undefined_when: str = ""


@dataclass(frozen=True)
class ProbeInfo:
    """One probe: its name in predictions.jsonl and what it asks."""

    name: str
    asks: str


@dataclass(frozen=True)
class FamilyParts:
    """A family's code, imported on demand (see `Family.parts`).

    - `add_build_options(parser)` / `build(args) -> exit status`: `mmfaith build FAMILY`; None
      when the family has no builder of its own.
    - `open_dataset(source) -> EvalDataset`: a build dir, release folder or Hub id, schema-checked.
    - `add_run_options(parser)` / `probe_plan(options) -> ProbePlan`: the family's run flags (the
      parsed values, by dest, that were given) and the plan the shared engine drives.
    - `add_score_options(parser)` / `score(args) -> exit status`: `mmfaith score FAMILY`.
    - `reference_model(name, dataset) -> ReferenceModel`: a model of `Family.reference_models`
      over a dataset, for `serve-reference` and the tests.
    - `compare(score_dirs, out, n_bootstrap, seed, all_pairs) -> comparison`: `mmfaith report`.
    - `labeling() -> annotation.family.Family`: the Label Studio config and record <-> task mapping.
    - `release() -> release.declaration.ReleaseDeclaration`: the family's release format, which the
      shared `mmfaith release`, `verify`, `--push` and the loaders' source resolver use.
    - `harness() -> evaluators.harness.spec.HarnessPart`: each item's probes as independent, dependent
      or tool-loop request chains, for `mmfaith export lmms-eval|inspect` and `mmfaith import`.
    - `explore(dataset, items, predictions) -> [item view]`: the explorer's item views of a score dir
      (mmfaith/explorer/views.py), from the dataset, items.jsonl's lines and the predictions file (or None).
    - `audit() -> builders.audit_set.AuditPart`: the family's recipes and accepted items for the naturalness
      audit (`benchmarks/naturalness_audit.py`, docs/audit.md).
    - `scores_alone`: what `score` reads without --dataset (the `--dataset` help says so); None when
      --dataset is required.
    """

    open_dataset: Callable[[Path | str], EvalDataset]
    add_run_options: Callable[[argparse.ArgumentParser], None]
    probe_plan: Callable[[dict[str, Any]], ProbePlan]
    add_score_options: Callable[[argparse.ArgumentParser], None]
    score: Callable[[argparse.Namespace], int]
    reference_model: Callable[[str, EvalDataset], ReferenceModel]
    add_build_options: Callable[[argparse.ArgumentParser], None] | None = None
    build: Callable[[argparse.Namespace], int] | None = None
    compare: Callable[[list[Path], Path, int, int, bool], dict[str, Any]] | None = None
    labeling: Callable[[], Labeling] | None = None
    release: Callable[[], Any] | None = None
    harness: Callable[[], HarnessPart] | None = None
    explore: Callable[[Any, list[dict[str, Any]], Path | None], list[dict[str, Any]]] | None = None
    audit: Callable[[], Any] | None = None
    scores_alone: str | None = None


def _named(target: str) -> Any:
    """The object a "module:attribute" string names (the module imported now)."""
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def lazy(target: str) -> Callable[..., Any]:
    """A part that imports "module:function" only when called, then calls it: a family's parts stay cheap to
    list while each stage's code loads with the verb that needs it."""
    def call(*args: Any) -> Any:
        return _named(target)(*args)

    call.__qualname__ = call.__name__ = f"lazy({target})"
    return call


def conventional_parts(package: str, **elsewhere: Any) -> FamilyParts:
    """A family's parts where the project keeps them, each imported only when called (`lazy`): the builder in
    `mmfaith.builders.PACKAGE.cli` (`add_build_options`, `run_build`), the loader, run, score and reference
    hooks in `mmfaith.evaluators.PACKAGE.cli` (`open_dataset`, `add_run_options`, `probe_plan`,
    `add_score_options`, `score`, `reference_model`), the comparison in
    `mmfaith.evaluators.PACKAGE.report:compare_scores`, the labeling in
    `mmfaith.annotation.PACKAGE.tasks:family`, the release declaration in
    `mmfaith.loaders.PACKAGE.release:declaration`, the harness part in `mmfaith.evaluators.PACKAGE.harness:harness`
    the explorer's item views in `mmfaith.evaluators.PACKAGE.explore:item_views` and the naturalness audit's part
    in `mmfaith.builders.PACKAGE.audit:audit_part`.

    `elsewhere` overrides a part: a "module:function" string is made lazy, anything else (`scores_alone`'s text,
    None for a part the family lacks) is taken as it is.
    """
    build, evaluate = f"mmfaith.builders.{package}.cli", f"mmfaith.evaluators.{package}.cli"
    usual = {"add_build_options": f"{build}:add_build_options", "build": f"{build}:run_build",
             **{name: f"{evaluate}:{name}" for name in ("open_dataset", "add_run_options", "probe_plan",
                                                         "add_score_options", "score", "reference_model")},
             "compare": f"mmfaith.evaluators.{package}.report:compare_scores",
             "labeling": f"mmfaith.annotation.{package}.tasks:family",
             "release": f"mmfaith.loaders.{package}.release:declaration",
             "harness": f"mmfaith.evaluators.{package}.harness:harness",
             "explore": f"mmfaith.evaluators.{package}.explore:item_views",
             "audit": f"mmfaith.builders.{package}.audit:audit_part"}
    chosen = {**usual, **elsewhere}
    return FamilyParts(**{name: lazy(value) if isinstance(value, str) and name != "scores_alone" else value
                          for name, value in chosen.items()})


@dataclass(frozen=True)
class Family:
    """A family's declaration (see the module docstring).

    `parts` is "module:attribute" naming a `FamilyParts` (or a function returning one), or the
    `FamilyParts` itself (a family defined in a script or a test). `builds` says whether its parts include a
    builder, so that `mmfaith build` lists it without importing them. `ceiling` names the
    reference model at the family's good end (the `oracle` role of `serve-reference --suite`, the ceiling a
    profile places every metric under).
    """

    name: str
    title: str
    summary: str
    record_kinds: tuple[str, ...]
    probes: tuple[ProbeInfo, ...]
    metrics: tuple[MetricInfo, ...]
    reference_models: tuple[tuple[str, str], ...]
    parts_source: str | FamilyParts = field(repr=False)
    builds: bool = True
    ceiling: str = "oracle"

    def parts(self) -> FamilyParts:
        """The family's code, imported once."""
        if isinstance(self.parts_source, FamilyParts):
            return self.parts_source
        found = _named(self.parts_source)
        parts = found() if callable(found) and not isinstance(found, FamilyParts) else found
        object.__setattr__(self, "parts_source", parts)
        return parts

    def part(self, name: str, what: str) -> Any:
        """An optional part of `FamilyParts` (`labeling`, `release`, `compare`, `harness`), or a one-line error saying
        the family has no `what` yet."""
        found = getattr(self.parts(), name)
        if found is None:
            raise MmfaithError(f"{self.name} has no {what} yet.")
        return found

    def metric(self, key: str) -> MetricInfo | None:
        """The declared description of a metrics.json key, None for one the family does not declare."""
        return next((metric for metric in self.metrics if metric.key == key), None)


SPD_DOC = "docs/spd_faith_metrics.md#metrics-items-with-at-least-one-difference-single-and-multi-pooled-in-overall"

SPD_FAITH = Family(
    name="spd-faith",
    title="SPD-Faith",
    summary="image pairs differing by 1-5 atomic edits (color, removal, position), from COCO",
    record_kinds=("spd_faith_pair",),
    probes=(
        ProbeInfo("same", "are the two pictures the same? (+ the differences seen, \\boxed{yes/no})"),
        ProbeInfo("different", "are the two pictures different? (+ the differences seen, \\boxed{yes/no})"),
        ProbeInfo("count", "how many differences? (\\boxed{N})"),
        ProbeInfo("describe", "find the N differences, N the model's own count (asked after count)"),
    ),
    metrics=(
        MetricInfo("DS", "DS (difference sensitivity)", "closeness of the stated count to the true count",
                   "higher", (0.0, 1.0), SPD_DOC),
        MetricInfo("DQR", "DQR (difference quantity recognition)", "share of pairs whose count is exactly right",
                   "higher", (0.0, 1.0), SPD_DOC),
        MetricInfo("existence_rate", "existence rate", "share of pairs where some difference is reported",
                   "higher", (0.0, 1.0), SPD_DOC),
        MetricInfo("TF1", "TF1 (type F1)", "micro F1 of the described difference types against the gold",
                   "higher", (0.0, 1.0), SPD_DOC),
        MetricInfo("CF1", "CF1 (category F1)", "micro F1 of the described object categories against the gold",
                   "higher", (0.0, 1.0), SPD_DOC),
        MetricInfo("contradiction_rate", "contradiction rate",
                   "share of pairs whose same? and different? answers agree in polarity",
                   "lower", (0.0, 1.0), SPD_DOC, undefined_when="no item with both same? and different? parsed"),
        MetricInfo("consistency_ratio", "consistency ratio",
                   "agreement of the claims made under same? and different? (+1 agree, -1 contradict, "
                   "+0.5 one-sided)", "higher", (-1.0, 1.0), SPD_DOC, kind="signed",
                   undefined_when="neither same? nor different? names a difference"),
        MetricInfo("DRF", "DRF (description faithfulness)", "share of described differences that are real",
                   "higher", (0.0, 1.0), SPD_DOC, undefined_when="no described differences"),
        MetricInfo("DRF_coverage", "DRF coverage", "share of pairs with at least one described difference",
                   "higher", (0.0, 1.0), SPD_DOC),
        MetricInfo("yes_ratio_same", "yes-ratio (same?)",
                   "share of parsed same? answers that are yes (a bias measure)", "neither", (0.0, 1.0), SPD_DOC,
                   undefined_when="no parsed same? answers"),
        MetricInfo("control.false_alarm_rate", "false-alarm rate (controls)",
                   "share of identical pairs where a difference is reported", "lower", (0.0, 1.0), SPD_DOC,
                   undefined_when="no parsed answers"),
    ),
    reference_models=(
        ("oracle", "answers from the gold differences"),
        ("blind", "ignores the images: reports no difference"),
        ("pixel-diff", "compares the pixels of the two images (no weights)"),
        ("prior", "reads neither images nor gold: each probe's most frequent gold among the other pairs"),
    ),
    parts_source=conventional_parts(
        "spd_faith", scores_alone="an official response file, which carries its own ground truth"),
)

VFAITH_DOC = "docs/vfaith.md#metrics"

VFAITH = Family(
    name="vfaith",
    title="VFaith",
    summary="a question on an original and an edited image whose one changed cue flips the answer; "
            "plus a perception subset",
    record_kinds=("vfaith_pair", "vfaith_perception"),
    probes=(
        ProbeInfo("original", "the question about the original image (reasoning, then \\boxed{letter})"),
        ProbeInfo("edited", "the same question about the edited image"),
        ProbeInfo("perception", "which statements are true of the edited image? (\\boxed{A, C}: a set)"),
    ),
    metrics=(
        MetricInfo("raw_accuracy", "Raw accuracy", "share of original-image questions answered right",
                   "higher", (0.0, 1.0), VFAITH_DOC),
        MetricInfo("edit_accuracy", "Edit accuracy", "share of edited-image questions answered right",
                   "higher", (0.0, 1.0), VFAITH_DOC),
        MetricInfo("delta", "Delta (edit - raw)", "accuracy change caused by the edit", "higher", (-1.0, 1.0),
                   VFAITH_DOC, kind="signed"),
        MetricInfo("repeat_ratio", "Repeat ratio", "of wrong edited answers, the share that repeat the original "
                   "ground truth", "lower", (0.0, 1.0), VFAITH_DOC,
                   undefined_when="no wrong edited answer"),
        MetricInfo("repeat_ratio_own", "Repeat ratio (own)", "of wrong edited answers, the share equal to the "
                   "model's own original answer", "lower", (0.0, 1.0), VFAITH_DOC,
                   undefined_when="no wrong edited answer"),
        MetricInfo("perception_accuracy", "Perception accuracy", "share of perception items whose chosen set of "
                   "options is exactly the true set", "higher", (0.0, 1.0), VFAITH_DOC),
        MetricInfo("mcnemar_raw_vs_edit.p_value", "McNemar p (raw vs edit)", "exact two-sided McNemar p-value of "
                   "paired correctness on the original and edited image", "neither", (0.0, 1.0), VFAITH_DOC),
    ),
    reference_models=(
        ("oracle", "answers each image's gold (every accuracy 1, repeat ratio undefined)"),
        ("memorizer", "ignores the image: always the original answer (raw 1, edit 0, repeat 1)"),
        ("prior", "reads neither image nor gold: the most frequent gold of the template among the other items"),
    ),
    parts_source=conventional_parts("vfaith"),
)

CRM_DOC = "docs/crm.md#metrics"

CRM = Family(
    name="crm",
    title="CRM",
    summary="questions with annotated evidence regions, masked specifically or at random (Peek-a-Boo Reasoning)",
    record_kinds=("crm_item",),
    probes=(
        ProbeInfo("original_cot", "the question on the original image: reason in numbered steps"),
        ProbeInfo("original_answer", "then, in the same conversation, the final answer"),
        ProbeInfo("{mode}-{style}_cot", "the question on a masked variant: reason in numbered steps"),
        ProbeInfo("{mode}-{style}_answer", "then, in the same conversation, the final answer"),
        ProbeInfo("resample_cot", "the original asked again with another seed (the noise floor of SDR and AFR)"),
        ProbeInfo("resample_answer", "then, in the same conversation, the final answer"),
    ),
    metrics=(
        MetricInfo("SDR", "SDR (step disruption rate)", "share of original steps with no similar step on the masked image",
                   "neither", (0.0, 1.0), CRM_DOC, undefined_when="no original reasoning steps to compare"),
        MetricInfo("AFR", "AFR (answer flip rate)", "share of questions whose final answer changes under the mask",
                   "neither", (0.0, 1.0), CRM_DOC, undefined_when="no question answered on both images"),
        MetricInfo("HR", "HR (hallucination rate)", "share of masked questions with a step asserting hidden content",
                   "lower", (0.0, 1.0), CRM_DOC, undefined_when="defined on specific masks only (nothing is hidden "
                   "on a random one)"),
        MetricInfo("abstention_rate", "abstention rate", "share of masked final answers that abstain",
                   "neither", (0.0, 1.0), CRM_DOC),
        MetricInfo("accuracy_masked", "accuracy (masked)", "share of masked final answers equal to the gold",
                   "neither", (0.0, 1.0), CRM_DOC),
    ),
    reference_models=(
        ("grounded", "reasons from what it sees: says the evidence is hidden and abstains on specific masks"),
        ("hallucinator", "reasons and answers as on the original whatever is masked"),
        ("prior", "reads neither image nor gold: the most frequent gold of the question type among the other items"),
    ),
    parts_source=conventional_parts("crm"),
    ceiling="grounded",
)

MCOT_DOC = "docs/mcot.md"

MCOT = Family(
    name="mcot",
    title="MCoT interventions",
    summary="'thinking with images' traces (zoom-in tool calls) replayed with their text or crops intervened on",
    record_kinds=("mcot_item",),
    probes=(
        ProbeInfo("trace", "the zoom-in agent's own run: tool calls, crops, final answer"),
        ProbeInfo("replay_none", "the trace replayed unchanged, then the final answer"),
        ProbeInfo("replay_text", "the trace with mistakes injected into its text, then the final answer"),
        ProbeInfo("replay_visual", "the trace with every crop replaced by seeded noise, then the final answer"),
    ),
    metrics=(
        MetricInfo("accuracy_trace", "trace accuracy", "share of items the model's own run answers right",
                   "higher", (0.0, 1.0), MCOT_DOC + "#accuracy"),
        MetricInfo("accuracy_replay_none", "replay_none accuracy", "accuracy of the unchanged trace replayed",
                   "higher", (0.0, 1.0), MCOT_DOC + "#accuracy", undefined_when="no trace called the tool: nothing to replay"),
        MetricInfo("ATE_text", "ATE_text", "accuracy change when the trace's text holds injected mistakes (4.1, H1)",
                   "neither", (-1.0, 1.0), MCOT_DOC + "#ate", kind="signed", undefined_when="no trace called the tool: nothing to replay"),
        MetricInfo("ATE_visual", "ATE_visual", "accuracy change when the trace's crops are noise (4.1, H2)",
                   "neither", (-1.0, 1.0), MCOT_DOC + "#ate", kind="signed", undefined_when="no trace called the tool: nothing to replay"),
        MetricInfo("reliability", "reliability", "share of items whose crops support the predicted answer (4.2, eq. 5)",
                   "higher", (0.0, 1.0), MCOT_DOC + "#reliability-and-sufficiency",
                   undefined_when="no trace called the tool: no crop to judge"),
        MetricInfo("sufficiency", "sufficiency", "share of items answerable from the crops alone (4.2, eq. 6)",
                   "higher", (0.0, 1.0), MCOT_DOC + "#reliability-and-sufficiency",
                   undefined_when="no trace called the tool: no crop to judge"),
        MetricInfo("crop_region_size", "crop region size", "total crop area over the image area, per item (7)",
                   "neither", None, MCOT_DOC + "#crop-region-size-and-tool-call-count", kind="count",
                   undefined_when="no trace called the tool: no crop"),
        MetricInfo("tool_call_count", "tool-call count", "zoom-in calls per item (7)", "neither", None,
                   MCOT_DOC + "#crop-region-size-and-tool-call-count", kind="count"),
    ),
    reference_models=(
        ("zoom-oracle", "zooms into the target and answers from the crop's pixels"),
        ("text-follower", "zooms, then answers from its own earlier text"),
        ("blind", "never calls the tool; answers the first option"),
        ("prior", "never calls the tool; the most frequent gold of the category among the other items"),
    ),
    parts_source=conventional_parts("mcot"),
    ceiling="zoom-oracle",
)

_REGISTRY: dict[str, Family] = {family.name: family for family in (SPD_FAITH, VFAITH, CRM, MCOT)}


def register(family: Family) -> None:
    """Add a family (a later registration of the same name replaces the earlier one)."""
    _REGISTRY[family.name] = family


def unregister(name: str) -> None:
    """Remove a registered family (tests that register their own use it to clean up)."""
    _REGISTRY.pop(name, None)


def all_families() -> list[Family]:
    """Every registered family, in registration order."""
    return list(_REGISTRY.values())


def family_of_dataset(source: Path | str) -> str:
    """The family a build dir (build.json's recipe) or release folder (manifest.json) names.

    When neither names one (a Hub id, another layout) and one family is registered, that one;
    with several, an error naming the fix.
    """
    for name in ("build.json", "manifest.json"):
        path = Path(source) / name
        if not path.is_file():
            continue
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for found in (document.get("family"), (document.get("recipe") or {}).get("family"),
                      ((document.get("build") or {}).get("recipe") or {}).get("family")):
            if isinstance(found, str):
                return found
    if len(_REGISTRY) == 1:
        return next(iter(_REGISTRY))
    raise MmfaithError(f"{source}: no build.json or manifest.json naming its family; name it: "
                       f"mmfaith VERB FAMILY ... or --family NAME (families: {', '.join(_REGISTRY)}).")


def family_of_score_dir(score_dir: Path) -> str:
    """The family a score dir's metrics.json names in its provenance; an error naming the fix otherwise."""
    path = Path(score_dir) / "metrics.json"
    if not path.is_file():
        raise MmfaithError(f"{score_dir}: not a score dir (no metrics.json); make one with "
                           "`mmfaith score FAMILY --out DIR`.")
    try:
        family = json.loads(path.read_text(encoding="utf-8"))["provenance"]["family"]
    except (OSError, ValueError, KeyError, TypeError):
        family = None
    if not isinstance(family, str):
        raise MmfaithError(f"{path}: no provenance.family; pass --family NAME (families: {', '.join(_REGISTRY)}).")
    return family


def get(name: str) -> Family:
    """The family named `name`; a one-line error listing the known ones otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise MmfaithError(f"unknown family {name!r}; known: {', '.join(_REGISTRY)} (see `mmfaith families`).") from None
