#!/usr/bin/env bash
# The GPU end-to-end job (docs/gpu-job.md): dynbsz's loader, both runtimes, feeding a small packed
# causal LM; figures, the simulator's prediction, and resume checked in a fresh process.
#
#   bash ci/gpu_job.sh                          # CUDA: large config on the GPU, appends docs/gpu-results.md
#                                               # no CUDA: small config on the CPU (what CI runs)
#   bash ci/gpu_job.sh --device cpu --out report.json
#   PYTHON=/path/to/python bash ci/gpu_job.sh --config small --steps 60
#
# Arguments go to ci/gpu_job.py, run as `python -m ci.gpu_job` from the repository root (--help). Exit status: 0 resume exact, 1 mismatch, 2 bad arguments.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# cuBLAS reads this when it creates its handle: deterministic GEMMs need a fixed workspace.
export CUBLAS_WORKSPACE_CONFIG="${CUBLAS_WORKSPACE_CONFIG:-:4096:8}"
# recorded in the report and in docs/gpu-results.md as the command that produced the figures
DYNBSZ_GPU_JOB_COMMAND="bash ci/gpu_job.sh"
for arg in "$@"; do DYNBSZ_GPU_JOB_COMMAND+=" $(printf '%q' "$arg")"; done
export DYNBSZ_GPU_JOB_COMMAND
cd "$here"
exec "${PYTHON:-python}" -m ci.gpu_job "$@"
