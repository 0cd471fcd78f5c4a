"""VFaith's score in chunks of items (evaluators/vfaith/score.py, issue 34's bounded memory): the same files whatever
the chunk size, CircularEval and the position bias included; and the predictions read in two passes hold the
answers' places, not their responses (evaluators/prediction_index.py)."""
from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.predictions import read_predictions
from mmfaith.evaluators.prediction_index import ItemTable
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.evaluators.vfaith import score
from mmfaith.loaders.vfaith.dataset import open_vfaith_dataset

FILES = ("metrics.json", "items.jsonl", "report.md")


@pytest.fixture(scope="module")
def memorizer_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small build and the memorizer's circular run on it (right on the originals, wrong on the edits)."""
    folder = tmp_path_factory.mktemp("vfaith-chunks")
    build = folder / "build"
    assert main(["build", "vfaith", "--out", str(build), "--no-progress", "--per-template", "3",
                 "--inpainter", "telea"]) == 0
    with ReferenceServer(open_vfaith_dataset(build), "memorizer", family="vfaith") as server:
        assert main(["run", "vfaith", "--dataset", str(build), "--model", "memorizer", "--base-url",
                     server.base_url, "--out", str(folder / "run"), "--no-progress", "--circular"]) == 0
    return build, folder / "run" / "predictions.jsonl"


def test_chunks_of_two_items_give_the_files_of_one_chunk(memorizer_run: tuple[Path, Path], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    build, predictions = memorizer_run
    n = len(open_vfaith_dataset(build).items)
    for chunk in (n, 2, 1):
        monkeypatch.setattr(score, "CHUNK_ITEMS", chunk)
        assert main(["score", "vfaith", "--dataset", str(build), "--predictions", str(predictions), "--from-run",
                     "--out", str(tmp_path / str(chunk)), "--bootstrap", "50", "--no-explorer"]) == 0
    for name in FILES:
        expected = (tmp_path / str(n) / name).read_bytes()
        for chunk in (2, 1):
            assert (tmp_path / str(chunk) / name).read_bytes() == expected, (chunk, name)
    metrics = json.loads((tmp_path / str(n) / "metrics.json").read_text())
    assert n >= 6 and metrics["counts"]["n_pairs"] + metrics["counts"]["n_perception"] == n
    assert metrics["circular"] is not None and metrics["position_bias"]["n_answers"] > 0
    assert metrics["overall"]["raw_accuracy"] == 1.0 and metrics["overall"]["edit_accuracy"] < 1.0


def test_the_indexed_read_holds_no_response(memorizer_run: tuple[Path, Path], tmp_path: Path) -> None:
    """Every answer given a 1.5 MB response: read with an `ItemTable`, the reader's peak memory stays far below the
    responses' total (it holds each winning line's place); read in one pass, it holds them all. A chunk's lines
    read again are its own items' only, the same as the one-pass reader's."""
    build, predictions = memorizer_run
    padding = "x" * 1_500_000
    lines = [json.loads(line) for line in predictions.read_text().splitlines()]
    long = tmp_path / "long.jsonl"
    long.write_text("".join(json.dumps({**line, "response": None if line["response"] is None
                                        else line["response"] + padding}) + "\n" for line in lines))
    total = len(padding) * sum(line["response"] is not None for line in lines)
    items = open_vfaith_dataset(build).items
    table = ItemTable()
    for item in items:
        table.add(item.id, score.VfaithProbePlan(circular=True).expected_probes(item), None, None)

    def peak(**index: ItemTable) -> tuple[int, object]:
        tracemalloc.start()
        try:
            read = read_predictions(long, table.probes, True, **index)
            return tracemalloc.get_traced_memory()[1], read
        finally:
            tracemalloc.stop()

    whole_peak, whole = peak()
    indexed_peak, indexed = peak(index=table)
    assert whole_peak > total > 4 * indexed_peak, (whole_peak, total, indexed_peak)
    assert len(indexed.answered) == len(whole.answered)
    answered, failed = indexed.answered.lines(range(2, 4), None)
    assert answered == {key: line for key, line in whole.answered.items() if key[0] in table.ids[2:4]}
    assert failed == {key for key in whole.failed if key[0] in table.ids[2:4]}
