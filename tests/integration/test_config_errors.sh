#!/usr/bin/env bash
# A worker given an unknown key exits 2 and one given a missing dataset exits 1, naming the file
# and line.
source "$(dirname "$0")/lib.sh"

write_worker "$WORK/w.yaml" tcp://127.0.0.1:1 1
printf 'bogus_key: 1\n' >> "$WORK/w.yaml"
line=$(grep -n bogus_key "$WORK/w.yaml" | cut -d: -f1)
set +e
"$BIN/tern-worker" --config "$WORK/w.yaml" > "$WORK/out" 2>&1; rc=$?
set -e
[ $rc -eq 2 ] || { cat "$WORK/out"; fail "unknown key: exit $rc, not 2"; }
grep -q "$WORK/w.yaml:$line:1: unknown key 'bogus_key'" "$WORK/out" || { cat "$WORK/out"; fail "message does not name file:line:column"; }

write_worker "$WORK/m.yaml" tcp://127.0.0.1:1 1
sed -i "s|train-images-idx3-ubyte.gz|no-such-file.gz|" "$WORK/m.yaml"
set +e
"$BIN/tern-worker" --config "$WORK/m.yaml" > "$WORK/out2" 2>&1; rc=$?
set -e
[ $rc -eq 1 ] || { cat "$WORK/out2"; fail "missing dataset: exit $rc, not 1"; }
line=$(grep -n no-such-file.gz "$WORK/m.yaml" | cut -d: -f1)
grep -q "$WORK/m.yaml:$line:[0-9]*: images file not found: .*/no-such-file.gz" "$WORK/out2" ||
  { cat "$WORK/out2"; fail "message does not name the config file and line and the missing file"; }

printf 'min_workers: "many"\n' > "$WORK/c.yaml"
set +e
"$BIN/tern-coordinator" --config "$WORK/c.yaml" > "$WORK/out3" 2>&1; rc=$?
set -e
[ $rc -eq 2 ] || { cat "$WORK/out3"; fail "wrong type: exit $rc, not 2"; }
grep -q "$WORK/c.yaml:1:14: 'min_workers' has the wrong type" "$WORK/out3" || { cat "$WORK/out3"; fail "bad type message"; }
# A logistic (two-class) model cannot be tested on ten classes: said at start, not at round 1.
write_coordinator "$WORK/l.yaml" 5 1
sed -i "s|model: {kind: softmax, classes: 10}|model: {kind: logistic}|" "$WORK/l.yaml"
set +e
"$BIN/tern-coordinator" --config "$WORK/l.yaml" > "$WORK/out4" 2>&1; rc=$?
[ $rc -eq 1 ] || { cat "$WORK/out4"; fail "a logistic model on ten classes: exit $rc, not 1"; }
[ $rc -ne 0 ] || fail "a logistic model on ten classes accepted"
grep -q "$WORK/l.yaml:[0-9]*:[0-9]*: test_data '$FMNIST/t10k-labels-idx1-ubyte.gz': label [2-9] has no output in a logistic model" "$WORK/out4" ||
  { cat "$WORK/out4"; fail "no clear message for labels the model cannot take"; }
# tern-sim with CONFIG exits 1 with a line matching PATTERN, or the test fails saying WHAT.
sim_refuses() {  # CONFIG PATTERN WHAT
  local out="$1.out" rc
  set +e
  (cd "$WORK" && timeout 60 "$BIN/tern-sim" --config "$1" > "$out" 2>&1); rc=$?
  set -e
  [ $rc -eq 1 ] && grep -q "$2" "$out" || { cat "$out"; fail "$3: exit $rc"; }
}
sed "s|    kind: softmax|    kind: logistic|" "$SRC/deploy/config/sim-quick.yaml" > "$WORK/s.yaml"
grep -q "kind: logistic" "$WORK/s.yaml" || fail "could not write the logistic sim config"
sim_refuses "$WORK/s.yaml" \
  "$WORK/s.yaml:[0-9]*:[0-9]*: train_data '$FMNIST/train-labels-idx1-ubyte.gz': label [2-9] has no output" \
  "sim with a logistic model on ten classes"
# A test set of another width than the model's, or with no rows, is refused at start-up (exit 1)
# naming test_data, its file and line; it used to stop the coordinator and the simulator at
# their first evaluation with the model's message alone.
printf 'x1,x2,x3,y\n1,2,3,0\n4,5,6,1\n' > "$WORK/wide.csv"
write_coordinator "$WORK/f.yaml" 5 1
sed -i -e "s|model: {kind: softmax, classes: 10}|model: {kind: softmax, classes: 2, features: 2}|" \
  -e "s|^  format: idx|  format: csv|" -e "s|^  images: .*|  path: $WORK/wide.csv|" \
  -e "/^  labels: /d" "$WORK/f.yaml"
line=$(grep -n "wide.csv" "$WORK/f.yaml" | cut -d: -f1)
set +e
timeout 20 "$BIN/tern-coordinator" --config "$WORK/f.yaml" > "$WORK/out13" 2>&1; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "$WORK/f.yaml:$line:[0-9]*: test_data '$WORK/wide.csv': 3 features, model has 2" "$WORK/out13" ||
  { cat "$WORK/out13"; fail "a test set wider than the model: exit $rc"; }
[ ! -e "$WORK/endpoint" ] || fail "the coordinator bound before refusing its test set"
sed -e "s|^    format: idx|    format: csv|" -e "s|^    images: .*|    path: $WORK/wide.csv|" \
  -e "/^    labels: /d" "$SRC/deploy/config/sim-quick.yaml" > "$WORK/fs.yaml"
line=$(grep -n "wide.csv" "$WORK/fs.yaml" | cut -d: -f1)
sim_refuses "$WORK/fs.yaml" \
  "$WORK/fs.yaml:$line:[0-9]*: test_data '$WORK/wide.csv': 3 features, model has 784" \
  "sim with a test set narrower than the model"
sed -e "s|^    images: .*t10k-images.*|    images: $WORK/empty_img|" \
  -e "s|^    labels: .*t10k-labels.*|    labels: $WORK/empty_lbl|" \
  "$SRC/deploy/config/sim-quick.yaml" > "$WORK/z.yaml"
printf '\0\0\10\3\0\0\0\0\0\0\0\34\0\0\0\34' > "$WORK/empty_img"
printf '\0\0\10\1\0\0\0\0' > "$WORK/empty_lbl"
line=$(grep -n "empty_img" "$WORK/z.yaml" | cut -d: -f1)
sim_refuses "$WORK/z.yaml" \
  "$WORK/z.yaml:$line:[0-9]*: IDX files '$WORK/empty_img' and '$WORK/empty_lbl': no rows" \
  "sim with an empty test set"
# A bad command line is a configuration error too: exit 2 with CLI11's message, on every
# program (an unknown --log-level used to turn logging off silently).
# Each program gets a configuration it would run with (the daemons would wait for peers).
write_coordinator "$WORK/ok_c.yaml" 5 1
write_worker "$WORK/ok_w.yaml" tcp://127.0.0.1:1 1
declare -A good=([tern-coordinator]="$WORK/ok_c.yaml" [tern-worker]="$WORK/ok_w.yaml"
                 [tern-sim]="$SRC/deploy/config/sim-quick.yaml")
for prog in tern-coordinator tern-worker tern-sim; do
  for args in "--log-level loud" "--no-such-flag"; do
    set +e
    # shellcheck disable=SC2086
    (cd "$WORK" && timeout 20 "$BIN/$prog" --config "${good[$prog]}" $args > "$WORK/out6" 2>&1); rc=$?
    set -e
    [ $rc -eq 2 ] || { cat "$WORK/out6"; fail "$prog $args: exit $rc, not 2"; }
  done
  grep -q "no-such-flag" "$WORK/out6" || { cat "$WORK/out6"; fail "$prog: the unknown flag is not named"; }
  "$BIN/$prog" --help > "$WORK/out7" 2>&1 || fail "$prog --help exited non-zero"
done
# An endpoint that is not tcp://HOST:PORT is refused at once, from YAML or a flag (exit 2); a
# URL file in a directory that does not exist is named (exit 1).
set +e
"$BIN/tern-coordinator" --config "$WORK/ok_c.yaml" --bind 127.0.0.1:5555 > "$WORK/out9" 2>&1; rc=$?
set -e
[ $rc -eq 2 ] && grep -q -- "--bind must be tcp://HOST:PORT or ipc://PATH" "$WORK/out9" ||
  { cat "$WORK/out9"; fail "a bind without tcp://: exit $rc"; }
sed 's|^coordinator: .*|coordinator: 127.0.0.1:5555|' "$WORK/ok_w.yaml" > "$WORK/ep_w.yaml"
line=$(grep -n "^coordinator:" "$WORK/ep_w.yaml" | cut -d: -f1)
set +e
"$BIN/tern-worker" --config "$WORK/ep_w.yaml" > "$WORK/out10" 2>&1; rc=$?
set -e
[ $rc -eq 2 ] && grep -q "$WORK/ep_w.yaml:$line:[0-9]*: 'coordinator' must be tcp://HOST:PORT" "$WORK/out10" ||
  { cat "$WORK/out10"; fail "a worker's coordinator without tcp://: exit $rc"; }
set +e
(cd "$WORK" && timeout 20 "$BIN/tern-coordinator" --config "$WORK/ok_c.yaml" --http 127.0.0.1:0 \
  --http-url-file "$WORK/no-such-dir/url" > "$WORK/out11" 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && grep -q "no-such-dir/url.tmp: cannot create" "$WORK/out11" ||
  { cat "$WORK/out11"; fail "a URL file in a missing directory: exit $rc"; }
# A URL file without an HTTP address is a command-line error on both daemons (exit 2, at once:
# before, exit 1 once the data had loaded, which systemd restarts).
for daemon in "tern-coordinator --config $WORK/ok_c.yaml" "tern-worker --config $WORK/ok_w.yaml"; do
  set +e
  timeout 20 $BIN/$daemon --http-url-file "$WORK/url" > "$WORK/out14" 2>&1; rc=$?
  set -e
  [ $rc -eq 2 ] && grep -q -- "--http-url-file needs an HTTP address" "$WORK/out14" ||
    { cat "$WORK/out14"; fail "$daemon: --http-url-file without --http: exit $rc"; }
done
# A worker whose max_message_bytes cannot take the model's welcome (31,400 bytes of softmax
# parameters) is told so at its join and stops (exit 3: refused for good), rather than waiting for
# ever.
rm -f "$WORK/endpoint"
write_coordinator "$WORK/lim_c.yaml" 5 1
"$BIN/tern-coordinator" --config "$WORK/lim_c.yaml" > "$WORK/lim_c.out" 2>&1 &
LCPID=$!; PIDS+=($LCPID)
wait_for_file "$WORK/endpoint"
write_worker "$WORK/lim_w.yaml" "$(cat "$WORK/endpoint")" 1
echo "max_message_bytes: 16384" >> "$WORK/lim_w.yaml"
set +e
timeout 60 "$BIN/tern-worker" --config "$WORK/lim_w.yaml" > "$WORK/out12" 2>&1; rc=$?
set -e
kill "$LCPID" 2>/dev/null || true
[ $rc -eq 3 ] && grep -q "do not fit this worker's max_message_bytes of 16384" "$WORK/out12" ||
  { tail "$WORK/out12"; fail "a worker too small for the model's welcome: exit $rc"; }
set +e
"$BIN/tern-sim" > "$WORK/out8" 2>&1; rc=$?
set -e
[ $rc -eq 2 ] && grep -q -- "--config is required" "$WORK/out8" || { cat "$WORK/out8"; fail "tern-sim without --config: exit $rc"; }
echo "PASS: configuration errors name file:line:column"
