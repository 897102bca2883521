"""CI jobs, run from the repository root as modules: ``python -m ci.gpu_job``, ``python -m ci.bench_simulator``.

Jobs only: the models they exercise live in ``dynbsz`` and ``simulator``, which never import ``ci``.
"""
