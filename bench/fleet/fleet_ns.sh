# The fleet's network, sourced by run.sh after tests/netns/lib.sh (which gives $WORK, $NS_C, skip,
# fail, shape_worker, shape_coordinator and the clean-up of $NS_C and $PIDS). One namespace per
# worker, each joined to the coordinator's namespace ($NS_C) by its own veth pair: worker k is
# 10.78.k.2/30 on fw<k>, the coordinator 10.78.k.1/30 on fc<k>. Nothing is configured outside
# these namespaces, so no traffic leaves them; they are removed on exit, whatever the exit path.

FLEET_NS=()

fleet_ns() { echo "tern-f$1-$$"; }
fleet_addr_c() { echo "10.78.$1.1"; }

fleet_cleanup() {
  local ns p
  for p in "${TRAINERS[@]:-}"; do  # run.sh's PyTorch trainers, if any
    [ -n "$p" ] && kill "$p" 2> /dev/null || true
  done
  for ns in "${FLEET_NS[@]:-}"; do
    [ -n "$ns" ] && ip netns del "$ns" 2> /dev/null || true
  done
  cleanup
}
trap fleet_cleanup EXIT

# fleet_setup N: the coordinator's namespace and N workers' namespaces, each link up and addressed;
# skips (exit 77) unless we are root and the kernel and iproute2 can make namespaces, veth pairs
# and tbf qdiscs.
fleet_setup() {
  [ "$(id -u)" = 0 ] || skip "needs root (network namespaces and tc)"
  command -v ip > /dev/null || skip "iproute2 'ip' not found"
  command -v tc > /dev/null || skip "iproute2 'tc' not found"
  ip netns add "$NS_C" 2> /dev/null || skip "cannot create a network namespace"
  ip -n "$NS_C" link set lo up
  local k ns
  for k in $(seq 0 $(($1 - 1))); do
    ns=$(fleet_ns "$k")
    ip netns add "$ns" 2> /dev/null || skip "cannot create a network namespace"
    FLEET_NS+=("$ns")
    ip -n "$NS_C" link add "fc$k" type veth peer name "fw$k" netns "$ns" 2> /dev/null ||
      skip "cannot create a veth pair"
    ip -n "$NS_C" addr add "$(fleet_addr_c "$k")/30" dev "fc$k"
    ip -n "$ns" addr add "10.78.$k.2/30" dev "fw$k"
    ip -n "$ns" link set lo up
    ip -n "$NS_C" link set "fc$k" up
    ip -n "$ns" link set "fw$k" up
  done
  ip netns exec "$NS_C" tc qdisc add dev fc0 root tbf rate 1gbit burst 64k limit 1m \
    2> /dev/null || skip "the kernel has no tbf qdisc"
  ip netns exec "$NS_C" tc qdisc del dev fc0 root
}

# fleet_shape K UP DOWN: worker K's uplink (its egress) at UP and downlink (the coordinator's
# egress towards it) at DOWN, tc rates such as 2mbit; lib.sh's token buckets, replacing any before.
fleet_shape() {
  local ns
  ns=$(fleet_ns "$1")
  NS_W=$ns DEV_W="fw$1" shape_worker replace "$2"
  ip netns exec "$NS_C" tc qdisc del dev "fc$1" root 2> /dev/null || true
  DEV_C="fc$1" shape_coordinator "$3"
}

# fleet_drops: packets the fleet's qdiscs dropped so far (0 expected: tbf's queue is long).
fleet_drops() {
  local k total=0 d
  for k in "${!FLEET_NS[@]}"; do
    for d in $({
      ip netns exec "${FLEET_NS[$k]}" tc -s qdisc show dev "fw$k"
      ip netns exec "$NS_C" tc -s qdisc show dev "fc$k"
    } | sed -n 's/.*(dropped \([0-9]*\),.*/\1/p'); do
      total=$((total + d))
    done
  done
  echo "$total"
}
