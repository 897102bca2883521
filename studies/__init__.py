"""The studied libraries: one folder each, of one shape, so adding a library is copying a folder.

``studies/<library>/``:

* ``__init__.py``: the study, as the suite finds it (``properties.targets.studies``): ``TARGETS`` (the built-in
  target names it adds, e.g. ``litdata``) and ``PATCH_SETS`` (its proposed fixes as diffs, each run by a
  ``studies.<library>:fixed`` target); registered under the entry-point group ``dynbsz_harness.studies`` in
  ``pyproject.toml``.
* ``adapter.py``: the library's components (``Target``), with the trainers each declares; ``fixes.py``: its patch
  set and ``fixed``, the library with every diff applied, in a process that imports the patched copy.
* ``patches/``: ``<ID>.diff``, unified diffs against the released files (``patch -p1``).
* ``repros/``: ``<ID>.py``, standalone reproducers (the library, torch and the standard library only; exit 1
  while the bug is present, 0 when fixed).
* ``pins/``: each finding's minimal example, a corpus file (``pins/trainers/``: examples judged under a trainer).
* ``data/``: campaign records, library-test results and other measurements the report quotes.
* ``report.md`` (and ``intent.md``, the fixes against the maintainers' stated intent): the findings,
  published in the documentation site (``docs/studies`` links here).

Imports go one way: a study imports the suite (``properties``) and ``dynbsz``; nothing in ``properties``
imports a study.
"""
