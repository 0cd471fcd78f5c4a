"""`mmfaith release SUITE` and `mmfaith verify` of a suite release: the default suite (every family, real
builds of the embedded COCO sample) released as one Hub dataset repo, one config per family, loaded with plain
`datasets.load_dataset(REPO, CONFIG)` from the folder and, pushed to the local fake Hub (tests/hub_server.py),
by repo id and tag; tampering caught; `--previous`; a suite naming a release refused."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mmfaith.cli import main
from mmfaith.loaders.load import load_config
from mmfaith.release.suite_release import verify_folder
from tests.hub_server import FakeHub, card_metadata_errors

REPO = Path(__file__).resolve().parents[2]
CONFIGS = {"spd_faith": "spd-faith", "vfaith": "vfaith", "vfaith_perception": "vfaith", "crm": "crm", "mcot": "mcot"}

PLAIN_LOAD = r"""
import json, sys
import datasets
source, revision = sys.argv[1], sys.argv[2] or None
out = {}
for config in sys.argv[3:]:
    loaded = datasets.load_dataset(source, config, revision=revision)
    out[config] = {split: sorted(part["id"]) for split, part in loaded.items()}
assert not any(name.startswith("mmfaith") for name in sys.modules), "plain datasets must not import mmfaith"
print(json.dumps(out))
"""


def release(out: Path, *extra: str) -> int:
    return main(["release", "default", "--out", str(out), "--name", "org/suite", "--version", "1.0.0",
                 "--include", "all", *extra])


@pytest.fixture(scope="module")
def released(suite_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("suite-release") / "r"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MMFAITH_CACHE", str(suite_cache))
        assert release(out) == 0
    return out


def expected_ids(released: Path) -> dict[str, dict[str, list[str]]]:
    """Each config's split ids as each family's own loader reads its folder in the release (mmfaith's path)."""
    manifest = json.loads((released / "manifest.json").read_text())
    return {config: {split: sorted(load_config(family, released / "families" / family, family_config)["id"])
                     for split, family_config in splits.items()}
            for family, entry in manifest["families"].items() for config, splits in entry["configs"].items()}


def plain_load(source: str, revision: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", PLAIN_LOAD, source, revision, *CONFIGS], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_one_repo_one_config_per_family_loaded_by_plain_datasets(released: Path, cached: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    manifest = json.loads((released / "manifest.json").read_text())
    assert manifest["format"] == "mmfaith-suite-release/1" and manifest["tag"] == "v1.0.0"
    assert sorted(manifest["families"]) == ["crm", "mcot", "spd-faith", "vfaith"]  # manifest keys are sorted
    assert {config: family for family, entry in manifest["families"].items() for config in entry["configs"]} == CONFIGS
    # CRM's variants are its config's splits, named with '_' (datasets takes word characters only).
    assert manifest["families"]["crm"]["configs"] == {"crm": {"specific_black": "specific-black",
                                                               "random_black": "random-black"}}
    assert sorted(manifest["files"]) == ["README.md", *(f"families/{f}/manifest.json" for f in sorted(
        ["spd-faith", "vfaith", "crm", "mcot"]))]
    card = (released / "README.md").read_text()
    assert card_metadata_errors(card) == []
    assert 'load_dataset("org/suite", "crm", revision="v1.0.0")' in card and "| CRM | `crm` |" in card
    assert "pairs" not in card.split("| CRM |")[1].split("\n")[0]  # CRM's row speaks of its own records
    assert "| `vfaith` | --circular | yes |" in card  # the default suite's run flags and its no-image pass
    loaded = plain_load(str(released), "")
    assert loaded == expected_ids(released)
    assert all(ids for splits in loaded.values() for ids in splits.values())
    assert main(["verify", str(released)]) == 0
    assert f"{released}: OK (" in capsys.readouterr().out
    assert release(tmp_path / "again") == 0  # the same suite, builds and arguments: the same bytes
    files = sorted(p.relative_to(released).as_posix() for p in released.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "again").as_posix() for p in (tmp_path / "again").rglob("*")
                           if p.is_file())
    assert all((released / f).read_bytes() == (tmp_path / "again" / f).read_bytes() for f in files)


def test_pushed_to_the_hub_each_config_loads_by_repo_id_and_tag(released: Path, tmp_path: Path) -> None:
    hub = FakeHub("tok").start()
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_TOKEN": "tok", "HF_HUB_DISABLE_XET": "1",
           "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(REPO)}
    try:
        script = ("import sys; from pathlib import Path; from mmfaith.release.push import push_release; "
                  "print(push_release(Path(sys.argv[1]), 'org/suite', token='tok').tag)")
        pushed = subprocess.run([sys.executable, "-c", script, str(released)], capture_output=True, text=True,
                                env=env, timeout=300)
        assert pushed.returncode == 0 and pushed.stdout.strip() == "v1.0.0", pushed.stderr
        repo = hub.repos["org/suite"]
        files = {k for k in repo.commits[repo.tags["v1.0.0"]] if k != ".gitattributes"}
        assert files == {p.relative_to(released).as_posix() for p in released.rglob("*") if p.is_file()}
        loaded = plain_load("org/suite", "v1.0.0", env=env, cwd=tmp_path)
    finally:
        hub.stop()
    assert loaded == expected_ids(released)


def test_verify_names_a_changed_shard_and_an_unlisted_file(released: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(released, broken)
    shard = next((broken / "families" / "crm" / "data").rglob("*.parquet"))
    shard.write_bytes(shard.read_bytes()[:-1] + b"\0")
    (broken / "notes.txt").write_text("not part of the release")
    problems = verify_folder(broken).problems
    assert len(problems) == 2, problems
    assert problems[0] == "notes.txt: file not listed in manifest.json; remove it or re-run `mmfaith release`."
    assert problems[1].startswith(f"families/crm/{shard.relative_to(broken / 'families' / 'crm').as_posix()}: sha256 ")
    assert main(["verify", str(broken)]) == 2


def test_previous_gives_each_family_its_changelog(released: Path, cached: Path, tmp_path: Path) -> None:
    assert main(["release", "default", "--out", str(tmp_path / "next"), "--name", "org/suite", "--version", "1.1.0",
                 "--include", "all", "--previous", str(released)]) == 0
    for family in ("spd-faith", "vfaith", "crm", "mcot"):
        changes = json.loads((tmp_path / "next" / "families" / family / "manifest.json").read_text())["changelog"]
        assert changes["previous_version"] == "1.0.0"
        assert (changes["added"], changes["removed"], changes["changed"]) == ([], [], [])
    one_family = released / "families" / "crm"
    assert main(["release", "default", "--out", str(tmp_path / "bad"), "--name", "org/suite", "--version", "1.1.0",
                 "--include", "all", "--previous", str(one_family)]) == 2
    assert not (tmp_path / "bad").exists()


def test_a_suite_naming_a_release_is_refused_in_one_line(released: Path, cached: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"format": "mmfaith-suite/1", "name": "s", "version": "1", "families": {
        "crm": {"dataset": str(released / "families" / "crm"), "run": []}}}))
    assert main(["release", str(suite), "--out", str(tmp_path / "out"), "--name", "org/s", "--version", "1.0.0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a build dir; a suite release packs builds" in err
    assert not (tmp_path / "out").exists()
