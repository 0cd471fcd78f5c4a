"""`mmfaith release` and `mmfaith verify` on a real build of the embedded sample; `--push` against a local fake Hub."""
from __future__ import annotations

import argparse
import hashlib
import json
from collections import Counter
import os
import re
import shutil
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import numpy as np
import pytest
import yaml

from mmfaith.release.declaration import declaration_of
from mmfaith.release.writer import ReleaseRequest, write_release
from mmfaith.release.manifest import verify_release
from mmfaith.errors import MmfaithError
from mmfaith.loaders.spd_faith.rows import row_to_record
from mmfaith.release.cli import register
from tests.conftest import read_records
from tests.hub_server import FakeHub, card_metadata_errors

NODERIVS = {"id": 3, "name": "Attribution-NonCommercial-NoDerivs License",
            "url": "http://creativecommons.org/licenses/by-nc-nd/2.0/"}

PLAIN_LOAD = r"""
import hashlib, json, sys
import datasets
out = {}
for config in sys.argv[2:]:
    ds = datasets.load_dataset(sys.argv[1], config, split="test").cast_column("image_a", datasets.Image(decode=False))
    ds = ds.cast_column("image_b", datasets.Image(decode=False))
    rows = []
    for row in ds:
        for side in ("image_a", "image_b"):
            row[side] = {"path": row[side]["path"], "sha256": hashlib.sha256(row[side]["bytes"]).hexdigest()}
        rows.append(row)
    out[config] = rows
assert not any(name.startswith("mmfaith") for name in sys.modules), "plain datasets must not import mmfaith"
print(json.dumps(out))
"""


def cli(argv: list[str]) -> int:
    """The `release`/`verify` verbs as mmfaith's CLI runs them (parse, call the handler, MmfaithError -> 2)."""
    root = argparse.ArgumentParser(prog="mmfaith")
    register(root.add_subparsers(dest="verb", required=True))
    args = root.parse_args(argv)
    try:
        return args.handler(args)
    except MmfaithError as exc:
        print(f"mmfaith: error: {exc}", file=sys.stderr)
        return 2


def release(build: Path, out: Path, version: str = "0.1.0", **kwargs) -> Path:
    write_release(declaration_of("spd-faith"), ReleaseRequest(build=build, out=out, name="mmfaith/spd-faith-sample", version=version,
                                     **{"include": "all", **kwargs}))
    return out


def front_matter(readme: Path) -> dict:
    match = re.match(r"^---\n(.*?)\n---\n", readme.read_text(encoding="utf-8"), re.S)
    assert match, "README.md has no YAML front matter"
    return yaml.safe_load(match.group(1))


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def released(mixed_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return release(mixed_build, tmp_path_factory.mktemp("release") / "out")


@pytest.fixture(scope="module")
def verified_build(mixed_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mixed build as if verified: single pairs accepted (the first one's image made NoDerivs), multi
    pairs accepted but the first rejected, controls left pending."""
    out = tmp_path_factory.mktemp("verified") / "build"
    shutil.copytree(mixed_build, out)
    records = read_records(out)
    singles = [r for r in records if r["subset"] == "single"]
    multis = [r for r in records if r["subset"] == "multi"]
    for record in singles + multis:
        record["verification"].update(status="accepted", annotators=["ann-1", "ann-2"])
    multis[0]["verification"]["status"] = "rejected"
    singles[0]["source"]["license"] = dict(NODERIVS)
    (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return out


def test_release_loads_offline_with_plain_datasets_and_round_trips_every_field_and_image(
        released: Path, mixed_build: Path, tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run([sys.executable, "-c", PLAIN_LOAD, str(released), "single", "multi", "control"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    records = {r["id"]: r for r in read_records(mixed_build)}
    seen = []
    for config, rows in loaded.items():
        assert [row["id"] for row in rows] == sorted(row["id"] for row in rows)
        for row in rows:
            record = records[row["id"]]
            assert row["subset"] == config and row["difficulty"] == record["difficulty"]
            for side in ("image_a", "image_b"):
                assert row[side]["sha256"] == record[f"{side}_sha256"]
                assert row[side]["sha256"] == hashlib.sha256((mixed_build / record[side]).read_bytes()).hexdigest()
            assert row_to_record(row) == record
            assert row["license"] and row["license_url"] == record["source"]["license"]["url"]
            seen.append(row["id"])
    assert sorted(seen) == sorted(records)


def test_release_is_byte_reproducible(released: Path, mixed_build: Path, tmp_path: Path) -> None:
    again = release(mixed_build, tmp_path / "again")
    assert files_of(again) == files_of(released)
    text = b"".join(files_of(released).values())
    assert b"/tmp" not in text and str(mixed_build).encode() not in text, "a local path leaked into the release"
    manifest = json.loads((released / "manifest.json").read_text())
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", json.dumps(manifest)), "a wall-clock time is in the manifest"


def test_manifest_names_files_build_verification_and_version(released: Path, mixed_build: Path) -> None:
    manifest = json.loads((released / "manifest.json").read_text())
    assert manifest["version"] == "0.1.0" and manifest["tag"] == "v0.1.0" and manifest["include"] == "all"
    assert manifest["build"]["records_sha256"] == hashlib.sha256((mixed_build / "records.jsonl").read_bytes()).hexdigest()
    assert manifest["build"]["recipe"]["seed"] == 0 and manifest["mmfaith_version"]
    records = read_records(mixed_build)
    assert manifest["verification"]["released_statuses"] == {"pending": len(records)}
    assert manifest["configs"] == dict(Counter(r["subset"] for r in records))
    on_disk = {p for p in files_of(released) if p != "manifest.json"}
    assert set(manifest["files"]) == on_disk
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == hashlib.sha256((released / name).read_bytes()).hexdigest()
    assert sum(e.get("rows", 0) for e in manifest["files"].values()) == len(manifest["rows"]) == len(records)


def test_card_yaml_parses_its_configs_match_the_files_and_its_hub_metadata_is_valid(released: Path,
                                                                                      mixed_build: Path) -> None:
    from huggingface_hub import DatasetCard

    meta = front_matter(released / "README.md")
    manifest = json.loads((released / "manifest.json").read_text())
    shards = [name for name in manifest["files"] if name.startswith("data/")]
    assert [c["config_name"] for c in meta["configs"]] == ["single", "multi", "control"]
    for config in meta["configs"]:
        (data_files,) = config["data_files"]
        assert data_files["split"] == "test"
        matched = sorted(s for s in shards if fnmatch(s, data_files["path"]))
        assert matched == sorted(n for n, e in manifest["files"].items() if e.get("config") == config["config_name"])
        assert matched, config
    assert meta["license"] == "other" and meta["license_name"] and meta["license_link"]
    assert card_metadata_errors((released / "README.md").read_text()) == []
    card = DatasetCard((released / "README.md").read_text())
    assert card.data.pretty_name == "spd-faith-sample" and card.data.size_categories == ["n<1K"]
    text = card.text
    for needle in ("--include all", "pending", "CC BY 4.0", "DQR", "load_dataset(",
                   "mmfaith score spd-faith", "@misc{spdfaith", "## Limitations", "First release", "telea"):
        assert needle in text, needle
    # The license table: one linked row per image license of the build, with its number of pairs.
    pairs = Counter(r["source"]["license"]["url"] for r in read_records(mixed_build))
    for url, count in pairs.items():
        assert re.search(rf"^\| \[CC-BY[A-Z-]*-2\.0\]\({re.escape(url)}\) \| {count} \|$", text, re.M), url


def test_tampered_shard_or_card_fails_verify(released: Path, mixed_build: Path, tmp_path: Path, capsys) -> None:
    assert cli(["verify", str(released)]) == 0
    assert f"OK (4 files, {len(read_records(mixed_build))} rows" in capsys.readouterr().out
    broken = tmp_path / "broken"
    shutil.copytree(released, broken)
    shard = broken / "data" / "multi" / "test-00000-of-00001.parquet"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    (broken / "data" / "multi" / "test-00000-of-00002.parquet").write_bytes(b"stray")
    with (broken / "README.md").open("a") as handle:
        handle.write("edited\n")
    problems = verify_release(broken).problems
    assert any(p.startswith("data/multi/test-00000-of-00001.parquet: sha256") for p in problems), problems
    assert any(p.startswith("data/multi/test-00000-of-00002.parquet: shard not listed") for p in problems)
    assert any(p.startswith("README.md: sha256") for p in problems)
    assert cli(["verify", str(broken)]) == 2
    assert "3 problem(s)" in capsys.readouterr().err


def test_verify_checks_the_schema_of_every_row(released: Path, tmp_path: Path) -> None:
    """A shard rewritten with a row that breaks the schema, manifest hashes updated: only the row check catches it."""
    import pyarrow.parquet as pq

    broken = tmp_path / "broken"
    shutil.copytree(released, broken)
    name = "data/single/test-00000-of-00001.parquet"
    table = pq.read_table(broken / name)
    rows = table.to_pylist()
    rows[1]["num_differences"] = 3
    pq.write_table(table.from_pylist(rows, schema=table.schema), broken / name)
    manifest = json.loads((broken / "manifest.json").read_text())
    manifest["files"][name].update(sha256=hashlib.sha256((broken / name).read_bytes()).hexdigest(),
                                   bytes=(broken / name).stat().st_size)
    (broken / "manifest.json").write_text(json.dumps(manifest))
    problems = verify_release(broken).problems
    assert any(f"{name} row 1" in p and "num_differences" in p for p in problems), problems


def test_accepted_only_release_of_an_unverified_build_fails_clearly(mixed_build: Path, tmp_path: Path, capsys) -> None:
    assert cli(["release", str(mixed_build), "--out", str(tmp_path / "r"), "--name", "x", "--version", "1.0.0"]) == 2
    err = capsys.readouterr().err
    assert "no pair is verified" in err and "pending" in err and "--include all" in err
    assert not (tmp_path / "r").exists()
    assert cli(["release", str(mixed_build), "--out", str(tmp_path / "r"), "--name", "x", "--version", "1.0"]) == 2
    assert "X.Y.Z" in capsys.readouterr().err


def test_rejected_pending_and_noderivs_pairs_stay_out_unless_allowed(verified_build: Path, tmp_path: Path) -> None:
    records = read_records(verified_build)
    noderivs = next(r["id"] for r in records if r["source"]["license"]["id"] == 3)
    rejected = next(r["id"] for r in records if r["verification"]["status"] == "rejected")
    accepted = release(verified_build, tmp_path / "accepted", include="accepted")
    manifest = json.loads((accepted / "manifest.json").read_text())
    assert manifest["excluded"] == {"noderivs": 1, "pending": 2, "rejected": 1}
    accepted_kept = [r for r in records if r["verification"]["status"] == "accepted" and r["id"] != noderivs]
    assert manifest["configs"] == dict(Counter(r["subset"] for r in accepted_kept))
    assert noderivs not in manifest["rows"] and rejected not in manifest["rows"]
    card = (accepted / "README.md").read_text()
    assert "Every pair here was accepted" in card and "--allow-noderivs" not in card
    assert f"2 annotators, {len(accepted_kept)} pairs seen by two or more" in card
    everything = release(verified_build, tmp_path / "all", include="all", allow_noderivs=True)
    manifest = json.loads((everything / "manifest.json").read_text())
    assert manifest["excluded"] == {"rejected": 1} and noderivs in manifest["rows"]
    kept = [r for r in records if r["verification"]["status"] != "rejected"]
    assert manifest["configs"] == dict(Counter(r["subset"] for r in kept))
    card = (everything / "README.md").read_text()
    assert "`--allow-noderivs`" in card and f"2 of its {len(kept)} pairs have `verification.status` `pending`" in card
    assert "| [CC-BY-NC-ND-2.0](http://creativecommons.org/licenses/by-nc-nd/2.0/) | 1 |" in card


def test_changelog_against_the_previous_release(verified_build: Path, mixed_build: Path, tmp_path: Path) -> None:
    first = release(verified_build, tmp_path / "v1", version="1.0.0", include="accepted")
    second = release(mixed_build, tmp_path / "v2", version="1.1.0", previous=str(first))
    changes = json.loads((second / "manifest.json").read_text())["changelog"]
    assert changes["previous_version"] == "1.0.0"
    # v1 holds the accepted pairs (verified_build: every single and multi pair but the NoDerivs single and the
    # rejected multi); v2 adds those two and the controls, and every pair of v1 changed its status to pending.
    first_ids = set(json.loads((first / "manifest.json").read_text())["rows"])
    records = read_records(mixed_build)
    added = len(records) - len(first_ids)
    assert added == 2 + sum(r["subset"] == "control" for r in records)
    assert len(changes["added"]) == added and changes["removed"] == [] and len(changes["changed"]) == len(first_ids)
    assert (f"Against mmfaith/spd-faith-sample v1.0.0: {added} pairs added, 0 removed, {len(first_ids)} changed"
            in (second / "README.md").read_text())


def test_push_uploads_one_commit_tags_it_and_never_overwrites_a_tag(
        released: Path, mixed_build: Path, verified_build: Path, tmp_path: Path) -> None:
    token = "hf_fake_" + "x" * 24
    hub = FakeHub(token).start()
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_TOKEN": token, "HF_HUB_DISABLE_XET": "1",
           "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HOME": str(tmp_path / "hf")}

    def push(build: Path, out: Path, version: str, *extra: str) -> subprocess.CompletedProcess:
        script = "import sys; from tests.spd_faith.test_release import cli; sys.exit(cli(sys.argv[1:]))"
        argv = ["release", str(build), "--out", str(out), "--name", "org/spd", "--version", version,
                "--push", "--repo", "org/spd", *extra]
        return subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, env=env,
                              cwd=Path(__file__).parent.parent.parent, timeout=300)

    try:
        first = push(mixed_build, tmp_path / "v1", "0.1.0", "--include", "all")
        assert first.returncode == 0, first.stderr
        assert token not in first.stdout + first.stderr
        repo = hub.repos["org/spd"]
        v1 = repo.tags["v0.1.0"]
        assert repo.branches["main"] == v1
        assert {k: v for k, v in repo.commits[v1].items() if k != ".gitattributes"} == files_of(tmp_path / "v1")
        commits = [c for c in hub.calls if c.startswith("POST /api/datasets/org/spd/commit/")]
        assert len(commits) == 1 and "POST /api/datasets/org/spd/tag/" + v1 in hub.calls

        again = push(mixed_build, tmp_path / "v1-again", "0.1.0", "--include", "all")
        assert again.returncode == 2 and "tag v0.1.0 already exists" in again.stderr
        assert len([c for c in hub.calls if "/commit/" in c]) == 1 and repo.tags == {"v0.1.0": v1}

        second = push(verified_build, tmp_path / "v2", "0.2.0", "--previous", "org/spd@v0.1.0")
        assert second.returncode == 0, second.stderr
        v2 = repo.tags["v0.2.0"]
        assert repo.tags["v0.1.0"] == v1 and v2 != v1 and repo.branches["main"] == v2
        assert {k: v for k, v in repo.commits[v2].items() if k != ".gitattributes"} == files_of(tmp_path / "v2")
        assert {k: v for k, v in repo.commits[v1].items() if k != ".gitattributes"} == files_of(tmp_path / "v1")
        changes = json.loads((tmp_path / "v2" / "manifest.json").read_text())["changelog"]
        assert changes["previous_version"] == "0.1.0" and len(changes["removed"]) == 4
    finally:
        hub.stop()


def test_push_needs_a_token_and_a_repo(released: Path, mixed_build: Path, tmp_path: Path, capsys) -> None:
    argv = ["release", str(mixed_build), "--out", str(tmp_path / "r"), "--name", "x", "--version", "1.0.0",
            "--include", "all", "--push"]
    assert cli(argv) == 2 and "--repo" in capsys.readouterr().err
    saved = os.environ.pop("HF_TOKEN", None)
    try:
        assert cli(argv + ["--repo", "org/x"]) == 2 and "HF_TOKEN" in capsys.readouterr().err
    finally:
        if saved is not None:
            os.environ["HF_TOKEN"] = saved
    assert not (tmp_path / "r").exists()


def test_shard_boundaries_are_fixed_and_every_shard_loads(mixed_build: Path, tmp_path: Path) -> None:
    import datasets

    singles = sum(r["subset"] == "single" for r in read_records(mixed_build))
    assert singles >= 2, "two shards need two single pairs"
    rows = singles - 1  # the singles in two shards: a full one and one holding the last row
    out = release(mixed_build, tmp_path / "sharded", shard_rows=rows)
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(n for n in manifest["files"] if n.startswith("data/single/")) == [
        "data/single/test-00000-of-00002.parquet", "data/single/test-00001-of-00002.parquet"]
    assert [manifest["files"][f"data/single/test-0000{i}-of-00002.parquet"]["rows"] for i in (0, 1)] == [rows, 1]
    assert verify_release(out).problems == []
    loaded = datasets.load_dataset(str(out), "single", split="test")
    assert loaded["id"] == sorted(r["id"] for r in read_records(mixed_build) if r["subset"] == "single")
    assert files_of(release(mixed_build, tmp_path / "sharded-again", shard_rows=rows)) == files_of(out)


def test_card_and_manifest_give_the_annotators_agreement(mixed_build: Path, tmp_path: Path) -> None:
    # Two pairs, two annotators each (as `annotate pull` records them in verification.votes):
    # pair 1 accept/accept, pair 2 accept/reject. Fleiss' kappa by hand: P1 = (2*1)/(2*1) = 1,
    # P2 = 0, mean P = 0.5; p(accept) = 3/4, p(reject) = 1/4, Pe = 9/16 + 1/16 = 0.625;
    # kappa = (0.5 - 0.625) / (1 - 0.625) = -1/3.
    build = tmp_path / "build"
    shutil.copytree(mixed_build, build)
    records = read_records(build)
    for record, second in zip(records[:2], ("accept", "reject")):
        record["verification"]["votes"] = [
            {"annotator": "a@example.org", "verdict": "accept", "reasons": [], "annotation_id": 1},
            {"annotator": "b@example.org", "verdict": second, "reasons": [], "annotation_id": 2}]
    (build / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = release(build, tmp_path / "release")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["verification"]["agreement"] == pytest.approx(-1 / 3, abs=1e-6)
    assert "Fleiss' kappa -0.333 on the verdicts" in (out / "README.md").read_text()


def test_verify_fails_on_an_unlisted_file(released: Path, tmp_path: Path, capsys) -> None:
    broken = tmp_path / "stray"
    shutil.copytree(released, broken)
    (broken / "data" / "notes.txt").write_text("not part of the release")
    (broken / ".git").mkdir()  # a clone's own files are not the release's
    (broken / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert verify_release(broken).problems == [
        "data/notes.txt: file not listed in manifest.json; remove it or re-run `mmfaith release`."]
    assert cli(["verify", str(broken)]) == 2


@pytest.mark.parametrize("cut, named", [
    (lambda m: m.pop("files"), "no 'files' map"),
    (lambda m: m["files"]["README.md"].pop("sha256"), "files.README.md lacks sha256"),
])
def test_verify_of_a_manifest_missing_fields_is_one_line(released: Path, tmp_path: Path, capsys, cut, named) -> None:
    broken = tmp_path / "cut"
    shutil.copytree(released, broken)
    manifest = json.loads((broken / "manifest.json").read_text())
    cut(manifest)
    (broken / "manifest.json").write_text(json.dumps(manifest))
    assert cli(["verify", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mmfaith: error: ") and err.count("\n") == 1 and named in err, err


def test_release_out_under_a_file_is_one_line(mixed_build: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "f").write_text("mine")
    assert cli(["release", str(mixed_build), "--out", str(tmp_path / "f" / "r"), "--name", "x", "--version", "1.0.0",
                "--include", "all"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"release --out {tmp_path / 'f' / 'r'}: {tmp_path / 'f'} is a file" in err, err


def test_streamed_shards_are_the_bytes_of_one_whole_table_write(tmp_path: Path) -> None:
    """The writer writes a shard row group by row group (memory bounded by ROW_GROUP_ROWS rows): the file is
    byte for byte what one `pq.write_table` of the whole shard with the same settings writes (the writer
    before streaming), here with 250 rows: three row groups, the last one short."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets import Features, Image, Value

    from mmfaith.images import png_bytes
    from mmfaith.release.declaration import ReleaseDeclaration
    from mmfaith.release.writer import PARQUET_SETTINGS, ROW_GROUP_ROWS, write_shards

    features = Features({"id": Value("string"), "image": Image()})
    images = {n: png_bytes(np.full((4, 4, 3), n % 256, dtype=np.uint8)) for n in range(250)}
    records = [{"id": f"r{n:04d}"} for n in range(250)]
    declaration = ReleaseDeclaration(
        family="stream", noun="rows", read_build=lambda build: records, select=lambda *a: (records, {}),
        units=lambda kept: {"all": [(r, None) for r in kept]}, features=lambda config: features,
        to_row=lambda build, config, unit: {"id": unit[0]["id"],
                                            "image": {"bytes": images[int(unit[0]["id"][1:])], "path": None}},
        check_row=lambda where, config, row: (None, []), card=lambda facts: "")
    entries = write_shards(tmp_path, declaration, tmp_path, {"all": list(reversed(declaration.units(records)["all"]))},
                           shard_rows=1000)
    assert list(entries) == ["data/all/test-00000-of-00001.parquet"]
    whole = pa.Table.from_pylist([features.encode_example({"id": r["id"], "image": {"bytes": images[n], "path": None}})
                                  for n, r in enumerate(records)], schema=features.arrow_schema)
    pq.write_table(whole, tmp_path / "whole.parquet", row_group_size=ROW_GROUP_ROWS, **PARQUET_SETTINGS)
    streamed = tmp_path / "data/all/test-00000-of-00001.parquet"
    assert streamed.read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    assert pq.ParquetFile(streamed).num_row_groups == 3
