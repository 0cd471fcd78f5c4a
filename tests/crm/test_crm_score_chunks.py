"""CRM scoring a chunk of questions at a time (evaluators/crm/score.py, `score_chunk`): with every step text
distinct, as a real model's answers are, the vectors held at once are bounded by the chunk, not by the run; and
the scores are the same bytes whatever the chunk and the number of worker processes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.crm.embed import load_encoder
from mmfaith.evaluators.crm.metrics import noise_floor, summarize, sweep
from mmfaith.evaluators.crm.score import (CrmScoreRequest, Scoring, read_crm_predictions, read_inputs, score_crm,
                                        scored_chunks)
from mmfaith.evaluators.crm.steps import split_steps
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.evaluators.score_settings import ScoreSettings
from mmfaith.loaders.crm import open_crm_dataset

N_ITEMS = 6


@pytest.fixture(scope="module")
def distinct(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small build and the grounded reference model's predictions (run over HTTP), each chain of thought's steps
    then made distinct from every other line's (a line's number and the step's own added to each step)."""
    folder = tmp_path_factory.mktemp("crm-chunks")
    build = folder / "build"
    assert main(["build", "crm", "--out", str(build), "--max-items", str(N_ITEMS), "--no-progress"]) == 0
    with ReferenceServer(open_crm_dataset(build), "grounded", family="crm") as server:
        assert main(["run", "crm", "--dataset", str(build), "--model", "grounded", "--base-url", server.base_url,
                     "--out", str(folder / "run"), "--no-progress"]) == 0
    lines = [json.loads(line) for line in (folder / "run" / "predictions.jsonl").read_text().splitlines()]
    for number, line in enumerate(lines):
        if line["probe"].endswith("_cot") and line["response"]:
            line["response"] = "\n".join(f"{k + 1}. {step} (line {number}, step {k})"
                                         for k, step in enumerate(split_steps(line["response"])))
    predictions = folder / "distinct.jsonl"
    predictions.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return build, predictions


def test_vectors_held_are_bounded_by_the_chunk(distinct: tuple[Path, Path], tmp_path: Path) -> None:
    """Scored one question at a time with an encoder keeping at most one chunk's vectors in memory: no `embed` call
    is given more than one question's texts, memory never holds more than that bound, every text is encoded once
    (each distinct), and the lines are those of the whole run scored as one chunk (same cache, so same vectors)."""
    build, predictions = distinct
    dataset = open_crm_dataset(build)
    settings = ScoreSettings(predictions=predictions, out=tmp_path, from_run=True)
    read = read_crm_predictions(dataset, settings)
    answers = {key: line["response"] for key, line in read.answered.items()}
    # Each question's texts: its original and masked steps (multiple choice: no answer texts), counted by hand.
    per_question = [{step for (item_id, probe), text in answers.items() if item_id == item.id and probe.endswith("_cot")
                     for step in split_steps(text)} for item in dataset.items]
    bound = max(len(texts) for texts in per_question)
    every = set().union(*per_question)
    assert len(every) == sum(len(texts) for texts in per_question) > 3 * bound  # all distinct, several chunks' worth

    source, indexed = read_inputs(build, settings, workers=1)
    encoder = load_encoder(batch_size=16, cache_root=tmp_path / "cache", memory_vectors=bound)
    chunked = []
    for scored in scored_chunks(Scoring(source, indexed, encoder, None, 0.5, chunk=1), workers=1):
        assert encoder.cache.held() <= bound and encoder.most_at_once <= bound
        chunked.append(scored)
    assert encoder.encoded == len(every) and len(chunked) == N_ITEMS

    whole = load_encoder(batch_size=16, cache_root=tmp_path / "cache")  # the same cache: the vectors stored above
    [one] = scored_chunks(Scoring(source, indexed, whole, None, 0.5, chunk=N_ITEMS), workers=1)
    assert whole.encoded == 0 and whole.most_at_once == len(every)
    assert "".join(scored.lines.lines for scored in chunked) == one.lines.lines
    units, floor = chunked[0].units, chunked[0].floor  # the chunks' summary numbers merged as score_crm merges them
    for scored in chunked[1:]:
        units.extend(scored.units)
        floor.extend(scored.floor)
    assert len(floor) == len(one.floor) == N_ITEMS and len(units) == len(one.units) > N_ITEMS
    assert noise_floor(floor, 50, 1) == noise_floor(one.floor, 50, 1)
    assert summarize(units, 50, 1) == summarize(one.units, 50, 1) and sweep(units) == sweep(one.units)
    assert sum(scored.missing for scored in chunked) == one.missing
    assert {status: sum(scored.tally.counts[status] for scored in chunked) for status in one.tally.counts} == \
        one.tally.counts


def test_chunks_and_workers_give_the_same_bytes(distinct: tuple[Path, Path], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """score_crm with a cold embedding cache, one question per chunk on two forked workers (a worker's chunk with
    a text in no cache goes back to the parent, which encodes chunk after chunk), then warm, as one chunk on one
    process: metrics.json and items.jsonl byte-identical."""
    build, predictions = distinct
    monkeypatch.setenv("MMFAITH_CACHE", str(tmp_path / "cache"))
    outs = []
    for name, chunk, workers in (("forked", 1, 2), ("whole", N_ITEMS, 1)):
        outs.append(tmp_path / name)
        score_crm(CrmScoreRequest(dataset=build, predictions=predictions, out=outs[-1], from_run=True, n_bootstrap=50,
                                  chunk=chunk, workers=workers))
    for name in ("metrics.json", "items.jsonl"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes()
