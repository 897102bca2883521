"""An adapter's scratch folder (properties.targets.scratch) outlives the DataLoader workers that inherit it and is
gone once the process that made it exits: runs leave nothing in the system's temporary folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = """
import multiprocessing as mp, os, sys
from properties.targets.scratch import scratch_root

def child(path):
    assert scratch_root("toy") == path   # a forked child inherits the folder
    sys.exit(0)                          # and exits: it must not remove its parent's folder

if __name__ == "__main__":
    path = scratch_root("toy")
    open(os.path.join(path, "data"), "w").write("x")
    p = mp.get_context("fork").Process(target=child, args=(path,))
    p.start(); p.join()
    assert p.exitcode == 0 and os.path.exists(os.path.join(path, "data")), "the child removed the parent's folder"
    print(path)
"""


def test_the_scratch_folder_survives_its_children_and_goes_with_its_process(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    path = Path(done.stdout.strip().splitlines()[-1])
    assert path.parent == tmp_path and path.name.startswith("toy-")
    assert not path.exists() and not list(tmp_path.iterdir())
