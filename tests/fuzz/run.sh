#!/usr/bin/env bash
# Builds tern's libFuzzer targets with clang (ASan+UBSan, outside the main gcc/CMake build) and
# runs each for a bounded time from its seed corpus. Exits non-zero if any target finds a crash,
# leak, sanitizer report or contract violation; the reproducer is left in $FUZZ_OUT/artifacts.
#
#   FUZZ_SECONDS=60   time per target
#   FUZZ_OUT=build-fuzz  objects, binaries, working corpora, artifacts
#   FUZZ_JOBS=2       parallel compiles
#   FUZZ_TARGETS="codec_decode coordinator_messages http_request status_json zmtp_scanner"  which targets to run
# `run.sh seeds` regenerates the seed corpora in tests/fuzz/corpus/ instead.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${FUZZ_OUT:-$ROOT/build-fuzz}"
SECONDS_PER_TARGET="${FUZZ_SECONDS:-60}"
JOBS="${FUZZ_JOBS:-2}"
TARGETS="${FUZZ_TARGETS:-codec_decode coordinator_messages http_request status_json zmtp_scanner}"
CXX="${FUZZ_CXX:-clang++-14}"
command -v "$CXX" >/dev/null || { echo "fuzz: $CXX not found (deploy/install-deps.sh installs it)"; exit 1; }

mkdir -p "$OUT/gen" "$OUT/obj" "$OUT/artifacts"
FLAGS=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined
       -fno-sanitize-recover=undefined -DFMT_SHARED -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL
       -DSPDLOG_SHARED_LIB -I"$ROOT" -I"$ROOT/proto" -I"$OUT/gen" -isystem /usr/include/eigen3)
LIBS=(-lprotobuf -lzmq -lspdlog -lfmt -lz -lpthread)

# The wire schema, generated as the main build does.
if [ ! -f "$OUT/gen/tern.pb.cc" ] || [ "$ROOT/proto/tern.proto" -nt "$OUT/gen/tern.pb.cc" ]; then
  protoc --proto_path="$ROOT/proto" --cpp_out="$OUT/gen" "$ROOT/proto/tern.proto"
fi

# The library code under test, instrumented for coverage (fuzzer-no-link) and the sanitizers.
LIB_SRCS=("$OUT/gen/tern.pb.cc" "$ROOT"/proto/*.cpp "$ROOT"/server/{aggregator,cap_planner}.cpp
          "$ROOT"/server/{checkpoint_codec,coordinator_checkpoint,coordinator_core,coordinator_options}.cpp
          "$ROOT"/server/{coordinator_quorum,coordinator_wakeups,wake_queue}.cpp
          "$ROOT/server/federated_evaluation.cpp"
          "$ROOT/server/inline_evaluation.cpp" "$ROOT/server/join_limiter.cpp"
          "$ROOT"/server/{link_checks,membership,robust_aggregation,round_phase,straggler_bench}.cpp
          "$ROOT/common/transport/framing.cpp" "$ROOT/common/transport/channel.cpp"
          "$ROOT/common/transport/curve_keys.cpp" "$ROOT/common/transport/zmtp_scanner.cpp"
          "$ROOT/common/util/buffer_pool.cpp"
          "$ROOT"/common/compression/*.cpp "$ROOT"/common/allocation/*.cpp "$ROOT"/common/ml/*.cpp
          "$ROOT"/common/telemetry/{http_request,http_client,json,status_table}.cpp)
objects=()
stale=()
# An object is rebuilt when it is missing or anything it was compiled from (the source and every
# header recorded in its dependency file) is newer.
isStale() {  # OBJ SRC
  [ -f "$1" ] && [ -f "$1.d" ] && [ ! "$2" -nt "$1" ] || return 0
  local dep
  for dep in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$1.d"); do
    [ "$dep" -nt "$1" ] && return 0
  done
  return 1
}
for src in "${LIB_SRCS[@]}"; do
  rel="${src#"$ROOT"/}"; rel="${rel#"$OUT"/}"
  obj="$OUT/obj/${rel//\//_}.o"
  objects+=("$obj")
  if isStale "$obj" "$src"; then stale+=("$src|$obj"); fi
done
if [ "${#stale[@]}" -gt 0 ]; then
  echo "fuzz: compiling ${#stale[@]} sources with $CXX"
  export CXX
  printf '%s\n' "${stale[@]}" | FLAGS="${FLAGS[*]}" xargs -P "$JOBS" -I{} bash -c '
    src="${1%%|*}"; obj="${1##*|}"
    $CXX $FLAGS -fsanitize=fuzzer-no-link -w -MMD -MF "$obj.d" -c "$src" -o "$obj" || exit 255' _ {}
fi

if [ "${1:-}" = seeds ]; then
  # Regenerates the checked-in seed corpora from real encoder output.
  "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer-no-link "$ROOT/tests/fuzz/make_seeds.cpp" "${objects[@]}" \
    "${LIBS[@]}" -o "$OUT/make_seeds"
  "$OUT/make_seeds" "$ROOT/tests/fuzz/corpus"
  exit 0
fi

status=0
for t in $TARGETS; do
  bin="$OUT/${t}_fuzz"
  src="$ROOT/tests/fuzz/${t}_fuzz.cpp"
  [ -f "$src" ] || { echo "fuzz: no target $t"; exit 1; }
  "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer -Wall -Wextra "$src" "${objects[@]}" "${LIBS[@]}" -o "$bin"
  # New inputs go to a working corpus outside the source tree; the checked-in seeds stay as they are.
  mkdir -p "$OUT/corpus/$t"
  echo "== fuzz $t for ${SECONDS_PER_TARGET}s"
  if ! ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" \
       UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
       "$bin" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
         -print_final_stats=1 -artifact_prefix="$OUT/artifacts/$t-" \
         "$OUT/corpus/$t" "$ROOT/tests/fuzz/corpus/$t" > "$OUT/$t.log" 2>&1; then
    tail -n 40 "$OUT/$t.log"
    echo "fuzz: $t FAILED (reproducer in $OUT/artifacts/)"
    status=1
  else
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$OUT/$t.log" | tr '\n' ' '
    echo "corpus=$(ls "$OUT/corpus/$t" | wc -l)"
  fi
done
exit $status
