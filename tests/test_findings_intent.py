"""Every finding's proposed fix is checked against its maintainers' stated intent (studies/*/intent.md),
and every report says where its fixes depart from it.

The finding ids are read from the reports themselves (their ``### V1.`` sections and the ``**V16 (new...``
paragraphs), not from a list kept here, so a finding added to a report without an intent row fails; and the
set of ``departs`` rows must be the set of ``* **X departs**`` bullets in the reports' section on intent, so
neither can be revised without the other.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "studies"
VERDICTS = {"consistent", "departs", "no stated intent found"}
HEADER = "| finding | proposed fix | maintainers' stated intent (source) | verdict | what the report should change |"

#: intent page -> the reports whose findings it judges, and the id prefixes those reports use for findings
PAGES = {
    "veomni/intent.md": (("veomni/report.md", "veomni/report-builders.md"), "VB"),
    "litdata/intent.md": (("litdata/report.md",), "L"),
    "hf_datasets/intent.md": (("hf_datasets/report.md",), "H"),
    "torchtitan/intent.md": (("torchtitan/report.md",), "T"),
}


def report_findings(text: str, prefixes: str) -> set[str]:
    found = set(re.findall(r"^### ([A-Z]\d+)\b", text, re.M)) | set(re.findall(r"^\*\*([A-Z]\d+)[ .]", text, re.M))
    return {f for f in found if f[0] in prefixes}


def intent_rows(text: str) -> dict[str, list[str]]:
    lines = text.splitlines()
    assert lines.count(HEADER) == 1, "one table with the agreed header"
    start = lines.index(HEADER) + 2
    rows = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells
    return rows


def departures_said(text: str) -> set[str]:
    return set(re.findall(r"^\* \*\*([A-Z]\d+) departs\*\*", text, re.M))


def test_the_parsers_read_what_they_should():
    report = "### V1. a\n\n**V16 (new, x):** y\n**B1. z**\n### D1. not a finding of this prefix\n"
    assert report_findings(report, "VB") == {"V1", "V16", "B1"}
    table = f"x\n{HEADER}\n|---|---|---|---|---|\n| V1 | f | s | departs | c |\n\nafter"
    assert intent_rows(table) == {"V1": ["V1", "f", "s", "departs", "c"]}
    assert departures_said("* **V5 departs**: why\n* **V6** departs\n") == {"V5"}


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_finding_has_one_intent_row_with_a_verdict(page):
    reports, prefixes = PAGES[page]
    findings = set().union(*(report_findings((DOCS / r).read_text(), prefixes) for r in reports))
    rows = intent_rows((DOCS / page).read_text())
    assert findings and set(rows) == findings, (sorted(findings - set(rows)), sorted(set(rows) - findings))
    for finding, cells in rows.items():
        assert len(cells) == 5 and all(cells), f"{page} {finding}: an empty cell"
        assert cells[3] in VERDICTS, f"{page} {finding}: verdict {cells[3]!r}; allowed values: {sorted(VERDICTS)}"
        assert re.search(r"\d|https?://", cells[2]), f"{page} {finding}: the intent cell cites no line, commit or URL"


@pytest.mark.parametrize("page", sorted(PAGES))
def test_each_report_says_where_its_fixes_depart_and_links_the_evidence(page):
    reports, _ = PAGES[page]
    departs = {f for f, cells in intent_rows((DOCS / page).read_text()).items() if cells[3] == "departs"}
    said = set()
    for r in reports:
        text = (DOCS / r).read_text()
        link = Path(page).relative_to(Path(r).parent) if Path(r).parent == Path(page).parent else Path("..") / page
        assert f"({link.as_posix()})" in text, f"{r} does not link {page}"
        said |= departures_said(text)
    assert said == departs, f"the reports say {sorted(said)} depart; {page} says {sorted(departs)}"


GLANCE = "| ID | class | what a training run sees | trainers | severity | reproduce | fix | upstream |"
CLASSES = {"bug", "contract gap", "latent", "deviation"}
#: report -> the reports whose findings its "At a glance" table lists (VeOmni's lists its builders' B1, B2 too)
GLANCE_REPORTS = {
    "veomni/report.md": (("veomni/report.md", "veomni/report-builders.md"), "VB"),
    "litdata/report.md": (("litdata/report.md",), "L"),
    "hf_datasets/report.md": (("hf_datasets/report.md",), "H"),
    "torchtitan/report.md": (("torchtitan/report.md",), "T"),
}


def glance_rows(text: str) -> dict[str, list[str]]:
    section = text.split("## At a glance\n", 1)[1].split("\n## ", 1)[0]
    lines = section.splitlines()
    assert lines.count(GLANCE) == 1, "one table with the agreed header"
    rows = {}
    for line in lines[lines.index(GLANCE) + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells
    return rows


@pytest.mark.parametrize("report", sorted(GLANCE_REPORTS))
def test_each_report_opens_with_one_table_of_every_finding(report):
    sources, prefixes = GLANCE_REPORTS[report]
    text = (DOCS / report).read_text()
    first_section = re.search(r"^## (.+)$", text, re.M).group(1)
    assert first_section == "At a glance", f"{report}: the first section is {first_section!r}"
    findings = set().union(*(report_findings((DOCS / r).read_text(), prefixes) for r in sources))
    rows = glance_rows(text)
    assert set(rows) == findings, (sorted(findings - set(rows)), sorted(set(rows) - findings))
    for finding, cells in rows.items():
        assert len(cells) == 8 and all(cells), f"{report} {finding}: {cells}"
        assert cells[1] in CLASSES, f"{report} {finding}: class {cells[1]!r}; allowed values: {sorted(CLASSES)}"
        assert cells[4] in {"high", "medium", "low"}, f"{report} {finding}: severity {cells[4]!r}"
        assert cells[7] == "none found" or "https://github.com/" in cells[7], f"{report} {finding}: {cells[7]!r}"


#: the "At a glance" table fits on one screen (issue 25, part 4): rows at most this wide, rendered, and this many
GLANCE_WIDTH, GLANCE_MAX_ROWS = 160, 30


def rendered(markdown: str) -> str:
    """What a reader sees of inline markdown: a link ``[text](url)`` as its text, code without its backticks."""
    return re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown).replace("`", "")


def glance_width(cells: list[str]) -> int:
    """A glance row's width as rendered: its cells' rendered text, laid out as the row ``| a | b |``."""
    return len(rendered("| " + " | ".join(cells) + " |"))


def test_a_glance_row_is_measured_as_rendered():
    assert rendered("[L4.py](repros/l/L4.py), [pin](../tests/x.json): `len()`") == "L4.py, pin: len()"
    assert rendered("see https://github.com/o/r/issues/7") == "see https://github.com/o/r/issues/7"
    cells = ["X1", "bug", "a short `len()`", "-", "low", "[X1.py](repros/x/X1.py)", "fix: [X1.diff](patches/x/X1.diff)",
             "[#7](https://github.com/o/r/issues/7)"]
    assert glance_width(cells) == len("| X1 | bug | a short len() | - | low | X1.py | fix: X1.diff | #7 |")


@pytest.mark.parametrize("report", sorted(GLANCE_REPORTS))
def test_each_glance_table_fits_on_one_screen(report):
    rows = glance_rows((DOCS / report).read_text())
    assert len(rows) <= GLANCE_MAX_ROWS, f"{report}: {len(rows)} rows, more than the {GLANCE_MAX_ROWS} of one screen"
    too_wide = {finding: glance_width(cells) for finding, cells in rows.items() if glance_width(cells) > GLANCE_WIDTH}
    assert not too_wide, f"{report}: rows wider than {GLANCE_WIDTH} rendered characters: " + ", ".join(
        f"{finding} ({width})" for finding, width in too_wide.items())


@pytest.mark.parametrize("report", sorted(GLANCE_REPORTS))
def test_each_glance_link_stays_on_the_documentation_site(report):
    # mkdocs --strict (the docs job) refuses a link to a file outside docs/; a pin outside it is linked through its
    # finding's section, which names the file
    for finding, cells in glance_rows((DOCS / report).read_text()).items():
        for target in re.findall(r"\]\(([^)]+)\)", "|".join(cells)):
            if target.startswith(("http://", "https://", "#")):
                continue
            assert not target.startswith("../") and ((DOCS / report).parent / target).exists(), f"{report} {finding}: {target}"


def finding_sections(text: str) -> dict[str, int]:
    """Each ``### <ID>. ...`` section's length in lines, up to the next ``###`` or ``##`` heading."""
    sizes, current = {}, None
    for line in text.splitlines():
        if line.startswith("## ") or line.startswith("### "):
            m = re.match(r"^### ([A-Z]\d+)\. ", line)
            current = m.group(1) if m else None
            if current:
                sizes[current] = 0
        elif current:
            sizes[current] += 1
    return sizes


def test_finding_sections_are_measured_as_the_heading_says():
    text = "## A\n### V1. x\na\nb\n### V1 (history)\nc\n## B\n### V2. y\nd\n"
    assert finding_sections(text) == {"V1": 2, "V2": 1}


@pytest.mark.parametrize("report", ["veomni/report.md", "litdata/report.md",
                                    "hf_datasets/report.md", "torchtitan/report.md"])
def test_every_finding_section_reads_in_at_most_30_lines(report):
    # histories, superseded fixes and secondary examples go to the report's appendix (issue 25, part 4)
    sizes = finding_sections((DOCS / report).read_text())
    assert sizes and {k: n for k, n in sizes.items() if n > 30} == {}
