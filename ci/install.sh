#!/usr/bin/env bash
# Install this project into the active Python environment, CPU torch pinned.
#
#   bash ci/install.sh            # the library and its CLIs
#   bash ci/install.sh --test     # + pytest, pytest-xdist
#   bash ci/install.sh --plot     # + matplotlib: the main job's plot (python -m simulator cold-start)
#   bash ci/install.sh --docs     # + MkDocs, Material and mkdocstrings: mkdocs build --strict (the documentation site)
#   bash ci/install.sh --veomni   # + VeOmni 0.1.12 (installed --no-deps) and the packages its data code imports
#   bash ci/install.sh --litdata  # + litdata 0.2.76 (installed --no-deps: its metadata requires torchvision)
#   bash ci/install.sh --hf       # + Hugging Face datasets (pinned in ci/constraints.txt)
#   bash ci/install.sh --lightning  # + PyTorch Lightning 2.6.5 with its declared dependencies (the real trainer
#                                   #   the lightning trainer models are checked against: tests/test_trainers_lightning.py)
#   bash ci/install.sh --torchtitan   # + torchtitan 0.3.0 in its own overlay directory (<venv>/overlays/torchtitan, or
#                                     #   $DYNBSZ_TORCHTITAN_OVERLAY): it needs datasets<4.8.0, this venv keeps 5.2.0, so
#                                     #   torchtitan, datasets 4.7.0 and what they import at versions the venv lacks go
#                                     #   there, --no-deps, exact pins, never torch; python -m properties puts the
#                                     #   overlay first on PYTHONPATH only where it runs the torchtitan target
#   bash ci/install.sh --veomni --veomni-datasets  # + the datasets VeOmni 0.1.12 declares (>=2.20,<=2.21): datasets
#                                     #   2.21.0 and what VeOmni's data and argument modules need at versions the venv
#                                     #   lacks, in <venv>/overlays/veomni (or $DYNBSZ_VEOMNI_OVERLAY), --no-deps, exact
#                                     #   pins, never torch; python -m properties puts it first on PYTHONPATH only where
#                                     #   it runs the veomni-builders target (--veomni alone is unchanged)
#
# ci/constraints.txt pins torch==2.13.0, the CPU build on the build machines' disk; without it
# pip would resolve torch to a multi-GB CUDA build. VeOmni is installed without its own
# dependencies because they pull torchvision, which fails to import beside the CPU torch.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
extras=()
veomni=0
litdata=0
torchtitan=0
veomni_datasets=0
for arg in "$@"; do
  case "$arg" in
    --test) extras+=(test) ;;
    --docs) extras+=(docs) ;;
    --plot) extras+=(plot) ;;
    --veomni) extras+=(veomni); veomni=1 ;;
    --litdata) extras+=(litdata); litdata=1 ;;
    --hf) extras+=(hf) ;;
    --lightning) extras+=(lightning) ;;
    --torchtitan) extras+=(torchtitan); torchtitan=1 ;;
    --veomni-datasets) veomni_datasets=1 ;;
    *) echo "ci/install.sh: unknown option $arg (allowed: --test, --plot, --docs, --veomni, --litdata, --hf, --lightning, --torchtitan, --veomni-datasets)" >&2; exit 2 ;;
  esac
done
spec="$here"
if [ ${#extras[@]} -gt 0 ]; then spec="$here[$(IFS=,; echo "${extras[*]}")]"; fi
python -m pip install -q --disable-pip-version-check -c "$here/ci/constraints.txt" -e "$spec"
if [ "$veomni" = 1 ]; then
  python -m pip install -q --disable-pip-version-check --no-deps veomni==0.1.12
fi
if [ "$litdata" = 1 ]; then
  python -m pip install -q --disable-pip-version-check --no-deps litdata==0.2.76
fi
if [ "$torchtitan" = 1 ]; then
  # the packages torchtitan 0.3.0's text dataloader imports that the venv lacks or holds at versions outside their
  # ranges (datasets 4.7.0 wants dill<0.4.1, multiprocess<0.70.19, fsspec<=2026.2.0); everything else (torch,
  # torchdata, tokenizers, pyarrow, huggingface-hub, ...) comes from the venv, through the torchtitan extra
  overlay="${DYNBSZ_TORCHTITAN_OVERLAY:-$(python -c 'import os, sys; print(os.path.join(sys.prefix, "overlays", "torchtitan"))')}"
  python -m pip install -q --disable-pip-version-check --no-deps --upgrade --target "$overlay" \
    torchtitan==0.3.0 datasets==4.7.0 spmd_types==0.2.3 tyro==1.0.17 docstring-parser==0.18.0 typeguard==4.6.1 \
    dill==0.4.0 multiprocess==0.70.18 fsspec==2026.2.0
  for pkg in torch torchvision torchdata; do
    if [ -e "$overlay/$pkg" ]; then
      echo "ci/install.sh: $pkg was installed into $overlay; it must come from the venv. rm -r $overlay/$pkg" >&2
      exit 1
    fi
  done
fi
if [ "$veomni_datasets" = 1 ]; then
  # datasets 2.21.0 wants fsspec<=2024.6.1, dill<0.3.9, multiprocess (0.70.16 goes with dill 0.3.8); VeOmni's
  # argument module imports psutil (declared, not in the venv) and VeOmni declares packaging<26 (the venv has 26.x).
  # Everything else (torch, torchdata, pyarrow, huggingface-hub, transformers, ...) comes from the venv.
  overlay="${DYNBSZ_VEOMNI_OVERLAY:-$(python -c 'import os, sys; print(os.path.join(sys.prefix, "overlays", "veomni"))')}"
  python -m pip install -q --disable-pip-version-check --no-deps --upgrade --target "$overlay" \
    datasets==2.21.0 fsspec==2024.6.1 dill==0.3.8 multiprocess==0.70.16 psutil==7.2.2 packaging==25.0
  for pkg in torch torchvision torchdata; do
    if [ -e "$overlay/$pkg" ]; then
      echo "ci/install.sh: $pkg was installed into $overlay; it must come from the venv. rm -r $overlay/$pkg" >&2
      exit 1
    fi
  done
fi
if python -c "import torchvision" >/dev/null 2>&1; then
  echo "ci/install.sh: torchvision is installed; it breaks beside the CPU torch. pip uninstall torchvision" >&2
  exit 1
fi
