"""Many standalone scripts run in one fresh interpreter, each as ``python SCRIPT`` would run it (``runpy`` as
``__main__``, its exit code and its output captured), so that a library whose import takes seconds (VeOmni's: 3.5 s,
transformers) is imported once for all of them. For tests that check what many generated scripts print
(tests/test_repro_generated.py); tests/test_repros.py runs each committed script in a process of its own, as a
maintainer does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: the interpreter's part: each script's exit code as the interpreter would give it (SystemExit's code; 1 for an
#: uncaught exception, with its traceback in the captured stderr), its stdout and stderr
_RUNNER = """
import contextlib, io, json, runpy, sys, time, traceback
results = []
for path in sys.argv[2:]:
    out, err, code, start = io.StringIO(), io.StringIO(), 0, time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
    results.append({"returncode": code, "stdout": out.getvalue(), "stderr": err.getvalue(),
                    "seconds": round(time.monotonic() - start, 2)})
with open(sys.argv[1], "w") as f:
    json.dump(results, f)
"""


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def run_scripts(scripts: list[Path], cwd: Path, pythonpath: str | None = None, timeout: int = 600) -> list[Ran]:
    """Each script's outcome, in order; run from ``cwd`` with only ``pythonpath`` (not this project) importable."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    report = cwd / "script-batch.json"
    done = subprocess.run([sys.executable, "-c", _RUNNER, str(report), *map(str, scripts)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0 and report.exists(), done.stdout[-2000:] + done.stderr[-3000:]
    return [Ran(**r) for r in json.loads(report.read_text())]
