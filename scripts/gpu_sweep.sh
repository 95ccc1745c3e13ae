#!/usr/bin/env bash
# Several runs of one task at once on one GPU, each with its own settings, and the best shipped and packed as
# scripts/gpu_train.sh does (a small model leaves most of an H100 idle). TASK=lm (the default) or translate:
#
#   smoke:    SWEEP_ARGS="--max-steps 1" bash scripts/gpu_sweep.sh 5 '' 'model.dropout=0.1'
#   device:   bash scripts/gpu_sweep.sh 6.5 'model.positional="sinusoidal"' 'repeat_random_share=0.35'
#             (the device tool's run, carry ["data/lm.tar.xz"]); each quoted argument is one run's --set list,
#             separated by spaces; '' is the task as it stands
#   here:     bash scripts/gpu_unpack.sh FILES_AT runs/gpu-lm
#   translator: TASK=translate bash scripts/gpu_sweep.sh 7 '' 'model.d_model=512 model.d_ff=2048 model.dropout=0.3'
#             (carry ["data/translate.tar.xz"])
#
# Every run's log comes back ($OUT/run-K.log, K from 1; the chosen one's ends "chosen: run K"). The choice:
# lm: the last validation's induction score, highest first, then its validation loss, lowest first; translate:
# the best validation loss (every run reads the same tokenizer's validation pairs, so the losses compare).
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES="${1:?minutes per run}"
shift
PYTHON="${PYTHON:-python3}"
TASK="${TASK:-lm}"
OUT="${OUT:-artifacts/gpu-sweep}"
mkdir -p "$OUT"
if [ ! -d "data/$TASK" ] && [ -f "data/$TASK.tar.xz" ]; then tar -C data -xJf "data/$TASK.tar.xz"; fi
threads=$(( $(nproc) / $# > 0 ? $(nproc) / $# : 1 ))
k=0
for settings in "$@"; do
  k=$((k + 1))
  args=()
  for s in $settings; do args+=(--set "$s"); done
  echo "run $k: ${settings:-the task as it stands}"
  "$PYTHON" -m atlas train --task "$TASK" --device auto --threads "$threads" --minutes "$MINUTES" \
    --out "runs/gpu-$TASK-$k" ${args[@]+"${args[@]}"} ${SWEEP_ARGS:-} 2>&1 | tr '\r' '\n' | grep -v '^[a-z]*: *[0-9]*%|' \
    > "$OUT/run-$k.log" &
done
wait
best=$("$PYTHON" - "$k" "$TASK" <<'PY'
import json, sys
scored = []
task = sys.argv[2]
for k in range(1, int(sys.argv[1]) + 1):
    try:
        training = json.load(open(f"runs/gpu-{task}-{k}/card.json"))["training"]
        last = training["history"][-1]
    except (OSError, KeyError, IndexError, ValueError):
        continue
    if task == "lm":
        print(f"run {k}: induction {last['induction']}, valid loss {last['valid_loss']}", file=sys.stderr)
        scored.append((-last["induction"], last["valid_loss"], k))
    else:
        print(f"run {k}: best valid loss {training['best_valid_loss']}", file=sys.stderr)
        scored.append((training["best_valid_loss"], 0, k))
print(min(scored)[2])
PY
)
echo "chosen: run $best" | tee -a "$OUT/run-$best.log"
PACK_ONLY=1 RUN="runs/gpu-$TASK-$best" OUT="$OUT" bash scripts/gpu_train.sh "$TASK" "$MINUTES"
