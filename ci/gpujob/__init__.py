"""The GPU end-to-end job (issue 7): dynbsz's loader feeding a small packed causal LM.

Modules, smallest first:

    config.py    JobConfig (frozen): workload, loader, model and run lengths; SMALL (CPU/CI) and LARGE (GPU)
    device.py    device selection, determinism switches, timing that waits for the device
    collate.py   PackedCollate: a micro-batch -> one packed row (ids, per-sample positions, labels)
    model.py     TinyCausalLM: attention confined to each packed sample (varlen, one SDPA call per sample)
    plan.py      what the loader must deliver, computed with dynbsz's real packer (no copy of its logic),
                 and the simulator's prediction of it (``simulator.predict``) for the same trace and config
    train.py     the measured training loop, checkpoints, and the resumed continuation
    report.py    the JSON report, the resume comparison, docs/gpu-results.md

``ci/gpu_job.py`` is the command line (``python -m ci.gpu_job`` from the repository root);
``ci/gpu_job.sh`` the CI wrapper.
"""
