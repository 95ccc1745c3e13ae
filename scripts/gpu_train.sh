#!/usr/bin/env bash
# One prepared run for a GPU session: train a task's model from scratch within a wall-clock budget, ship the
# run's snapshots around its induction head's forming in 4 bits (lm), and pack the folder into $OUT in parts
# small enough for the device tool to bring back (at most 8 files of at most 16 MiB).
#
#   here:     python -m atlas prepare lm --tokenizer checkpoints/lm-english/tokenizer.model   (data/lm, 26 MB)
#             tar -C data -cJf data/lm.tar.xz lm                                           (7.4 MB)
#   device:   bash scripts/gpu_train.sh lm 7.5     (the device tool's run, carry ["data/lm.tar.xz"], timeout 590 s)
#   here:     bash scripts/gpu_unpack.sh FILES_AT runs/gpu-lm
#             python -m atlas evaluate runs/gpu-lm      (the card's figures; compare with checkpoints/lm-english)
#
# The GPU machine has torch, numpy, safetensors, sentencepiece, tqdm and sacrebleu, and no network: the
# training command imports nothing else (tests/test_training_budget.py checks it). Adam's moments
# (optimizer.safetensors, six times the float16 weights) stay on the device: a resumed run starts them afresh.
set -euo pipefail
cd "$(dirname "$0")/.."

TASK="${1:-lm}"
MINUTES="${2:-7.5}"
shift $(($# < 2 ? $# : 2))  # anything after goes to the training command (a smoke run here: --max-steps 2)
PYTHON="${PYTHON:-python3}"
# the command that trains, given the training command's arguments; TRAINER="$PYTHON scripts/gpu_attention.py
# --train --" times the attention kernels on the translator's batches first and trains under the fastest
read -r -a TRAINER <<< "${TRAINER:-$PYTHON -m atlas train}"
RUN="${RUN:-runs/gpu-$TASK}"
OUT="${OUT:-artifacts/gpu-$TASK}"
mkdir -p "$OUT"

# the prepared data may travel packed (data/TASK.tar.xz, a quarter of its size: the working tree that travels is
# capped at 64 MiB, checkpoints included): python -m atlas prepare TASK, then tar -C data -cJf data/TASK.tar.xz TASK
if [ ! -d "data/$TASK" ] && [ -f "data/$TASK.tar.xz" ]; then tar -C data -xJf "data/$TASK.tar.xz"; fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
"$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
if [ -z "${PACK_ONLY:-}" ]; then  # PACK_ONLY=1: RUN is trained already (scripts/gpu_sweep.sh), ship and pack it
  "${TRAINER[@]}" --task "$TASK" --device auto --threads 8 --minutes "$MINUTES" --out "$RUN" "$@" 2>&1 \
    | tr '\r' '\n' | grep -v '^[a-z]*: *[0-9]*%|' | tee "$OUT/train.log"
fi

# float16 snapshots of every validation are ~25 MB each: ship three in 4 bits, around the induction head's forming
# when one formed (lm), else spread over the run; none come back unshipped
# when one formed, else spread over the run; none come back unshipped. The translator ships none: its 4-bit steps
# would take about 8 MB each of the repository's room.
if [ "$TASK" != lm ]; then
  rm -rf "$RUN/snapshots"
elif ! "$PYTHON" -m training.snapshots "$RUN" --from "$RUN" --around-induction 3 2>&1 | tee -a "$OUT/train.log"; then
  "$PYTHON" -m training.snapshots "$RUN" --from "$RUN" --spread 3 2>&1 | tee -a "$OUT/train.log" || rm -rf "$RUN/snapshots"
fi

# model, config, card, tokenizer and shipped snapshots; not the float32 evals nor the optimizer state
tar -C "$RUN" -cf - --exclude=evals --exclude=optimizer.safetensors . | split -b 15m -d - "$OUT/run.tar.part-"
parts=$(ls "$OUT"/run.tar.part-* | wc -l)
[ "$parts" -le 7 ] || echo "WARNING: $parts parts; the device tool brings back 8 files (train.log is one)" >&2
ls -l "$OUT"
