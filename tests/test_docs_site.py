"""The documentation site's checks (ci/docs_site.py) and the README's promises: each check fails on a page
with something left out, the README fits in 10 KB, its test command is what CI runs, and its three examples
are targets the suite accepts and runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ci import docs_site

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()

# Written from the repository's layout, not from docs_site's walk: every CLI a user can run.
KNOWN_CLIS = {"dynbsz", "simulator", "properties", "studies.veomni", "ci.gpu_job", "ci.flips",
              "ci.rejudge", "ci.bench_simulator", "ci.bench_advise", "ci.bench_epoch_start", "ci.tutorials",
              "ci.library_tests", "ci.bench_fuzz", "ci.bench_floor"}


def test_readme_fits_in_10_kb():
    assert len(README.encode()) <= 10 * 1024, f"README.md is {len(README.encode())} bytes"


def test_readme_test_command_is_what_ci_runs():
    block = re.search(r"^# tests:.*\n(.+)$", README, re.M)
    ci_run = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("python3 -m venv")]
    assert block and ci_run == [block.group(1).strip()]


def test_readme_links_resolve_in_the_checkout_and_the_site():
    links = re.findall(r"\]\(([^)#]+)\)", README)
    assert links
    for link in links:
        assert (ROOT / link).is_file(), link
    home = docs_site.readme_markdown()
    for link in re.findall(r"\]\(([^)#]+)\)", home):
        assert (ROOT / "docs" / link).is_file(), link


def test_every_cli_is_found():
    assert set(docs_site.cli_modules()) == KNOWN_CLIS


def test_cli_help_covers_subcommands_and_their_flags():
    pages = dict(docs_site.cli_help("properties"))
    assert "python -m properties check" in pages and "python -m properties replay" in pages
    assert {"--target", "--step-timeout", "--no-shrink"} <= docs_site.flags(pages["python -m properties check"])


def test_subcommands_are_read_from_argparse_help():
    text = "usage: x [-h] {a,b-c} ...\n\npositional arguments:\n  {a,b-c}\n    a   first\n"
    assert docs_site.subcommands(text) == ["a", "b-c"]
    assert docs_site.subcommands("usage: x [-h]\n\noptions:\n  -h, --help\n") == []


def test_a_flag_missing_from_the_page_is_reported():
    helps = ["  --target NAME   the target\n  --step-timeout S  seconds\n"]
    assert docs_site.missing_flags(helps, "<pre>--target NAME --step-timeout S</pre>") == []
    assert docs_site.missing_flags(helps, "<pre>--target NAME</pre>") == ["--step-timeout"]


def test_public_names_follow_all_and_objects():
    import dynbsz

    assert docs_site.public_names("dynbsz") == [f"dynbsz.{n}" for n in dynbsz.__all__]
    assert docs_site.public_names("properties.packer_props.ProgressBound") == ["properties.packer_props.ProgressBound"]
    assert "properties.targets.loader_target" in docs_site.public_names("properties.targets")


def test_a_public_name_without_an_entry_is_reported():
    html = '<h2 id="dynbsz.GreedyPacker">GreedyPacker</h2> <a href="#dynbsz.FixedGate">FixedGate</a>'
    assert docs_site.missing_names(["dynbsz.GreedyPacker", "dynbsz.FixedGate"], html) == ["dynbsz.FixedGate"]


def test_api_pages_document_the_public_modules():
    modules = [m for page in docs_site.API_PAGES
               for m in docs_site.documented_modules((ROOT / "docs" / page).read_text())]
    assert {"dynbsz", "dynbsz.loader", "dynbsz.loader_config", "properties.targets", "properties.scenarios"} <= set(modules)


@pytest.mark.parametrize("example, prop", [("mygate:make_gate", "minimum_gate"), ("mypacker:make_packer", "conservation"),
                                           ("myloader:target", "epoch_reshuffle")])
def test_readme_examples_run_under_the_suite(tmp_path, example, prop):
    for m in re.finditer(r'```python title="([\w.]+)"\n(.*?)```', README, re.S):
        (tmp_path / m.group(1)).write_text(m.group(2))
    env = {"PYTHONPATH": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "properties", "check", "--target", example, "--property", prop,
                           "--max-examples", "3", "--database", "none"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(rf"^{prop}\s+\S+\s+pass\s", done.stdout, re.M), done.stdout
