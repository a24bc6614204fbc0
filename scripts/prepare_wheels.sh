#!/usr/bin/env bash
# Builds wheels of the pure-Python packages an offline CUDA image may lack (Hydra and its parts, the submitit
# launcher, bm25s for the agent's skill retrieval: the image lacks it) into ./.whl
# (git-ignored). Carry .whl to the GPU machine and install there with:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PYTHONPATH
# Extra pip requirement strings may be appended as arguments.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
mkdir -p .whl
python3 -m pip wheel -q --no-deps -w .whl hydra-core==1.3.8 omegaconf==2.3.1 antlr4-python3-runtime==4.9.3 \
    hydra-submitit-launcher==1.2.0 submitit==1.5.4 cloudpickle==3.1.3 bm25s==0.3.16 "$@"
ls -l .whl
