"""The documentation site's build hooks (``hooks:`` in mkdocs.yml).

* The site's home page is the README (the marker ``<!-- readme -->`` in docs/index.md), its links to
  ``docs/...`` made relative to the site: one text for both.
* The CLI reference is the CLIs' own ``--help``, generated at build time wherever a page holds the
  marker ``<!-- cli-reference -->``: every ``python -m`` entry point in dynbsz, simulator, properties, studies
  and ci, found by walking the packages, so a new CLI or flag is documented without anyone writing it.
* After the build, every public name of the modules the API reference documents must have its own
  entry (an anchor mkdocstrings wrote) in the built pages, and every CLI flag must appear on the CLI
  page; a missing one fails the build with the names (``mkdocs build --strict`` in ``.ci/run``).

The checks are plain functions of text (``public_names``, ``missing_names``, ``missing_flags``), so
``tests/test_docs_site.py`` runs them on pages with something left out.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI_MARK = "<!-- cli-reference -->"
README_MARK = "<!-- readme -->"
CLI_PAGE = "reference/cli.md"
API_PAGES = ("reference/dynbsz.md", "reference/properties.md")
PACKAGES = ("dynbsz", "simulator", "properties", "studies")
# argparse wraps help to $COLUMNS: a fixed width keeps the generated page the same on every machine.
HELP_COLUMNS = "100"


def cli_modules(root: Path = ROOT) -> list[str]:
    """Every ``python -m`` entry point: a package's ``__main__.py``, or a ci/ module with a main guard."""
    found = []
    for pkg in PACKAGES:
        for main in sorted((root / pkg).rglob("__main__.py")):
            found.append(".".join(main.parent.relative_to(root).parts))
    for path in sorted((root / "ci").glob("*.py")):
        if re.search(r"^if __name__ == .__main__.:", path.read_text(), re.M):
            found.append(f"ci.{path.stem}")
    return found


def _help(main, argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(argv)
    return out.getvalue()


def subcommands(help_text: str) -> list[str]:
    """The subcommands an argparse help lists (``{a,b,c}`` under positional arguments)."""
    m = re.search(r"^positional arguments:\n\s+\{([^}]+)\}", help_text, re.M)
    return m.group(1).split(",") if m else []


def cli_help(module: str) -> list[tuple[str, str]]:
    """(command, --help text) for a CLI and each of its subcommands, as a user sees them."""
    mod = importlib.import_module(module if module.startswith("ci.") else f"{module}.__main__")
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        top = _help(mod.main, ["--help"])
        pages = [(f"python -m {module}", top)]
        pages += [(f"python -m {module} {sub}", _help(mod.main, [sub, "--help"])) for sub in subcommands(top)]
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    return pages


def cli_markdown(modules: list[str]) -> str:
    parts = []
    for module in modules:
        for command, text in cli_help(module):
            level = "##" if command == f"python -m {module}" else "###"
            parts.append(f"{level} `{command}`\n\n```text\n{text.rstrip()}\n```\n")
    return "\n".join(parts)


def flags(help_text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", help_text))


def public_names(path: str) -> list[str]:
    """The entries a ``::: path`` line must render, as dotted paths: for a module, each name of its
    ``__all__`` (else each public class and function defined in it); for a class or function, itself."""
    try:
        mod = importlib.import_module(path)
    except ModuleNotFoundError:
        return [path]
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n, obj in vars(mod).items() if not n.startswith("_")
                 and (inspect.isclass(obj) or inspect.isfunction(obj)) and getattr(obj, "__module__", None) == path]
    return [f"{path}.{n}" for n in names]


def documented_modules(page_markdown: str) -> list[str]:
    """What an API page renders (its ``::: path`` lines)."""
    return re.findall(r"^::: ([\w.]+)\s*$", page_markdown, re.M)


def missing_names(entries: list[str], html: str) -> list[str]:
    """Entries without a section of their own (mkdocstrings' ``id="dotted.path"``) in ``html``."""
    return [e for e in entries if f'id="{e}"' not in html]


def missing_flags(help_texts: list[str], html: str) -> list[str]:
    return sorted({f for text in help_texts for f in flags(text) if f not in html})


# ---- MkDocs hooks ----------------------------------------------------------------------------

_generated: dict[str, list[str]] = {}


def readme_markdown(root: Path = ROOT) -> str:
    """The README as the site's home page: its ``docs/`` links point into the site."""
    return re.sub(r"\]\(docs/", "](", (root / "README.md").read_text())


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 (mkdocs hook signature)
    if README_MARK in markdown:
        return markdown.replace(README_MARK, readme_markdown())
    if CLI_MARK not in markdown:
        return markdown
    modules = cli_modules()
    _generated["help"] = [text for module in modules for _, text in cli_help(module)]
    return markdown.replace(CLI_MARK, cli_markdown(modules))


def on_post_build(config):
    from mkdocs.exceptions import PluginError  # the docs extra: the checks above import without it (the tests)

    site, docs = Path(config["site_dir"]), Path(config["docs_dir"])

    def html_of(page: str) -> str:
        return (site / Path(page).with_suffix("") / "index.html").read_text()

    problems = []
    for page in API_PAGES:
        html = html_of(page)
        for module in documented_modules((docs / page).read_text()):
            gone = missing_names(public_names(module), html)
            if gone:
                problems.append(f"{page}: no entry for {', '.join(gone)}")
    gone = missing_flags(_generated.get("help", []), html_of(CLI_PAGE))
    if gone:
        problems.append(f"{CLI_PAGE}: flags missing: {', '.join(gone)}")
    if "help" not in _generated:
        problems.append(f"{CLI_PAGE} has no {CLI_MARK} marker: the CLI reference was not generated")
    if problems:
        raise PluginError("the reference is incomplete: " + "; ".join(problems))
