"""Memory of scoring: records held small (mmfaith/records.py), kept prediction lines, items.jsonl in batches."""
from __future__ import annotations

from mmfaith.records import SHARED_MAX_CHARS, Shared, keep_fields

RECORD = {"id": "vf-1", "question": "What color?", "options": [{"label": "A", "text": "red"}],
          "source": {"dataset": "coco", "file_name": "1.jpg", "attribution": "long text", "license": {"id": 4}},
          "build": {"seed": 0, "plan": {"ann_id": 7}}, "answer": None}


def test_keep_fields_keeps_the_named_fields_and_one_level_of_subfields() -> None:
    kept = keep_fields(RECORD, ("id", "options", "answer", "source.dataset", "source.file_name", "missing",
                                "source.missing"))
    assert kept == {"id": "vf-1", "options": [{"label": "A", "text": "red"}], "answer": None,
                    "source": {"dataset": "coco", "file_name": "1.jpg"}}
    assert "attribution" in RECORD["source"]  # the loaded record is not changed


def test_keep_fields_without_fields_is_the_record_itself() -> None:
    assert keep_fields(RECORD, None) is RECORD


def test_shared_holds_equal_objects_once_and_leaves_others_apart() -> None:
    shared = Shared()
    first = keep_fields(RECORD, ("id", "options"), shared)
    second = keep_fields({**RECORD, "id": "vf-2", "options": [{"label": "A", "text": "red"}]}, ("id", "options"),
                         shared)
    third = keep_fields({**RECORD, "options": [{"label": "A", "text": "blue"}]}, ("options",), shared)
    assert second["options"] is first["options"]
    assert third["options"] is not first["options"] and third["options"] == [{"label": "A", "text": "blue"}]
    # 1 and 1.0 and True are different JSON, so never merged; a long value is kept as it is, not looked up
    assert shared.value([1]) is not shared.value([1.0]) and shared.value([True]) == [True]
    long = ["x" * SHARED_MAX_CHARS]
    assert shared.value(long) is long and shared.value(list(long)) is not long


def test_write_lines_atomic_writes_the_lines_redacted_across_batches(tmp_path) -> None:
    from mmfaith.jsonl import write_lines_atomic

    lines = [f'{{"n": {n}, "text": "Bearer abc{n}def"}}\n' for n in range(10)]
    write_lines_atomic(tmp_path / "items.jsonl", lines, batch=3)  # 4 batches, the last of one line
    expected = "".join(f'{{"n": {n}, "text": "Bearer ***"}}\n' for n in range(10))
    assert (tmp_path / "items.jsonl").read_text() == expected
    assert [p.name for p in tmp_path.iterdir()] == ["items.jsonl"]  # no temporary file left


def test_a_kept_prediction_line_is_its_response_and_the_meta_a_scorer_reads(tmp_path) -> None:
    import json

    from mmfaith.evaluators.predictions import read_predictions

    meta = {"attempts": 1, "latency_s": 0.2, "prompt_tokens": 500, "completion_tokens": 12, "error": None,
            "finish_reason": "stop", "generation": {"max_tokens": 1024, "temperature": 0.0},
            "images": [{"sha256": "a" * 64}], "shown_sha256": "b" * 64, "reasoning": None, "order": "original-first"}
    lines = [{"id": f"x-{n}", "probe": "original", "model": "m", "response": f"answer {n}", "meta": meta}
             for n in range(2)]
    path = tmp_path / "predictions.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    read = read_predictions(path, {"x-0": ("original",), "x-1": ("original",)}, from_run=True,
                            images_by_id={"x-0": {"a" * 64}, "x-1": {"a" * 64}})
    kept = {"finish_reason": "stop", "generation": {"max_tokens": 1024, "temperature": 0.0}, "order": "original-first"}
    assert read.answered[("x-0", "original")] == {"response": "answer 0", "meta": kept}
    assert read.answered[("x-1", "original")]["meta"] is read.answered[("x-0", "original")]["meta"]  # held once
    # a family's scored_meta reduces what is kept further (MCoT: a trace's answer, boxes, texts, tool-call count)
    read = read_predictions(path, {"x-0": ("original",), "x-1": ("original",)}, from_run=True,
                            scored_meta=lambda kept_meta: {"order": kept_meta["order"]})
    assert read.answered[("x-1", "original")] == {"response": "answer 1", "meta": {"order": "original-first"}}
