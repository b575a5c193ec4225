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

source "$(dirname "$0")/namespace_hosts_lib.sh"
hosts=(w0 w1 ps)
tasks=(worker:0 worker:1 ps:0)
node_pids=()
demo_pid=""
work=$(mktemp -d)
cleaned=0

cleanup() {
  local status=$?
  ((cleaned)) && return
  cleaned=1
  trap '' INT TERM  # a second Ctrl-C does not cut the cleanup short
  local pids=("${node_pids[@]}")
  [[ -z $demo_pid ]] || pids+=("$demo_pid")
  ((${#pids[@]} == 0)) || stop_children "${pids[@]}"
  remove_hosts
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

# ---- The four namespaces, the bridge and a veth pair from each host to it.
make_hosts "${hosts[@]}"
addresses=("${address_of[w0]}" "${address_of[w1]}" "${address_of[ps]}")
bridge_ns="$prefix-br"
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
