"""The tutorial runner (ci/tutorials.py) fails a page that lies, and every tutorial is a page it can run.

The pages themselves run in CI as a step of their own (``python -m ci.tutorials docs/tutorials/*.md`` in
``.ci/run``, about two minutes); ``DYNBSZ_RUN_TUTORIALS=1`` runs them here too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ci import tutorials

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs" / "tutorials").glob("*.md"))


def test_ci_runs_every_tutorial():
    assert PAGES and "python -m ci.tutorials docs/tutorials/*.md" in (ROOT / ".ci" / "run").read_text()
    for page in PAGES:
        blocks = tutorials.blocks(page.read_text())
        assert any(b.lang == "bash" for b in blocks), f"{page.name} has no command to run"
        assert any(b.lang == "text" for b in blocks), f"{page.name} never says what a command prints"


@pytest.mark.skipif(not os.environ.get("DYNBSZ_RUN_TUTORIALS"), reason="the tutorials run as a CI step of their "
                    "own (.ci/run); DYNBSZ_RUN_TUTORIALS=1 runs them here")
@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_tutorial_runs_as_written(page, tmp_path):
    outcome = tutorials.run_page(page, tmp_path)
    assert outcome.ok, outcome.message
    assert outcome.commands > 0, f"{page.name} has no command to run"


def _page(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(text)
    return page


def test_titled_python_blocks_become_files_the_commands_import(tmp_path):
    page = _page(tmp_path, '```python title="mod.py"\nX = 41 + 1\n```\n\n```bash\npython -c "import mod; print(mod.X)"\n'
                           '```\n\n```text\n42\n```\n')
    assert tutorials.run_page(page, tmp_path / "work").ok


def test_wrong_output_fails_the_page(tmp_path):
    page = _page(tmp_path, '```bash\necho hello\n```\n\n```text\ngoodbye\n```\n')
    outcome = tutorials.run_page(page, tmp_path / "work")
    assert not outcome.ok and "goodbye" in outcome.message


def test_exit_codes_are_checked_both_ways(tmp_path):
    assert not tutorials.run_page(_page(tmp_path, "```bash\nfalse\n```\n"), tmp_path / "a").ok
    assert tutorials.run_page(_page(tmp_path, "```bash\nfalse   # exits 1\n```\n"), tmp_path / "b").ok
    assert not tutorials.run_page(_page(tmp_path, "```bash\ntrue   # exits 1\n```\n"), tmp_path / "c").ok


def test_untitled_blocks_are_prose(tmp_path):
    page = _page(tmp_path, "```python\nraise SystemExit(3)\n```\n\n```console\n$ false\n```\n\n```bash\ntrue\n```\n")
    outcome = tutorials.run_page(page, tmp_path / "work")
    assert outcome.ok and outcome.commands == 1
