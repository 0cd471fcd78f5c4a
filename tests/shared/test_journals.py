"""Every COCO family's build journal is the shared one (builders/journal.py): a line that is not the family's is
one error naming the file, the line, what a line needs and the fix; a torn last line is cut when appending."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmfaith.builders.crm.build import _Journal as CrmJournal
from mmfaith.builders.journal import BuildJournal
from mmfaith.builders.spd_faith.build import _Journal as SpdJournal
from mmfaith.builders.vfaith.build import Journal as VfaithJournal
from mmfaith.errors import MmfaithError

JOURNALS = [SpdJournal, VfaithJournal, CrmJournal]


@pytest.mark.parametrize("journal", JOURNALS, ids=lambda j: j.TITLE)
def test_a_foreign_line_names_file_line_and_fix(journal: type[BuildJournal], tmp_path: Path) -> None:
    for kind in journal.FILES:
        folder = tmp_path / kind
        folder.mkdir()
        (folder / journal.FILES[kind]).write_text('{"slot": "s", "key": "s", "stage": "gate"}\n{"other": 1}\n'
                                                  if kind == "rejected" else '{"other": 1}\n')
        with pytest.raises(MmfaithError) as caught:
            journal(folder)
        line = 2 if kind == "rejected" else 1
        message = str(caught.value)
        assert message.startswith(f"{folder / journal.FILES[kind]}:{line}: not a line of an mmfaith {journal.TITLE} "
                                  f"build (it needs {journal.NEEDS[kind]}; "), message
        assert message.endswith(f"so {folder} is not a build dir to resume; choose a new --out (or an empty folder).")


@pytest.mark.parametrize("journal", JOURNALS, ids=lambda j: j.TITLE)
def test_rejections_are_read_back_and_a_torn_line_is_cut_on_open(journal: type[BuildJournal], tmp_path: Path) -> None:
    rejected = tmp_path / journal.FILES["rejected"]
    line = {"slot": "slot-1", "key": "slot-1", "stage": "gate"}
    rejected.write_text(json.dumps(line) + "\n" + '{"slot": "torn')
    opened = journal(tmp_path)  # reading skips the torn last line (a crash mid-write) and writes nothing
    assert rejected.read_text().endswith('{"slot": "torn')
    opened.open()
    opened.rejected.append({**line, "slot": "slot-2", "key": "slot-2"})
    opened.close()
    assert [json.loads(text)["slot"] for text in rejected.read_text().splitlines()] == ["slot-1", "slot-2"]
    assert "slot-1" in journal(tmp_path).done
