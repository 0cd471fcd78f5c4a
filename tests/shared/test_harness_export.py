"""The harness exports and the import's checks, without the harnesses: the files an export writes,
their determinism, the exported utils.py's rounds (called as lmms-eval calls them), and the
import's refusals. The round trips with the real harnesses are tests/spd_faith/test_harness_lmms_eval.py and
tests/spd_faith/test_harness_inspect.py."""
from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pyarrow.parquet as pq
import pytest

from mmfaith.cli import main
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.harness.runtime import read_rounds_record, require_kind
from mmfaith.evaluators.spd_faith.prompts import TEMPLATES_SHA256, prompt_text
from mmfaith.loaders.spd_faith import open_spd_dataset

FAILED = "[LMMS_EVAL_REQUEST_FAILED after 1 retries] Error code: 400"


def digests(folder: Path) -> dict[str, str]:
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def load_utils(tasks: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("exported_utils", tasks / "utils.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def lmms_tasks(mixed_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lmms") / "tasks"
    assert main(["export", "lmms-eval", str(mixed_build), "--out", str(out), "--no-progress"]) == 0
    return out


def rows(tasks: Path, task: str) -> list[dict]:
    return pq.read_table(tasks / "data" / f"{task}.parquet").to_pylist()


def test_lmms_export_writes_one_row_per_item_and_probe_group_with_the_stored_images(lmms_tasks: Path,
                                                                                      mixed_build: Path) -> None:
    dataset = open_spd_dataset(mixed_build)
    group = (lmms_tasks / "mmfaith_spd_faith.yaml").read_text()
    assert "group: mmfaith_spd_faith" in group
    for task, probes in (("same", ["same"]), ("different", ["different"]), ("count_describe", ["count", "describe"])):
        assert f"  - mmfaith_spd_faith_{task}" in group
        found = rows(lmms_tasks, f"mmfaith_spd_faith_{task}")
        assert [row["id"] for row in found] == [pair.id for pair in dataset.pairs]
        for row, pair in zip(found, dataset.pairs):
            assert json.loads(row["key"]) == {"id": pair.id, "probes": probes}
            assert row["prompt"] == prompt_text(probes[0], "separate")  # the bytes `mmfaith run` sends
            assert row["image_1"] == pair.image_a_path.read_bytes()  # original first, as stored
            assert row["image_2"] == pair.image_b_path.read_bytes()
            assert row["image_sha256"] == [pair.record["image_a_sha256"], pair.record["image_b_sha256"]]
    export = json.loads((lmms_tasks / "export.json").read_text())
    assert export["prompt_templates_sha256"] == TEMPLATES_SHA256 and export["dataset"]["items"] == len(dataset.pairs)
    same = (lmms_tasks / "mmfaith_spd_faith_same.yaml").read_text()
    assert "output_type: generate_until\n" in same and '"until": []' in same and "reasoning_tags: none" in same
    assert "max_agentic_steps" not in same
    assert '"max_agentic_steps": 2' in (lmms_tasks / "mmfaith_spd_faith_count_describe.yaml").read_text()


def test_exports_are_deterministic_and_refuse_a_foreign_folder(lmms_tasks: Path, mixed_build: Path,
                                                               tmp_path: Path) -> None:
    before = digests(lmms_tasks)
    assert main(["export", "lmms-eval", str(mixed_build), "--out", str(lmms_tasks), "--no-progress"]) == 0
    assert digests(lmms_tasks) == before
    inspect_dir = tmp_path / "inspect"
    written = []
    for _ in range(2):
        assert main(["export", "inspect", str(mixed_build), "--out", str(inspect_dir), "--no-progress"]) == 0
        written.append(digests(inspect_dir))
    assert written[0] == written[1] and "mmfaith_spd_faith.py" in written[0]
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(MmfaithError, match="is not an mmfaith export"):
        main(["--debug", "export", "lmms-eval", str(mixed_build), "--out", str(foreign)])


def test_exported_utils_asks_describe_with_the_models_own_count(lmms_tasks: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The agentic steps as lmms-eval 0.7.3 calls them (doc_to_text with previous_output and round_idx)."""
    utils = load_utils(lmms_tasks)
    doc = rows(lmms_tasks, "mmfaith_spd_faith_count_describe")[0]
    assert utils.doc_to_text(doc) == prompt_text("count", "separate")
    visuals = utils.doc_to_visual(doc)
    assert [image.size for image in visuals] == [image.size for image in visuals[:1]] * 2

    count_answer = "I see three.\n\\boxed{3}"
    _, text, terminal, outputs, _ = utils.doc_to_text(doc, previous_output=[count_answer], round_idx=1)
    assert not terminal and text == prompt_text("describe", "separate", 3) and "There are 3 differences" in text
    _, text, terminal, outputs, _ = utils.doc_to_text(doc, previous_output=[count_answer, "the list"], round_idx=2)
    assert terminal and text is None
    rounds = read_rounds_record(outputs[0])
    assert [(r["probe"], r["response"], r["error"]) for r in rounds] == [("count", count_answer, None),
                                                                         ("describe", "the list", None)]
    assert rounds[1]["prompt"] == prompt_text("describe", "separate", 3)
    assert utils.process_results(doc, outputs) == {"mmfaith_answered": 1.0}

    _, text, terminal, outputs, _ = utils.doc_to_text(doc, previous_output=[FAILED], round_idx=1)
    rounds = read_rounds_record(outputs[0])
    assert terminal and rounds[0]["response"] is None and rounds[0]["error"] == FAILED
    assert rounds[1]["response"] is None and rounds[1]["error"].startswith("not asked")
    assert utils.process_results(doc, outputs) == {"mmfaith_answered": 0.0}
    assert utils.process_results(rows(lmms_tasks, "mmfaith_spd_faith_same")[0], [FAILED]) == {"mmfaith_answered": 0.0}

    monkeypatch.setenv("LMMS_IMAGE_ENCODE_FORMAT", "jpeg")
    with pytest.raises(RuntimeError, match="lossy"):
        utils.doc_to_visual(doc)


def samples_file(folder: Path, lines: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "20260101_000000_samples_mmfaith_spd_faith_same.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_import_refuses_unknown_ids_repeated_samples_and_other_prompts(mixed_build: Path, tmp_path: Path) -> None:
    pair_id = open_spd_dataset(mixed_build).pairs[0].id
    key = json.dumps({"id": pair_id, "probes": ["same"]})
    cases = [
        ([{"target": json.dumps({"id": "nope", "probes": ["same"]}), "filtered_resps": "x"}], "is not a probe group"),
        ([{"target": key, "filtered_resps": "x"}] * 2, "a second sample"),
        ([{"target": key, "filtered_resps": "x", "input": "Are they the same?"}], "differs from the one mmfaith renders"),
        ([{"target": "7", "filtered_resps": "x"}], "no mmfaith row key"),
    ]
    for number, (lines, message) in enumerate(cases):
        path = samples_file(tmp_path / f"case{number}", lines)
        with pytest.raises(MmfaithError, match=message) as caught:
            main(["--debug", "import", "lmms-eval", str(path.parent), "--dataset", str(mixed_build), "--model", "m",
                  "--out", str(tmp_path / f"out{number}" / "predictions.jsonl")])
        if number != 1:
            assert f"{path}:1" in str(caught.value)
    nameless = samples_file(tmp_path / "nomodel", [{"target": key, "filtered_resps": "x"}])  # no results.json beside
    with pytest.raises(MmfaithError, match="do not name the model"):
        main(["--debug", "import", "lmms-eval", str(nameless), "--dataset", str(mixed_build),
              "--out", str(tmp_path / "o" / "p.jsonl")])


def test_a_partial_log_lists_what_is_missing(mixed_build: Path, tmp_path: Path) -> None:
    pairs = open_spd_dataset(mixed_build).pairs
    key = json.dumps({"id": pairs[0].id, "probes": ["same"]})
    path = samples_file(tmp_path / "logs", [{"target": key, "filtered_resps": "\\boxed{no}",
                                              "token_counts": [{"input_tokens": 9, "output_tokens": 3}]}])
    out = tmp_path / "run" / "predictions.jsonl"
    assert main(["import", "lmms-eval", str(path), "--dataset", str(mixed_build), "--model", "m", "--out", str(out)]) == 0
    (line,) = [json.loads(text) for text in out.read_text().splitlines()]
    assert line["response"] == "\\boxed{no}" and line["meta"]["prompt_tokens"] == 9 and line["meta"]["latency_s"] is None
    provenance = json.loads((out.parent / "import.json").read_text())
    assert provenance["counts"]["missing"] == 4 * len(pairs) - 1


def test_tool_loops_are_exported_to_inspect_only() -> None:
    require_kind("dependent", "t", "lmms-eval")
    require_kind("tool", "mmfaith_mcot_trace", "inspect")
    with pytest.raises(MmfaithError, match="'tool' .* not exported to lmms-eval.*mmfaith export inspect"):
        require_kind("tool", "mmfaith_mcot_trace", "lmms-eval")
    with pytest.raises(MmfaithError, match="unknown probe group kind 'loop'"):
        require_kind("loop", "t")


def test_lmms_export_refuses_a_round_at_its_own_temperature(mixed_build: Path, tmp_path: Path) -> None:
    """A family whose second round asks temperature 0 (CRM's answer after its chain of thought): lmms-eval
    0.7.3 cannot set it per agentic round, so an export at another temperature is refused."""
    import dataclasses

    from mmfaith.evaluators.harness.lmms_eval_export import write_lmms_eval
    from mmfaith.evaluators.harness.rows import export_rows
    from mmfaith.evaluators.harness.spec import Round

    collected = export_rows(str(mixed_build), progress=False)

    class ColdSecondRound:
        templates_sha256, settings = collected.part.templates_sha256, collected.part.settings
        groups = collected.part.groups

        def round(self, probe: str, state: dict, earlier: list) -> Round:
            asked = collected.part.round(probe, state, earlier)
            return dataclasses.replace(asked, temperature=0.0) if earlier else asked

    cold = dataclasses.replace(collected, part=ColdSecondRound())
    with pytest.raises(MmfaithError, match="describe round asks temperature 0.0"):
        write_lmms_eval(cold, str(mixed_build), tmp_path / "warm", 1024, 0.7, progress=False)
    assert not (tmp_path / "warm").exists()
    assert write_lmms_eval(cold, str(mixed_build), tmp_path / "cold", 1024, 0.0, progress=False).tasks


def test_reading_inspect_logs_without_inspect_ai_names_the_extra(tmp_path: Path) -> None:
    """The project's own environment has no inspect-ai: the import says which extra reads .eval logs."""
    if importlib.util.find_spec("inspect_ai") is not None:
        pytest.skip("inspect-ai is installed here: tests/spd_faith/test_harness_inspect.py reads real logs with it")
    from mmfaith.evaluators.harness.inspect_logs import read_inspect_logs

    with pytest.raises(MmfaithError, match=r"pip install 'mmfaith\[inspect\]'"):
        read_inspect_logs(tmp_path)


def test_a_release_folder_exports_the_same_rows_as_its_build(mixed_build: Path, tmp_path: Path) -> None:
    """SOURCE may be a release folder: its rows (prompts, image bytes, keys) are the build's."""
    from mmfaith.release.declaration import declaration_of
    from mmfaith.release.writer import ReleaseRequest, write_release

    released = tmp_path / "release"
    write_release(declaration_of("spd-faith"), ReleaseRequest(build=mixed_build, out=released, name="mmfaith/spd-faith-sample",
                                     version="0.1.0", include="all"))
    for source, out in ((mixed_build, tmp_path / "from-build"), (released, tmp_path / "from-release")):
        assert main(["export", "inspect", str(source), "--out", str(out), "--no-progress"]) == 0

    def by_key(folder: Path) -> dict[str, dict]:
        return {row["key"]: row for path in sorted((folder / "data").glob("*.parquet"))
                for row in pq.read_table(path).to_pylist()}

    assert by_key(tmp_path / "from-build") == by_key(tmp_path / "from-release")
    assert json.loads((tmp_path / "from-release" / "export.json").read_text())["dataset"]["id"].startswith("release:")
