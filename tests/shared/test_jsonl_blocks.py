"""JSON Lines read by block on several processes (mmfaith/jsonl.py, loaders/build_records.py,
evaluators/predictions.py with workers; issue 34): the same records, line numbers and errors as one reader."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from mmfaith.errors import MmfaithError
from mmfaith.evaluators import predictions as predictions_module
from mmfaith.evaluators.predictions import read_predictions
from mmfaith.jsonl import line_blocks, read_block, read_jsonl
from mmfaith.loaders import build_records
from mmfaith.loaders.build_records import read_build_records
from mmfaith.ordered_pool import ordered_map


def _lines_file(path: Path) -> Path:
    """Objects of varied lengths, a blank line, a line with a carriage return inside a string, a torn last line."""
    lines = [json.dumps({"id": f"r{k}", "text": "x" * (k * 7 % 23)}) for k in range(12)]
    lines[4] = ""
    lines[6] = json.dumps({"id": "r6", "text": "a\rb"})
    path.write_bytes(("\n".join(lines) + '\n{"id": "torn"').encode())
    return path


def test_a_file_split_at_every_size_gives_the_same_records_and_hash(tmp_path: Path) -> None:
    path = _lines_file(tmp_path / "r.jsonl")
    data = path.read_bytes()
    whole = list(read_jsonl(path))
    assert [number for number, _ in whole] == [1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12]
    for size in range(1, len(data) + 2):
        digest = hashlib.sha256()
        blocks = list(line_blocks(path, size, digest=digest))
        assert blocks[0].start == 0 and blocks[-1].end == len(data), size
        assert all(block.data is None for block in blocks)  # a regular file: workers read the bytes
        assert all(a.end == b.start for a, b in zip(blocks, blocks[1:])), size  # contiguous, nothing read twice
        assert all(data[block.start - 1:block.start] == b"\n" for block in blocks[1:]), size  # on line boundaries
        assert [pair for block in blocks for pair in read_block(block)] == whole, size
        assert digest.hexdigest() == hashlib.sha256(data).hexdigest(), size


def test_a_pipe_is_read_once_its_blocks_carrying_their_bytes(tmp_path: Path) -> None:
    path = _lines_file(tmp_path / "r.jsonl")
    read, write = os.pipe()
    os.write(write, path.read_bytes())  # under a pipe's buffer: no writer thread needed
    os.close(write)
    try:
        blocks = list(line_blocks(Path(f"/dev/fd/{read}"), 40))
    finally:
        os.close(read)
    assert len(blocks) > 2 and all(block.data is not None for block in blocks)
    assert [(number, value) for block in blocks for number, value in read_block(block)] == list(read_jsonl(path))


def test_a_bad_line_in_a_middle_block_is_reported_with_its_true_line_number(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    lines = [json.dumps({"id": f"r{k}"}) for k in range(30)]
    lines[17] = '{"id": "r17", oops}'
    path.write_text("\n".join(lines) + "\n")
    blocks = list(line_blocks(path, 64))
    assert len(blocks) > 4
    bad = next(k for k, block in enumerate(blocks) if block.start <= data_offset(path, 17) < block.end)
    assert 0 < bad < len(blocks) - 1  # a middle block
    for block in blocks[:bad]:
        list(read_block(block))
    with pytest.raises(MmfaithError, match=rf"^{path}:18: not valid JSON \(Expecting property name"):
        list(read_block(blocks[bad]))
    with pytest.raises(MmfaithError) as whole:
        list(read_jsonl(path))
    with pytest.raises(MmfaithError) as by_block:
        [pair for block in blocks for pair in read_block(block)]
    assert str(by_block.value) == str(whole.value)


def data_offset(path: Path, index: int) -> int:
    """The byte offset of line `index` (from 0) of `path`."""
    return sum(len(line) for line in path.read_bytes().splitlines(keepends=True)[:index])


def test_a_line_longer_than_the_limit_is_refused_by_number_without_reading_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"a": 1}\n' * 5 + b"x" * 1000 + b"\n" + b'{"a": 2}\n')
    assert len(list(line_blocks(path, 16, max_line=1001))) > 1  # 1000 bytes and the newline: long enough
    for size in (4, 16, 100, 5000):
        with pytest.raises(MmfaithError, match=rf"^{path}: line 6 is longer than 1000 bytes"):
            list(line_blocks(path, size, max_line=1000))


def test_ordered_map_takes_its_inputs_as_the_workers_need_them() -> None:
    taken: list[int] = []

    def inputs():
        for k in range(100):
            taken.append(k)
            yield k

    results = ordered_map(lambda k: k * 2, inputs(), workers=2)
    assert next(results) == 0
    assert len(taken) <= 5  # the pool's two, then at most 2 x workers in flight: not all 100
    assert list(results) == [k * 2 for k in range(1, 100)]


def _records_file(path: Path, n: int) -> Path:
    """n prediction lines (a shipped schema, schemas/prediction.schema.json) as the records, ids r0 .. r{n-1}."""
    path.write_text("".join(_record(f"r{k}", ["a", "b"][k % 2]) for k in range(n)))
    return path


def _record(record_id: str, probe: str = "a", response: object = "yes") -> str:
    return json.dumps({"id": record_id, "probe": probe, "response": response, "model": "m"}) + "\n"


def _read(path: Path, workers: int, check=lambda record, where: None):
    return read_build_records(path, "prediction", "a test record", check,
                              lambda record, shared: (record["id"], shared.value({"probe": record["probe"]})), workers)


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 256 bytes: a few lines each."""
    monkeypatch.setattr(build_records, "BLOCK_BYTES", 256)


def test_build_records_are_the_same_on_one_process_or_several(tmp_path: Path, small_blocks: None) -> None:
    path = _records_file(tmp_path / "records.jsonl", 200)
    one, two = _read(path, 1), _read(path, 2)
    assert one == two
    assert [kept[0] for kept in one.kept] == [f"r{k}" for k in range(200)]
    assert one.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("workers", [1, 2])
def test_build_records_errors_name_the_true_line_in_file_order(tmp_path: Path, small_blocks: None,
                                                               workers: int) -> None:
    path = _records_file(tmp_path / "records.jsonl", 200)
    lines = path.read_text().splitlines(keepends=True)
    bad_schema = lines.copy()
    bad_schema[120] = _record("r120", response=5)
    path.write_text("".join(bad_schema))
    with pytest.raises(MmfaithError, match=rf"^{path}:121: not a test record: response: 5 is not of type"):
        _read(path, workers)
    duplicate = bad_schema.copy()
    duplicate[90] = _record("r3")  # before the schema error: first
    path.write_text("".join(duplicate))
    with pytest.raises(MmfaithError, match=rf"^{path}:91: duplicate id r3\.$"):
        _read(path, workers)

    def refuse_line_151(record, where):
        if where.endswith(":151"):
            raise MmfaithError(f"{where}: image missing")

    path.write_text("".join(lines))
    with pytest.raises(MmfaithError, match=rf"^{path}:151: image missing$"):  # the family's check, on a worker
        _read(path, workers, refuse_line_151)
    lines[150] = _record("r3")  # a second r3 whose family check fails too: the duplicate is its first error
    path.write_text("".join(lines))
    with pytest.raises(MmfaithError, match=rf"^{path}:151: duplicate id r3\.$"):
        _read(path, workers, refuse_line_151)


def _prediction(item: str, probe: str, response: str | None, model: str = "m", **meta) -> str:
    if response is None:
        meta["error"] = "timeout"  # a failed call says why
    return json.dumps({"id": item, "probe": probe, "response": response, "model": model, "meta": meta}) + "\n"


@pytest.mark.parametrize("from_run", [True, False])
def test_predictions_read_on_several_processes_are_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            from_run: bool) -> None:
    monkeypatch.setattr(predictions_module, "BLOCK_BYTES", 300)
    expected = {f"q{k}": ("a", "b") for k in range(60)}
    lines = [_prediction(f"q{k}", probe, None if k % 7 == 0 else f"answer {k}{probe}", finish_reason="stop")
             for k in range(60) for probe in ("a", "b")]
    if from_run:
        lines += [_prediction("q7", "a", "retried"), _prediction("q14", "b", "again")]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(lines))
    one = read_predictions(path, expected, from_run)
    two = read_predictions(path, expected, from_run, workers=2)
    assert one == two
    assert one.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert one.n_errors == 18 and len(one.answered) == 102 + 2 * from_run and len(one.failed) == 18 - 2 * from_run


def test_predictions_errors_count_with_true_line_numbers_on_several_processes(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(predictions_module, "BLOCK_BYTES", 200)
    expected = {f"q{k}": ("a",) for k in range(40)}
    lines = [_prediction(f"q{k}", "a", "yes") for k in range(40)]
    lines[25] = "{not json\n"
    lines[30] = _prediction("zz", "a", "yes")
    lines[33] = _prediction("q33", "a", "yes", model="other")
    lines.append(_prediction("q2", "a", "twice"))
    path = tmp_path / "p.jsonl"
    path.write_text("".join(lines))
    messages = []
    for workers in (1, 2):
        with pytest.raises(MmfaithError) as caught:
            read_predictions(path, expected, from_run=False, workers=workers)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith(f"{path}: 4 bad line(s)")
    assert "line 26: not valid JSON" in messages[0] and "line 31: unknown id 'zz'" in messages[0]
    assert "line 34: model 'other' differs from 'm' of line 1" in messages[0]
    assert "line 41: a second answer to q2 / a (first on line 3;" in messages[0]
