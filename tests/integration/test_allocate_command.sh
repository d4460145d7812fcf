#!/usr/bin/env bash
# `tern-coordinator allocate` prints the plan as JSON: uniform against its closed form (every
# ratio the mean, Phi = 1 / ratio), DAGC-R against its closed form written out again here from
# the paper's Theorem 4 (shares sorted largest first; j* = argmin phi_j, p_ref the smallest
# share, or the second smallest when j is the smallest); bad argument combinations exit 2.
source "$(dirname "$0")/lib.sh"

"$BIN/tern-coordinator" allocate --shares 0.5,0.5 --mean-ratio 0.1 --dim 100 --method uniform \
  > "$WORK/uniform.json" || fail "uniform plan exited $?"
"$BIN/tern-coordinator" allocate --shares 0.5,0.3,0.2 --mean-ratio 0.01 --dim 7850 \
  --method dagc-r > "$WORK/dagcr.json" || fail "dagc-r plan exited $?"
python3 - "$WORK/uniform.json" "$WORK/dagcr.json" <<'PY'
import json, math, sys
u = json.load(open(sys.argv[1]))
assert u["caps"] == [10, 10], u["caps"]
assert all(abs(r - 0.1) < 1e-12 for r in u["ratios"]), u["ratios"]
assert abs(u["phi"] - 10.0) < 1e-9, u["phi"]

d = json.load(open(sys.argv[2]))
p = [0.5, 0.3, 0.2]
n, B = len(p), 3 * 0.01
P = sum(x ** (2 / 3) for x in p)
def parts(j):
    ref = p[n - 2] if j == n - 1 else p[n - 1]
    q = (P - p[j] ** (2 / 3)) / ref ** (2 / 3)
    return (p[j] * (1 + q) + ref * q * (1 + q)) / B, ref, q
j = min(range(n), key=lambda j: parts(j)[0])
_, ref, q = parts(j)
floor = B / (q + 1)
delta = [floor if i == j else floor * (p[i] / ref) ** (2 / 3) for i in range(n)]
assert all(abs(a - b) < 1e-12 for a, b in zip(d["ratios"], delta)), (d["ratios"], delta)
phi = sum(pi / math.sqrt(di) for pi, di in zip(p, delta)) / math.sqrt(min(delta))
assert abs(d["phi"] - phi) < 1e-9 * phi, (d["phi"], phi)
assert sum(d["caps"]) <= math.floor(B * 7850), d["caps"]
print(f"dagc-r ratios {[round(x, 6) for x in delta]}, Phi {phi:.4f}, caps {d['caps']}")
PY

# A byte budget pays each push's fixed bytes first: (6000 - 3 * 100) / 4.6 coordinates, split
# evenly; the total is reported in bytes with the fixed ones.
"$BIN/tern-coordinator" allocate --shares 1,1,1 --bytes-per-round 6000 --bytes-per-push 100 \
  --bytes-per-coordinate 4.6 --dim 100000 --method uniform > "$WORK/bytes.json" \
  || fail "byte-budget plan exited $?"
python3 - "$WORK/bytes.json" <<'PY'
import json, math, sys
b = json.load(open(sys.argv[1]))
each = math.floor((6000 - 3 * 100) / 4.6 / 3)
assert b["caps"] == [each] * 3, (b["caps"], each)
assert abs(b["total_bytes"] - (3 * 100 + 3 * each * 4.6)) < 1e-6, b["total_bytes"]
assert b["budget"]["bytes_per_push"] == 100 and b["budget"]["bytes_per_coordinate"] == 4.6
print(f"byte budget: caps {b['caps']}, {b['total_bytes']:.1f} bytes of 6000")
PY

# Workers priced apart (top-k at 5 bytes a coordinate, S+Q at 1.1): one ratio for both, bought
# at each one's price: floor((6000 - 100 - 60) / (5 + 1.1)) coordinates each, or one more.
"$BIN/tern-coordinator" allocate --shares 1,1 --bytes-per-round 6000 --dim 100000 \
  --worker-bytes-per-coordinate 5,1.1 --worker-bytes-per-push 100,60 --method uniform \
  > "$WORK/apart.json" || fail "per-worker priced plan exited $?"
python3 - "$WORK/apart.json" <<'PY'
import json, math, sys
b = json.load(open(sys.argv[1]))
each = math.floor((6000 - 100 - 60) / (5 + 1.1))
assert all(each <= k <= each + 1 for k in b["caps"]), (b["caps"], each)
spent = [100 + 5 * b["caps"][0], 60 + 1.1 * b["caps"][1]]
assert all(abs(x - y) < 1e-6 for x, y in zip(b["push_bytes"], spent)), (b["push_bytes"], spent)
assert sum(spent) <= 6000 + 1e-6, spent
print(f"priced apart: caps {b['caps']}, {sum(spent):.1f} bytes of 6000")
PY
# Without --worker-bytes-per-push every worker's push costs --bytes-per-push besides its
# coordinates: floor((6000 - 2 * 100) / (5 + 1.1)) each, or one more.
"$BIN/tern-coordinator" allocate --shares 1,1 --bytes-per-round 6000 --dim 100000 \
  --worker-bytes-per-coordinate 5,1.1 --bytes-per-push 100 --method uniform \
  > "$WORK/apart_push.json" || fail "per-worker priced plan with one push price exited $?"
python3 - "$WORK/apart_push.json" <<'PY'
import json, math, sys
b = json.load(open(sys.argv[1]))
each = math.floor((6000 - 2 * 100) / (5 + 1.1))
assert all(each <= k <= each + 1 for k in b["caps"]), (b["caps"], each)
spent = [100 + 5 * b["caps"][0], 100 + 1.1 * b["caps"][1]]
assert all(abs(x - y) < 1e-6 for x, y in zip(b["push_bytes"], spent)), (b["push_bytes"], spent)
assert sum(spent) <= 6000 + 1e-6, spent
PY

check_refused() {  # MESSAGE ARGS...
  local msg=$1; shift
  set +e
  "$BIN/tern-coordinator" allocate "$@" > "$WORK/err" 2>&1; local rc=$?
  set -e
  [ $rc -eq 2 ] && grep -q -- "$msg" "$WORK/err" || { cat "$WORK/err"; fail "allocate $*: exit $rc"; }
}
check_refused "--costs needs one value per share" --shares 0.5,0.3 --costs 0.001 --dim 7850 \
  --method cost-aware --seconds-per-round 0.01
check_refused "--worker-bytes-per-coordinate needs one value per share" --shares 0.5,0.5 \
  --dim 100 --bytes-per-round 600 --worker-bytes-per-coordinate 5
check_refused "--worker-bytes-per-push needs --worker-bytes-per-coordinate" --shares 0.5,0.5 \
  --dim 100 --bytes-per-round 600 --worker-bytes-per-push 50,50
check_refused "--whole-packets prices uploads in link seconds: it needs --seconds-per-round above 0" \
  --shares 0.5,0.5 --dim 100 --method cost-aware --mean-ratio 0.1 --whole-packets
# Values no link or budget has: refused with exit 2, not taken as "unfitted" or ignored.
for bad in "--costs -0.001,0.001" "--costs nan,0.001" "--fixed-costs -5,0" "--deadline nan" \
  "--deadline -5" "--round-overhead -1" "--bytes-per-round -1" "--seconds-per-round inf" \
  "--mean-ratio -1" "--mean-ratio 5" "--mean-threshold nan"; do
  # shellcheck disable=SC2086  # $bad is an option and its value
  check_refused "${bad%% *}" --shares 1,1 --dim 100000 --method cost-aware $bad
done
check_refused "unknown allocator 'nosuch'" --shares 1,1 --dim 100 --method nosuch
# Budgets the method would not read, or that it cannot plan by: exit 2, naming the options.
check_refused "dagc-a sets each worker's threshold from the mean one: it needs --mean-threshold above 0" --shares 1,1 --dim 100 --method dagc-a
check_refused "--mean-ratio must be above 0" --shares 1,1 --dim 100 --mean-ratio 0
check_refused "--seconds-per-round is read by method cost-aware only, not by uniform" --shares 1,1 \
  --dim 100 --method uniform --seconds-per-round 1
check_refused "--deadline is read by method cost-aware only" --shares 1,1 --dim 100 \
  --method dagc-r --deadline 2
check_refused "give one of them" --shares 1,1 --dim 100 --method cost-aware \
  --seconds-per-round 1 --bytes-per-round 600
echo "PASS: allocate prints the closed-form plans and refuses bad arguments"
