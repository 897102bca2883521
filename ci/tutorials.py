"""Run a documentation page's code blocks as a reader would, so a tutorial cannot rot.

    python -m ci.tutorials docs/tutorials/test-your-loader.md [...]    # exit 1 on the first block that fails

A page is run top to bottom in a fresh directory (the reader's project), with that directory on
``PYTHONPATH`` and its own cache (``XDG_CACHE_HOME``), so nothing lands in the checkout or the real cache:

* a ```` ```python title="NAME.py" ```` block is written to ``NAME.py`` (later blocks with the same title
  replace it: a page may show a file, then its edited version);
* every line of a ```` ```bash ```` block is run with bash; it must exit 0, or the code a trailing
  ``# exits N`` comment states;
* a ```` ```text ```` block right after a bash block is what that block printed, in excerpt: each line
  (whitespace collapsed) must occur in the output, except ``...`` lines. Show only lines that cannot
  change from run to run (no timings; no failure that depends on worker timing).

Blocks of any other kind (```` ```python ```` without a title, ```` ```console ````) are prose. ``run_page``
is what ``tests/test_tutorials.py`` calls; its result says which block failed and why.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```\s*$", re.M | re.S)
TITLE = re.compile(r'title="([^"]+)"')
EXITS = re.compile(r"#\s*exits?\s+(\d+)\b")
COMMAND_TIMEOUT_S = 600


@dataclass(frozen=True)
class Block:
    lang: str
    title: str | None
    body: str
    line: int


@dataclass(frozen=True)
class Outcome:
    ok: bool
    message: str
    commands: int


def blocks(markdown: str) -> list[Block]:
    out = []
    for m in FENCE.finditer(markdown):
        title = TITLE.search(m.group(2))
        out.append(Block(m.group(1), title.group(1) if title else None, m.group(3),
                         markdown.count("\n", 0, m.start()) + 1))
    return out


def collapse(text: str) -> str:
    return " ".join(text.split())


def _env(workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DYNBSZ_HYPOTHESIS_DB"}
    env.update(PYTHONPATH=str(workdir), XDG_CACHE_HOME=str(workdir / ".cache"), COLUMNS="200")
    return env


def run_page(page: Path, workdir: Path | None = None) -> Outcome:
    """Run ``page``'s blocks in ``workdir`` (a fresh temporary directory when None)."""
    with tempfile.TemporaryDirectory(prefix="tutorial-") as scratch:
        work = Path(workdir or scratch)
        work.mkdir(parents=True, exist_ok=True)
        env = _env(work)
        last_output: str | None = None
        commands = 0
        where = page.name
        for block in blocks(page.read_text()):
            here = f"{where}:{block.line}"
            if block.lang == "python" and block.title:
                target = work / block.title
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.body)
                last_output = None
            elif block.lang == "bash":
                outputs = []
                for command in (c.strip() for c in block.body.splitlines()):
                    if not command or command.startswith("#"):
                        continue
                    expected = EXITS.search(command)
                    want = int(expected.group(1)) if expected else 0
                    try:
                        done = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True,
                                              text=True, timeout=COMMAND_TIMEOUT_S)
                    except subprocess.TimeoutExpired:
                        return Outcome(False, f"{here}: `{command}` ran past {COMMAND_TIMEOUT_S} s", commands)
                    commands += 1
                    output = done.stdout + done.stderr
                    if done.returncode != want:
                        return Outcome(False, f"{here}: `{command}` exited {done.returncode}, the page says {want}; "
                                              f"its output ends:\n{output[-3000:]}", commands)
                    outputs.append(output)
                last_output = "\n".join(outputs)
            elif block.lang == "text" and last_output is not None:
                seen = collapse(last_output)
                for line in block.body.splitlines():
                    if line.strip() and line.strip() != "..." and collapse(line) not in seen:
                        return Outcome(False, f"{here}: the output does not contain {line.strip()!r}; it was:\n"
                                              f"{last_output[-3000:]}", commands)
                last_output = None
        return Outcome(True, f"{where}: {commands} commands ran as the page says", commands)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ci.tutorials", description=__doc__.splitlines()[0])
    ap.add_argument("pages", nargs="+", type=Path, help="markdown pages to run")
    ap.add_argument("--keep", type=Path, metavar="DIR", help="run in DIR and keep what the page wrote")
    args = ap.parse_args(argv)
    failed = 0
    for page in args.pages:
        if not page.is_file():
            ap.error(f"{page}: no such page")
        outcome = run_page(page, args.keep)
        print(("ok   " if outcome.ok else "FAIL ") + outcome.message)
        failed += not outcome.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
