# Hosts on one machine, for the tests that cross a network (source it after `set -euo pipefail`):
# network namespaces named after the test's pid, each a host with its own address on a /24,
# joined by a Linux bridge in a namespace of its own.
#
#   $prefix-NAME  eth0 SUBNET.K/24 --veth-- NAME \
#   ...                                          br0 in $prefix-br (no address)
#
# SUBNET is the first 10.213.N (172.29.N or 192.168.N where routes cover all of 10.213.0.0/16)
# that overlaps no route of this machine. The namespaces have no link to any other network: every
# packet stays between them. make_hosts exits 77 (skipped) saying why where namespaces, veth
# pairs or bridges cannot be made here (not root, no iproute2, a kernel without them).
#
# The test calls remove_hosts from its EXIT trap (after stopping its processes): deleting the
# namespaces removes the veth pairs and the bridge with them.
#
# Also: running_child PID and stop_children PIDS... (SIGTERM, then SIGKILL $stop_bound_s later),
# which only ever signal a child of this shell; name_of[PID] names a child in messages and
# exit_of[PID] is its exit code once stopped.

prefix="troupe-$$"
made_namespaces=()
declare -A address_of name_of exit_of
stop_bound_s=${stop_bound_s:-10}

# Is PID a process this shell started that has not exited? Only a child of this shell is
# ever signalled: once a process has exited and been reaped, its pid could be another's.
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
      echo "${name_of[$pid]:-pid $pid} (pid $pid) did not stop within $stop_bound_s s of SIGTERM: killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  for pid in "$@"; do
    exit_of[$pid]=0
    wait "$pid" 2>/dev/null || exit_of[$pid]=$?
  done
}

# Setting up a namespace, a veth pair or a bridge fails only where this machine cannot make them:
# the test is skipped, saying why.
skip_unless() {
  local what=$1 out
  shift
  if ! out=$("$@" 2>&1); then
    echo "skipped: cannot make $what here ($*: ${out:-failed})"
    exit 77
  fi
}

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

# The first free /24 (above): prints its first three octets.
free_subnet() {
  local routes base third route dest len clash
  routes=$(ip -4 -o route show table all | awk '
    $1 ~ /^(unicast|local|broadcast|multicast|anycast|unreachable|blackhole|prohibit|throw|nat)$/ {print $2; next}
    {print $1}' | grep -v '^default$' || true)
  for base in 10.213 172.29 192.168; do
    for third in $(seq 0 255); do
      clash=0
      for route in $routes; do
        dest=${route%/*}
        len=32
        [[ $route == */* ]] && len=${route#*/}
        [[ $dest =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || continue
        if overlaps "$base.$third.0" 24 "$dest" "$len"; then clash=1; break; fi
      done
      if ((!clash)); then echo "$base.$third"; return 0; fi
    done
  done
  return 1
}

# make_hosts NAME...: the namespaces $prefix-NAME, the bridge, and the addresses SUBNET.1, .2, ...
# in the order given (address_of[NAME]).
make_hosts() {
  command -v ip >/dev/null || { echo "skipped: no 'ip' command (iproute2) to make network namespaces"; exit 77; }
  local subnet ns i=0 name
  subnet=$(free_subnet) || { echo "FAIL: every /24 of 10.213/16, 172.29/16 and 192.168/16 overlaps a route of this machine"; exit 1; }
  for ns in "$prefix-br" "${@/#/$prefix-}"; do
    skip_unless "network namespaces" ip netns add "$ns"
    made_namespaces+=("$ns")
    ip -n "$ns" link set lo up
  done
  skip_unless "a bridge" ip -n "$prefix-br" link add br0 type bridge
  ip -n "$prefix-br" link set br0 up
  for name in "$@"; do
    i=$((i + 1))
    skip_unless "a veth pair" ip -n "$prefix-$name" link add eth0 type veth peer name "$name" netns "$prefix-br"
    ip -n "$prefix-br" link set "$name" master br0
    ip -n "$prefix-br" link set "$name" up
    address_of[$name]="$subnet.$i"
    ip -n "$prefix-$name" addr add "$subnet.$i/24" dev eth0
    ip -n "$prefix-$name" link set eth0 up
  done
}

# on NAME COMMAND...: COMMAND in host NAME's namespace.
on() {
  local name=$1
  shift
  ip netns exec "$prefix-$name" "$@"
}

# Deletes the namespaces; a process still in one (the test stops what it started first) is
# stopped by its pid, SIGTERM then SIGKILL 5 s later, so none outlives the test.
remove_hosts() {
  local ns pids i
  for ns in "${made_namespaces[@]}"; do
    pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
    [[ -z ${pids// /} ]] && continue
    echo "stopping what is left in namespace $ns: $pids"
    # shellcheck disable=SC2086  # a list of pids
    kill -TERM $pids 2>/dev/null || true
    for ((i = 0; i < 50; ++i)); do
      [[ -z $(ip netns pids "$ns" 2>/dev/null) ]] && break
      sleep 0.1
    done
    pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
    # shellcheck disable=SC2086
    [[ -z ${pids// /} ]] || kill -KILL $pids 2>/dev/null || true
  done
  for ns in "${made_namespaces[@]}"; do
    ip netns delete "$ns" 2>/dev/null || echo "warning: could not delete network namespace $ns"
  done
  made_namespaces=()
}
