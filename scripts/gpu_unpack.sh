#!/usr/bin/env bash
# The run that scripts/gpu_train.sh packed, put together again:  bash scripts/gpu_unpack.sh FILES_AT RUN_FOLDER
set -euo pipefail
FROM="${1:?the folder the device tool brought the parts to}"
RUN="${2:?the run folder to write, e.g. runs/gpu-lm}"
mkdir -p "$RUN"
cat "$FROM"/run.tar.part-* | tar -C "$RUN" -xf -
cp "$FROM/train.log" "$RUN/" 2>/dev/null || true
ls -l "$RUN"
