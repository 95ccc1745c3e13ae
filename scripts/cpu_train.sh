#!/usr/bin/env bash
# The translator's run on the CPU (issue 49): the shipped checkpoint goes on training on the prepared data in the
# background, niced, on one thread; rerunning `start` resumes from the run's last saved state; a model lands in
# checkpoints/ only when `compare` measures it better than the shipped one on both BLEU and chrF.
#
#   bash scripts/cpu_train.sh start [STEPS] [COOLDOWN]  prepare data/translate if needed (the shipped tokenizer),
#                                                      then start, or resume, STEPS steps past the shipped model's
#                                                      (default 6000; the last COOLDOWN, default 3000, cool down)
#   bash scripts/cpu_train.sh status                   running or not, the log's last lines, the run's best step
#   bash scripts/cpu_train.sh stop                     stop the run (its best validation is saved already)
#   bash scripts/cpu_train.sh compare [--dry-run]      evaluate the run and the shipped model (once: cached in
#                                                      runs/), print both; copy the run into checkpoints/ only if
#                                                      better on BLEU and chrF (--dry-run: print only)
#
# The run saves its checkpoint (weights, card, Adam's state) at each validation that is its best so far, every
# 100 steps; a resume goes on from there, toward the same last step. A resume inside the cool-down restarts the
# straight line down from where it stands, so its rates differ a little from an unbroken run's.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-.venv/bin/python}"
SHIPPED="${SHIPPED:-checkpoints/translate-en-de}"
RUN="${RUN:-runs/translate-cpu}"
LOG="$RUN.log"
PID="$RUN.pid"
PLAN="$RUN.plan"            # the run's last step and cool-down, so that a resume aims at the same end
SHIPPED_EVAL="runs/translate-en-de.eval.json"  # the shipped model's figures, with the sha256 of its weights
# The shipped model's size and recipe (its card's hyperparameters), not the task's current ones, which are sized for a
# GPU (training/tasks.py): a resume needs the same model, and one CPU core reads 3,000-token batches. A validation
# (and a save, when it is the best) every 100 steps: on a loaded machine a niced step can take 20 s.
SETTINGS=(--set model.d_model=256 --set model.d_ff=1024 --set model.dropout=0.1
          --set batch_tokens=3000 --set warmup=400 --set lr_factor=0.5 --set eval_every=100)
mkdir -p runs

card_field() {  # card_field FOLDER KEY: a number from the card's training record (0 when absent)
  "$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1] + "/card.json"))["training"].get(sys.argv[2]) or 0)' "$1" "$2"
}
running() { [ -f "$PID" ] && kill -0 "$(cat "$PID")" 2>/dev/null; }

prepare_data() {  # data/translate cut with the shipped tokenizer: resume refuses other pieces
  local want have=""
  want=$(sha256sum "$SHIPPED/tokenizer.model" | cut -d' ' -f1)
  [ -f data/translate/tokenizer.model ] && have=$(sha256sum data/translate/tokenizer.model | cut -d' ' -f1)
  if [ ! -f data/translate/sources.json ] || [ "$want" != "$have" ]; then
    nice -n 19 "$PYTHON" -m atlas prepare translate --tokenizer "$SHIPPED/tokenizer.model"
  fi
}

start() {
  if running; then echo "already running (pid $(cat "$PID")); see: bash $0 status"; return 0; fi
  prepare_data
  local steps="${1:-6000}" cooldown="${2:-3000}" from last done
  if [ ! -f "$PLAN" ]; then
    echo "$(( $(card_field "$SHIPPED" steps_done) + steps )) $cooldown" > "$PLAN"
  fi
  read -r last cooldown < "$PLAN"
  if [ -f "$RUN/card.json" ]; then from="$RUN"; else from="$SHIPPED"; fi
  done=$(card_field "$from" steps_done)
  if [ "$done" -ge "$last" ]; then echo "$RUN: done ($done of $last steps); next: bash $0 compare"; return 0; fi
  local left=$(( last - done ))
  printf '\n' >> "$LOG"  # a stopped run's last progress line ends in a carriage return
  echo "== $(date -u +%FT%TZ) from $from at step $done: $left steps to $last, cool-down $(( left < cooldown ? left : cooldown ))" >> "$LOG"
  # setsid starts a session, and with the kernel's autogroups (sched_autogroup_enabled) a session is a group that
  # gets its fair share of the CPU against every other session whatever its processes' nice: seen at 50 % of a core
  # beside CI's two busy workers. The group's own nice (/proc/PID/autogroup) is set to 19 as well.
  setsid nice -n 19 "$PYTHON" -m atlas train --task translate --threads 1 --resume "$from" --out "$RUN" \
    "${SETTINGS[@]}" --max-steps "$left" --cooldown "$(( left < cooldown ? left : cooldown ))" >> "$LOG" 2>&1 < /dev/null &
  echo $! > "$PID"
  echo 19 2>/dev/null > "/proc/$!/autogroup" || true
  echo "started (pid $!): $left steps from $from's step $done, logging to $LOG"
}

status() {
  if running; then echo "running (pid $(cat "$PID"))"; else echo "not running"; fi
  [ -f "$LOG" ] && tail -c 4000 "$LOG" | tr '\r' '\n' | grep -av '^ *$' | awk '/^== /{n=0} {line[n++]=$0}
    END{for (i = (n > 4 ? n - 4 : 0); i < n; i++) print line[i]}'  # the last start's last 4 lines
  [ -f "$RUN/card.json" ] && echo "saved: step $(card_field "$RUN" steps_done), best valid loss $(card_field "$RUN" best_valid_loss)"
  return 0
}

stop() {
  if running; then kill "$(cat "$PID")"; echo "stopped pid $(cat "$PID")"; else echo "not running"; fi
  rm -f "$PID"
}

figures() {  # figures JSON_FILE: "BLEU CHRF" of the everyday test set, greedy (the card's headline)
  "$PYTHON" -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"]; print(m["bleu"], m["chrf"])' "$1"
}

compare() {
  [ -f "$RUN/card.json" ] || { echo "error: $RUN has no checkpoint yet; run: bash $0 start" >&2; return 2; }
  if running; then echo "note: the run is still going; this scores its best checkpoint so far" >&2; fi
  local weights
  weights=$(sha256sum "$SHIPPED/model.safetensors" | cut -d' ' -f1)
  if [ ! -f "$SHIPPED_EVAL" ] || [ "$(cat "$SHIPPED_EVAL.sha256" 2>/dev/null)" != "$weights" ]; then
    nice -n 19 "$PYTHON" -m atlas evaluate "$SHIPPED" --threads 1 > "$SHIPPED_EVAL.tmp"
    mv "$SHIPPED_EVAL.tmp" "$SHIPPED_EVAL" && echo "$weights" > "$SHIPPED_EVAL.sha256"
  fi
  nice -n 19 "$PYTHON" -m atlas evaluate "$RUN" --threads 1 > "$RUN.eval.json"
  local old new
  read -r -a old <<< "$(figures "$SHIPPED_EVAL")"
  read -r -a new <<< "$(figures "$RUN.eval.json")"
  echo "shipped $SHIPPED: everyday BLEU ${old[0]} chrF ${old[1]}"
  echo "run     $RUN (step $(card_field "$RUN" steps_done)): everyday BLEU ${new[0]} chrF ${new[1]}"
  if "$PYTHON" -c 'import sys; a = list(map(float, sys.argv[1:])); sys.exit(not (a[2] > a[0] and a[3] > a[1]))' \
    "${old[@]}" "${new[@]}"; then
    if [ "${1:-}" = "--dry-run" ]; then echo "better on both: would ship (--dry-run)"; return 0; fi
    cp "$RUN"/{model.safetensors,config.json,tokenizer.model} "$SHIPPED"/
    "$PYTHON" -c 'import json, sys  # the run card with the figures just measured, as evaluate --write-card writes it
card, scored = (json.load(open(f)) for f in sys.argv[1:3])
open(sys.argv[3], "w").write(json.dumps({**card, **scored}, indent=2, ensure_ascii=False) + "\n")' \
      "$RUN/card.json" "$RUN.eval.json" "$SHIPPED/card.json"
    cp "$RUN.eval.json" "$SHIPPED_EVAL"  # the new shipped model's figures: not evaluated again
    sha256sum "$SHIPPED/model.safetensors" | cut -d' ' -f1 > "$SHIPPED_EVAL.sha256"
    echo "better on both: copied into $SHIPPED (check the card's samples, then commit)"
  else
    echo "not better on both: $SHIPPED stays"
  fi
}

case "${1:-status}" in
  start) shift; start "$@" ;;
  status) status ;;
  stop) stop ;;
  compare) shift; compare "$@" ;;
  *) echo "usage: bash $0 {start [STEPS] [COOLDOWN]|status|stop|compare [--dry-run]}" >&2; exit 2 ;;
esac
