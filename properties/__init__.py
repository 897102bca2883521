"""properties: a reusable Hypothesis suite for packers, gates and loaders.

Point it at any implementation through a target (``properties.targets``: ``dynbsz``,
``veomni``, ``torchdata``, ``mutant:NAME`` or your own ``MODULE:FACTORY``); every property that applies
to the target's components runs (``properties.registry``), every failure is saved as a
small JSON file and replays exactly (``properties.corpus``).

    python -m properties check --target NAME|MODULE:FACTORY [--profile ci|dev|fuzz] [--json]
    python -m properties fuzz --target ... --minutes M [--corpus DIR]
    python -m properties replay FILE
    python -m properties mutants [--json]

From pytest: ``from properties.pytest_plugin import test_dynbsz_properties`` and
``--dynbsz-target`` (see ``properties.pytest_plugin``).

Modules, one concern each: strategies (Hypothesis strategies), packer_props (drive a packer,
check a recorded run), packer_suite (the packer/gate properties as registry entries), probes
(a stateful gate for testing packers), loader_props (drive a loader through epochs and
checkpoint schedules, check the transcript), skew_props (in_order skew against the simulator),
loader_suite (the loader properties as registry entries), loader_targets (loader factories:
dynbsz, a plain torchdata loader), mutants and loader_mutants (broken variants), targets/
(what to test; targets/veomni_loaders.py drives VeOmni's loader classes), registry, runner
(one property on one component), corpus (regression files), mutation, fuzz, report, cli,
profiles, pytest_plugin.
"""
