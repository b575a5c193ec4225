#!/usr/bin/env bash
# Three hosts on one machine: the cluster's three tasks (worker:0, worker:1, ps:0) run in three
# network namespaces, each its own host with its own address, joined by a Linux bridge in a
# fourth namespace; troupe-cluster-demo, run on the first host, runs the same graph locally and
# across the three, and the test passes iff it says the results agree (exit code 0).
#
#   troupe-<pid>-w0  eth0 10.213.N.1/24 --veth-- w0 \
#   troupe-<pid>-w1  eth0 10.213.N.2/24 --veth-- w1  br0 in troupe-<pid>-br (no address)
#   troupe-<pid>-ps  eth0 10.213.N.3/24 --veth-- ps /
#
# N is picked so that 10.213.N.0/24 overlaps no route of this machine (172.29.N or 192.168.N
# where routes cover all of 10.213.0.0/16). The namespaces are made
# by this test and have no link to any other network: every packet it sends stays between them.
# Whatever happens (a pass, a failure, Ctrl-C), the trap on EXIT stops every process the test
# started (the nodes, the demo) by its pid, SIGTERM and then SIGKILL, and deletes the four
# namespaces, which removes the veth pairs and the bridge with them.
# Exit codes: 0 pass, 1 fail, 77 skipped (namespaces, veth pairs or bridges cannot be made here:
# not root, no iproute2, a kernel without them).
# Usage: three_hosts_test.sh PATH_TO_troupe-node PATH_TO_troupe-cluster-demo
# (about 0.3 s besides the demo's own time; docs/cluster.md, "Several hosts on one machine (network namespaces)")
set -euo pipefail
node=$1
demo=$2
port=2222
start_bound_s=20  # for each node's "started" line
stop_bound_s=10   # from SIGTERM to SIGKILL
demo_bound_s=120

[[ -x $node ]] || { echo "FAIL: troupe-node is not at '$node'"; exit 1; }
[[ -x $demo ]] || { echo "FAIL: troupe-cluster-demo is not at '$demo' (is the target built?)"; exit 1; }
command -v ip >/dev/null || { echo "skipped: no 'ip' command (iproute2) to make network namespaces"; exit 77; }

prefix="troupe-$$"
hosts=(w0 w1 ps)
tasks=(worker:0 worker:1 ps:0)
made_namespaces=()
node_pids=()
demo_pid=""
declare -A name_of exit_of  # by pid
work=$(mktemp -d)
cleaned=0

# Is PID a process this shell started that has not exited? Only a child of this shell is
# ever signalled: once a node has exited and been reaped, its pid could be another process's.
running_child() {
  local stat state parent
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }  # the fields after "(comm) ": state, parent, ...
  read -r state parent _ <<<"$stat"
  [[ $parent == "$$" && $state != Z ]]
}

# Stops the child processes PIDS...: SIGTERM to all, SIGKILL to those still running
# stop_bound_s later; exit_of[PID] is then each one's exit code.
stop_children() {
  local pid waited=0 running
  for pid in "$@"; do
    if running_child "$pid"; then kill -TERM "$pid" 2>/dev/null || true; fi
  done
  while ((waited < stop_bound_s * 10)); do
    running=0
    for pid in "$@"; do
      if running_child "$pid"; then running=1; fi
    done
    ((running)) || break
    sleep 0.1
    waited=$((waited + 1))
  done
  for pid in "$@"; do
    if running_child "$pid"; then
      echo "${name_of[$pid]} (pid $pid) did not stop within $stop_bound_s s of SIGTERM: killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  for pid in "$@"; do
    exit_of[$pid]=0
    wait "$pid" 2>/dev/null || exit_of[$pid]=$?
  done
}

cleanup() {
  local status=$?
  ((cleaned)) && return
  cleaned=1
  trap '' INT TERM  # a second Ctrl-C does not cut the cleanup short
  local pids=("${node_pids[@]}")
  [[ -z $demo_pid ]] || pids+=("$demo_pid")
  ((${#pids[@]} == 0)) || stop_children "${pids[@]}"
  local ns
  for ns in "${made_namespaces[@]}"; do
    ip netns delete "$ns" 2>/dev/null || echo "warning: could not delete network namespace $ns"
  done
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

print_logs() {
  local i
  for i in "${!tasks[@]}"; do
    echo "----- ${tasks[i]} (namespace $prefix-${hosts[i]}) log:"
    cat "$work/${hosts[i]}.log" 2>/dev/null || echo "(no log)"
  done
}

fail() {
  echo "FAIL: $*"
  print_logs
  exit 1
}

# Setting up a namespace, a veth pair or a bridge fails only where this machine cannot make them
# (not root, a kernel without them): the test is skipped, saying why.
skip_unless() {
  local what=$1 out
  shift
  if ! out=$("$@" 2>&1); then
    echo "skipped: cannot make $what here ($*: ${out:-failed})"
    exit 77
  fi
}

# ---- A /24 in 10.213.0.0/16 that no route of this machine overlaps (the default route aside),
# or in 172.29.0.0/16 or 192.168.0.0/16 where routes cover all of 10.213.0.0/16.
to_int() {
  local a b c d
  IFS=. read -r a b c d <<<"$1"
  echo $(((a << 24) | (b << 16) | (c << 8) | d))
}
# Do prefixes A/LA and B/LB share an address? Iff they agree on the shorter length's bits.
overlaps() {
  local len=$(($2 < $4 ? $2 : $4))
  local mask=$(((0xffffffff << (32 - len)) & 0xffffffff))
  (($(($(to_int "$1") & mask)) == $(($(to_int "$3") & mask))))
}
routes=$(ip -4 -o route show table all | awk '
  $1 ~ /^(unicast|local|broadcast|multicast|anycast|unreachable|blackhole|prohibit|throw|nat)$/ {print $2; next}
  {print $1}' | grep -v '^default$' || true)
subnet=""
for base in 10.213 172.29 192.168; do  # the later ones where a route covers all of 10.213/16
  for third in $(seq 0 255); do
    clash=0
    for route in $routes; do
      dest=${route%/*}
      len=32
      [[ $route == */* ]] && len=${route#*/}
      [[ $dest =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || continue
      if overlaps "$base.$third.0" 24 "$dest" "$len"; then clash=1; break; fi
    done
    if ((!clash)); then subnet="$base.$third"; break 2; fi
  done
done
[[ -n $subnet ]] || { echo "FAIL: every /24 of 10.213/16, 172.29/16 and 192.168/16 overlaps a route of this machine"; exit 1; }
addresses=("$subnet.1" "$subnet.2" "$subnet.3")

# ---- The four namespaces, the bridge and a veth pair from each host to it.
bridge_ns="$prefix-br"
for ns in "$bridge_ns" "${hosts[@]/#/$prefix-}"; do
  skip_unless "network namespaces" ip netns add "$ns"
  made_namespaces+=("$ns")
  ip -n "$ns" link set lo up
done
skip_unless "a bridge" ip -n "$bridge_ns" link add br0 type bridge
ip -n "$bridge_ns" link set br0 up
for i in "${!hosts[@]}"; do
  host_ns="$prefix-${hosts[i]}"
  skip_unless "a veth pair" ip -n "$host_ns" link add eth0 type veth peer name "${hosts[i]}" netns "$bridge_ns"
  ip -n "$bridge_ns" link set "${hosts[i]}" master br0
  ip -n "$bridge_ns" link set "${hosts[i]}" up
  ip -n "$host_ns" addr add "${addresses[i]}/24" dev eth0
  ip -n "$host_ns" link set eth0 up
done
echo "three hosts: ${tasks[0]} at ${addresses[0]}, ${tasks[1]} at ${addresses[1]}, ${tasks[2]} at ${addresses[2]} (namespaces $prefix-{w0,w1,ps}, bridge in $bridge_ns)"

# ---- The cluster spec and one troupe-node per host.
spec="$work/cluster.json"
cat >"$spec" <<EOF
{"cluster": {"worker": ["${addresses[0]}:$port", "${addresses[1]}:$port"], "ps": ["${addresses[2]}:$port"]}}
EOF
for i in "${!hosts[@]}"; do
  ip netns exec "$prefix-${hosts[i]}" "$node" --cluster "$spec" --task "${tasks[i]}" >"$work/${hosts[i]}.log" 2>&1 &
  node_pids+=($!)
  name_of[$!]="troupe-node ${tasks[i]}"
done
for i in "${!hosts[@]}"; do
  waited=0
  until grep -q started "$work/${hosts[i]}.log"; do
    running_child "${node_pids[i]}" || fail "troupe-node ${tasks[i]} exited before it started"
    ((waited < start_bound_s * 10)) || fail "troupe-node ${tasks[i]} did not start within $start_bound_s s"
    sleep 0.1
    waited=$((waited + 1))
  done
done
echo "the three nodes started"

# ---- Every host reaches every other: by ping where there is one, and each node's port by TCP.
for i in "${!hosts[@]}"; do
  for j in "${!hosts[@]}"; do
    if command -v ping >/dev/null; then
      ip netns exec "$prefix-${hosts[i]}" ping -c 1 -W 1 "${addresses[j]}" >/dev/null ||
        fail "${hosts[i]} cannot ping ${hosts[j]} at ${addresses[j]}"
    fi
    # shellcheck disable=SC2016  # $1 and $2 are the inner bash's arguments
    ip netns exec "$prefix-${hosts[i]}" timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "${addresses[j]}" "$port" ||
      fail "${hosts[i]} cannot connect to ${tasks[j]} at ${addresses[j]}:$port"
  done
done
command -v ping >/dev/null && how="ping and TCP" || how="TCP (no ping here)"
echo "every host reaches every node ($how)"

# ---- The demo, on worker:0's host, against the cluster.
target="troupe://${addresses[0]}:$port"
echo "running: ip netns exec $prefix-w0 $demo --target $target"
# In the background, so that a signal to this script is handled (by the trap) while it waits.
timeout -k 5 "$demo_bound_s" ip netns exec "$prefix-w0" "$demo" --target "$target" &
demo_pid=$!
name_of[$demo_pid]=troupe-cluster-demo
demo_status=0
wait "$demo_pid" || demo_status=$?
demo_pid=""
((demo_status != 124)) || fail "troupe-cluster-demo did not finish within $demo_bound_s s"
((demo_status == 0)) || fail "troupe-cluster-demo exited with $demo_status"

# ---- Each node stops cleanly on SIGTERM (exit code 0, "stopped" logged).
stopped=("${node_pids[@]}")
node_pids=()
stop_children "${stopped[@]}"
for i in "${!tasks[@]}"; do
  status=${exit_of[${stopped[i]}]}
  if ((status != 0)) || ! grep -q stopped "$work/${hosts[i]}.log"; then
    fail "troupe-node ${tasks[i]} did not stop cleanly on SIGTERM (exit code $status)"
  fi
done
echo "PASS: troupe-cluster-demo ran the graph across three hosts, and the three nodes stopped cleanly"
