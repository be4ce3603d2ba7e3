#!/usr/bin/env bash
# ab_cpu_smoke.sh — ab-gpt2 on the CPU, no GPU: gpt-2-backend's unmodified
# main called again and again in one process (ggml built for its CPU backend
# by build.sh WORK cpu, a tiny GPT-2 written by make_gpt2.py), first without
# carve-run (--no-switch: an A/A run), then, given a carve build directory
# with the drop-in tests' mock driver (tests/dropin), under that build's
# carve-run, where ab-gpt2 must find carve-run's switch and turn it
# between rounds (the CPU backend allocates nothing on a device: this shows
# the switch is found and turned, not its effect). Each call must print the
# same tokens and ggml's predict time; the JSON must hold every round.
#
# Usage: integrations/ggml/ab_cpu_smoke.sh [WORK] [CARVE_BUILD]
#   WORK         default build-ggml (the CPU build goes to WORK/cpu)
#   CARVE_BUILD  e.g. build-release (its tools/carve-run, tests/dropin)
# Prints PASS/FAIL lines; exit 0 when all pass. About 2 minutes to build
# on 2 cores the first time, seconds to run.
set -uo pipefail
cd "$(dirname "$0")/../.."
WORK=${1:-build-ggml}
CARVE_BUILD=${2:-}
fail=0
say() { echo "$1"; case $1 in FAIL*) fail=1;; esac; }

integrations/ggml/build.sh "$WORK" cpu || { echo "FAIL build (ggml for the CPU)"; exit 1; }
WORK=$(cd "$WORK" && pwd)
py=/usr/bin/python3; [ -x "$py" ] || py=python3
"$py" integrations/ggml/make_gpt2.py "$WORK/cpu/tiny" --size tiny --vocab 512 --positions 256 >/dev/null ||
  { echo "FAIL the tiny model (make_gpt2.py needs numpy)"; exit 1; }
args=(-m "$WORK/cpu/tiny/ggml-model.bin" -p "The memory of a GPU is a scarce thing" -s 42 --top_k 1 -c 256 -b 8
      --ignore-eos -t 2)

# What ab-gpt2's JSON must hold: every call, round and pair, the switch as given.
check_json() { # json pairs warmup switch(true|false)
  "$py" - "$@" <<'PY'
import json, sys
path, pairs, warmup, switch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "true"
try:
    d = json.load(open(path))
except (OSError, ValueError) as e:
    sys.exit(f"no JSON ({e})")
bad = []
if d.get("calls") != 4 * (pairs + warmup): bad.append(f"calls {d.get('calls')}")
if not d.get("complete") or not d.get("same_tokens"): bad.append("incomplete or other tokens")
if d.get("switch") is not switch: bad.append(f"switch {d.get('switch')}")
if len(d.get("rounds", [])) != 2 * pairs: bad.append(f"{len(d.get('rounds', []))} rounds")
if any(not r.get("one_ms") or r["one_ms"] <= 0 for r in d.get("rounds", [])): bad.append("a predict time missing")
if d.get("prompt_tokens") != 37: bad.append(f"prompt tokens {d.get('prompt_tokens')}")
if d.get("prompt", {}).get("n") != pairs: bad.append("not every pair has a prompt ratio")
if bad:
    sys.exit("; ".join(bad))
PY
}

json=$WORK/cpu/ab-aa.json
if "$WORK/cpu/bin/ab-gpt2" --no-switch --pairs 6 --warmup 1 --gen 8 --json "$json" -- "${args[@]}" \
     >"$WORK/cpu/ab-aa.log" 2>&1 && why=$(check_json "$json" 6 1 false 2>&1); then
  say "PASS ab-gpt2 without carve-run: gpt-2-backend's main called 28 times in one process, the same tokens each time"
else
  say "FAIL ab-gpt2 without carve-run: ${why:-rc $?} (see $WORK/cpu/ab-aa.log)"
fi
"$WORK/cpu/bin/ab-gpt2" --pairs 2 -- "${args[@]}" >/dev/null 2>&1
[ $? = 2 ] && say "PASS ab-gpt2 refuses to run without carve-run's switch unless --no-switch is given" ||
  say "FAIL ab-gpt2 without carve-run and without --no-switch should exit 2"

if [ -n "$CARVE_BUILD" ]; then
  CARVE_BUILD=$(cd "$CARVE_BUILD" && pwd)
  json=$WORK/cpu/ab-switch.json
  if LD_LIBRARY_PATH="$CARVE_BUILD/tests/dropin" "$CARVE_BUILD/tools/carve-run" -- "$WORK/cpu/bin/ab-gpt2" \
       --pairs 6 --warmup 1 --gen 8 --json "$json" -- "${args[@]}" >"$WORK/cpu/ab-switch.log" 2>&1 &&
     why=$(check_json "$json" 6 1 true 2>&1); then
    say "PASS ab-gpt2 under carve-run (mock driver): the switch found and turned between 28 calls"
  else
    say "FAIL ab-gpt2 under carve-run: ${why:-rc $?} (see $WORK/cpu/ab-switch.log)"
  fi
fi
exit $fail
