"""properties: a reusable Hypothesis suite for packers, gates and loaders.

Point it at any implementation through a target (``properties.targets``: ``dynbsz``,
``veomni``, ``torchdata``, ``mutant:NAME`` or your own ``MODULE:FACTORY``); every property that applies
to the target's components runs (``properties.suite``), every failure is saved as a
small JSON file (in a scratch directory of the user's cache, or a corpus named with ``--corpus``)
and replays exactly (``properties.corpus``).

    python -m properties check --target NAME|MODULE:FACTORY [--profile ci|dev|fuzz] [--json]
    python -m properties fuzz --target ... --minutes M [--corpus DIR]
    python -m properties replay FILE
    python -m properties mutants [--json]

From pytest: ``from properties.pytest_plugin import test_dynbsz_properties`` and
``--dynbsz-target`` (see ``properties.pytest_plugin``).

Modules, one concern each, each importing only modules listed before it:

* errors (PropertyViolation, Unsupported), coverage (the states examples reach: ``reached`` and
  the per-property tally), registry (component kinds; the ``@prop`` and ``@mutant`` decorators that
  declare a property or a mutant where it is defined, and collect them), scenarios (Sample,
  PackerExample, LoaderScenario, LoaderProgram, SkewScenario and their JSON form), probes (a
  stateful gate for testing packers), profiles (Hypothesis settings, the cache directory);
* strategies (Hypothesis strategies), packer_props (drive a packer, check a recorded run; the
  suite's own oracles), loader_props (drive a loader through epochs, checkpoint schedules, DP
  ranks and bounded runs, check the transcript), loader_machine (the loader state machine: a
  ``RuleBasedStateMachine`` whose runs are ``LoaderProgram``s), skew_props (in_order skew against
  the simulator), loader_targets (loader factories: dynbsz, a plain torchdata loader);
* mutants/ (broken variants: gates, packers, loaders), targets/ (what to test: dynbsz, a plain torchdata
  loader, a user's MODULE:FACTORY, and the studied libraries' targets, found through entry points in
  targets/studies.py; patched.py runs a study's diffs);
* packer_suite and loader_suite (the properties), suite (all of them, in report order);
* runner (one property on one component), corpus (regression files), mutation, fuzz, report,
  cli, pytest_plugin. Each studied library (VeOmni, litdata, HF datasets, torchtitan) is a folder of
  its own under studies/, outside this package.
"""
