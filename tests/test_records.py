"""Records held small (mmfaith/records.py): only the fields a reader uses, equal values held once."""
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
    second = keep_fields({**RECORD, "id": "vf-2", "options": [{"label": "A", "text": "red"}]}, ("id", "options"), shared)
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
