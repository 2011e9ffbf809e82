"""The documentation site builds without a warning, and its code runs.

`mkdocs build --strict` turns every warning (a broken link, a docstring mkdocstrings cannot
read, a page missing from the nav's files) into a failure; the Python blocks of the home page
and the tutorials run as written, in order, so the tutorials cannot drift from the API.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RUNNABLE_PAGES = [
    "index.md",
    "tutorials/from-snntorch.md",
    "tutorials/sparse-training.md",
    "tutorials/cpp-embedding.md",
    "tutorials/running-on-an-ipu.md",
    "tutorials/multi-process-training.md",
]


def python_blocks(page: Path) -> list:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M)


def test_site_builds_strict_with_the_api_reference(tmp_path):
    site = tmp_path / "site"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(site),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stdout}\n{run.stderr}"
    assert "WARNING" not in run.stderr, run.stderr
    # The API reference was generated from the docstrings, not left empty.
    losses_page = (site / "api" / "losses" / "index.html").read_text()
    assert "ce_count_loss" in losses_page and "population code" in losses_page.lower()
    # The ecosystem's modules (extras) are in the reference too, read without importing them.
    for module, member in (
        ("torch", "SpikingNetwork"),
        ("distributed", "data_parallel"),
        ("nir_interop", "NIRError"),
    ):
        page = (site / "api" / module / "index.html").read_text()
        assert f'id="popsnn.{module}.{member}"' in page, module
    for page in RUNNABLE_PAGES:
        assert (site / page.replace("index.md", "").replace(".md", "/") / "index.html").is_file()


def test_every_markdown_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    missing = [p for p in pages if f" {p}\n" not in nav]
    assert not missing, f"pages missing from mkdocs.yml's nav: {missing}"


@pytest.mark.parametrize("page", RUNNABLE_PAGES)
def test_page_code_runs_as_written(page, tmp_path, monkeypatch):
    blocks = python_blocks(DOCS / page)
    assert blocks, f"{page} lost its Python examples"
    monkeypatch.chdir(tmp_path)  # anything a page writes lands in a temp folder
    scope = {"__name__": "__docs__"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{page} (python block {i + 1})", "exec"), scope)


MPIRUN = Path(sys.executable).parent / "mpirun"


def test_multi_process_tutorial_script_gives_one_process_loss_under_mpirun(tmp_path):
    """The tutorial's script, saved as a file: `mpirun -n 2` prints the loss of one process."""
    script = tmp_path / "train_dp.py"
    script.write_text(python_blocks(DOCS / "tutorials" / "multi-process-training.md")[0])
    env = dict(
        os.environ,
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        POPSNN_NUM_THREADS="1",
        OMPI_MCA_rmaps_base_oversubscribe="1",
    )
    outputs = []
    for launcher in ([], [str(MPIRUN), "-n", "2"]):
        done = subprocess.run(
            [*launcher, sys.executable, str(script)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        outputs.append(done.stdout)
    one, two = ([line for line in out.splitlines() if line.startswith("loss")] for out in outputs)
    assert len(one) == len(two) == 1 and one == two, outputs
    assert "rank 1 of 2" in outputs[1]
