"""bench/codelets_ab.py's revision handling, without its builds or timing: each revision's
instantiation lists come from that revision's own generator, and a revision whose LIF
vertices the installed host cannot name is refused at once, in one line."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
codelets_ab = pytest.importorskip("codelets_ab")

BEFORE_HALF_FORWARD = "425a5c3"  # LifForward had no storage parameter yet

pytestmark = pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")


def has_revision(rev: str) -> bool:
    found = subprocess.run(["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=ROOT)
    return found.returncode == 0


def test_the_working_tree_is_accepted_and_lists_its_own_vertices(tmp_path):
    before = codelets_ab.export_codelets(None, tmp_path / "before")
    after = codelets_ab.export_codelets(None, tmp_path / "after")
    codelets_ab.check_same_vertices(before.parent, after.parent, "HEAD")  # no exit
    codelets_ab.add_instantiations(before)
    text = (before / "LifForward.cpp").read_text()
    assert (
        "template class LifForward<popsnn::Leaky,popsnn::ResetSubtract,popsnn::NoRule,float>;"
        in text
    )


def test_a_revision_with_other_vertex_templates_is_refused(tmp_path):
    if not has_revision(BEFORE_HALF_FORWARD):
        pytest.skip(f"{BEFORE_HALF_FORWARD} is not in this clone's history")
    before = codelets_ab.export_codelets(BEFORE_HALF_FORWARD, tmp_path / "before")
    after = codelets_ab.export_codelets(None, tmp_path / "after")
    with pytest.raises(SystemExit) as refused:
        codelets_ab.check_same_vertices(before.parent, after.parent, BEFORE_HALF_FORWARD)
    message = str(refused.value)
    assert "\n" not in message
    assert f"{BEFORE_HALF_FORWARD}'s codelets lack" in message and "cpu_step.py" in message
    # Its own generator lists its own (three-parameter) forward vertices, not the host's.
    codelets_ab.add_instantiations(before)
    text = (before / "LifForward.cpp").read_text()
    assert "LifForward<popsnn::Leaky,popsnn::ResetSubtract,popsnn::NoRule>;" in text
    assert ",float>;" not in text
