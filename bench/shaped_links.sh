#!/usr/bin/env bash
# Bytes between hosts whose links, not the CPU, are the limit: four network namespaces on a
# bridge stand in for the hosts (test/apps/namespace_hosts_lib.sh), each host's egress shaped by
# `tc` (netem delay and rate where the kernel has netem, else tbf: rate only, no delay). For each
# link setting it runs, in the same namespaces and in one run:
#   - troupe-bench transfer between two hosts: raw TCP, the data path (plain and mutual TLS) and
#     CAF's messages;
#   - troupe-bench allreduce (the ring over the data path) and PyTorch's gloo
#     (bench/peers/allreduce_torch.py) on 2 and 4 hosts.
# Prints every JSON line, then one table per setting with each figure's share of the link rate.
# Run as root; everything it makes is removed at the end (namespaces, processes, by pid).
# Usage: bench/shaped_links.sh BUILD_DIR [RATES [DELAY [STEPS]]]
#   RATES: tc rates by ',' (default 1gbit,10gbit; "none" for an unshaped link); DELAY: netem's
#   one-way delay (default 0.5ms; ignored without netem); STEPS: all-reduces per point (default 10).
set -euo pipefail
build=$(realpath "$1")
rates=${2:-1gbit,10gbit}
delay=${3:-0.5ms}
steps=${4:-10}
bench=$build/bench/troupe-bench
[[ -x $bench ]] || { echo "no $bench: build first"; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../test/apps/namespace_hosts_lib.sh"
work=$(mktemp -d)
cleanup() {
  remove_hosts
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT

hosts=(h0 h1 h2 h3)
make_hosts "${hosts[@]}"
has_netem=1
tc -n "$prefix-h0" qdisc add dev eth0 root netem delay 1ms 2>/dev/null || has_netem=0
tc -n "$prefix-h0" qdisc del dev eth0 root 2>/dev/null || true
host_list=$(for h in "${hosts[@]}"; do printf '%s=%s,' "$prefix-$h" "${address_of[$h]}"; done)
host_list=${host_list%,}

# shape RATE: every host's egress limited to RATE ("none": unshaped).
shape() {
  local h bytes burst
  for h in "${hosts[@]}"; do
    tc -n "$prefix-$h" qdisc del dev eth0 root 2>/dev/null || true
    [[ $1 == none ]] && continue
    if ((has_netem)); then
      tc -n "$prefix-$h" qdisc add dev eth0 root netem delay "$delay" rate "$1" limit 100000
    else
      # tbf's bucket must hold a timer tick's worth of bytes at the rate (HZ 250: rate / 250).
      bytes=$(tc_rate_bytes "$1")
      burst=$((bytes / 250 > 262144 ? bytes / 250 : 262144))
      tc -n "$prefix-$h" qdisc add dev eth0 root tbf rate "$1" burst "$burst" latency 50ms
    fi
  done
}
# tc_rate_bytes RATE: bytes a second of "1gbit", "10gbit", "500mbit".
tc_rate_bytes() {
  local n=${1%%[a-z]*} unit=${1##*[0-9]}
  case $unit in
    gbit) echo $((n * 1000000000 / 8)) ;;
    mbit) echo $((n * 1000000 / 8)) ;;
    *) echo "unknown rate unit in $1" >&2; exit 1 ;;
  esac
}

out=$work/lines.jsonl
: >"$out"
IFS=, read -r -a rate_list <<<"$rates"
for rate in "${rate_list[@]}"; do
  shape "$rate"
  tag() { python3 -c 'import json,sys
for l in sys.stdin:
    l=l.strip()
    if l.startswith("{"):
        r=json.loads(l); r["link"]=sys.argv[1]; r["tool"]=sys.argv[2]; print(json.dumps(r))' "$rate" "$1" | tee -a "$out"; }
  "$bench" transfer --hosts "$prefix-h0=${address_of[h0]},$prefix-h1=${address_of[h1]}" --sizes 1M,16M,64M \
    --seconds 2 --json | tag transfer
  "$bench" allreduce --procs 2,4 --mib 1,16,64 --steps "$steps" --hosts "$host_list" --json | tag troupe-allreduce
  /usr/bin/python3 "$here/peers/allreduce_torch.py" --procs 2,4 --mib 1,16,64 --steps "$steps" --hosts "$host_list" \
    --json | tag gloo
done
shape none

if ((has_netem)); then links="netem delay $delay and rate"; else links="tbf rate (this kernel has no netem: no delay)"; fi
echo
echo "links: $links on every host's egress"
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def rate_gbs(link):
    if link == "none": return None
    n = float(link.rstrip("gbitm"))
    return n / 8 * (1 if link.endswith("gbit") else 1e-3)
for link in dict.fromkeys(r["link"] for r in rows):
    line = rate_gbs(link)
    share = lambda x: f"{x:.3f} ({x / line:.0%})" if line else f"{x:.3f}"
    print(f"\n{link}: link {line if line else 'unshaped'} GB/s")
    for r in rows:
        if r["link"] == link and r["tool"] == "transfer" and r["what"] == "round_trip":
            print(f"  round trip 64 B: TCP {r['tcp_us']} us, data path {r['data_path_us']} us, "
                  f"with TLS {r['data_path_tls_us']} us, CAF {r['caf_us']} us")
    for r in rows:
        if r["link"] == link and r["tool"] == "transfer" and r["what"] == "throughput":
            print(f"  {r['bytes'] >> 20:>4} MiB: TCP {share(r['tcp_gb_per_s'])}, data path {share(r['data_path_gb_per_s'])}, "
                  f"with TLS {share(r['data_path_tls_gb_per_s'])}, CAF tensor {share(r['tensor_gb_per_s'])} GB/s")
    ring = {(r["procs"], r["mib"]): r["busbw_gbps"] for r in rows if r["link"] == link and r["tool"] == "troupe-allreduce"}
    gloo = {(int(r["procs"]), r["mib"]): r["busbw_gbps"] for r in rows if r["link"] == link and r["tool"] == "gloo"}
    for key in sorted(ring):
        g = gloo.get(key)
        print(f"  all-reduce {key[0]} hosts, {key[1]:g} MiB: Troupe {share(ring[key])}, gloo {share(g) if g else '-'} GB/s"
              + (f", Troupe/gloo {ring[key] / g:.2f}" if g else ""))
PY
