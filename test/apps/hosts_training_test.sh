#!/usr/bin/env bash
# The training job across three hosts, as a user deploys it (docs/cluster.md, "Training across
# hosts"): three network namespaces (namespace_hosts_lib.sh) stand in for the hosts ps, w0 and
# w1, each running sshd on its own address with a key made here. From w0, troupe-launch --hosts
# starts ps:0 on ps, worker:0 on w0 and worker:1 on w1 over ssh, and troupe-fashion-mnist (the
# MLP) trains:
#   - asynchronously, then with synchronous replicas over mutual TLS (certificates made by the
#     launcher and copied over ssh to w1, whose /tmp is its own, ca.key never; ps and w0 share
#     the launcher's /tmp and find the files in place);
#   - asynchronously with ps:0's process killed (SIGKILL, by the pid its host's pid file holds)
#     after a checkpoint: the launcher starts it again, the chief restores it; then stopped
#     (SIGSTOP): --hang-timeout kills it through its watchdog and it comes back the same way; the
#     job finishes with its accuracy;
#   - with ps:0 killed for good: spare:0, on host w0, takes it over;
#   - stopped by SIGINT to the launcher while it trains;
# and after each, no process of the job is left on any host (`ip netns pids`: sshd alone).
# By hand with TF_CONFIG (no launcher): a ps whose checkpoint directory is not the chief's (a
# mount namespace of its own, as on a host without the shared file system) fails the job at its
# start naming the path and the task; then the same job with one shared directory trains, over
# plain TCP and over mutual TLS (the spec's tls section in TF_CONFIG).
# An unreachable host and a refused ssh login are refused by name, within a bound.
# Whatever ends the test, the EXIT trap stops what it started (by pid) and deletes the namespaces.
# Exit codes: 0 pass, 1 fail, 77 skipped (no namespaces here, no sshd/ssh-keygen, no dataset).
# Usage: hosts_training_test.sh TROUPE_LAUNCH TROUPE_NODE TROUPE_FASHION_MNIST  (about 2 minutes on 2 cores)
set -euo pipefail
launch=$(realpath "$1")
node=$(realpath "$2")
app=$(realpath "$3")
source "$(dirname "$0")/training_test_lib.sh"
source "$(dirname "$0")/namespace_hosts_lib.sh"
for tool in sshd ssh ssh-keygen unshare; do
  command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] || { echo "skipped: no $tool (openssh-server, openssh-client, util-linux)"; exit 77; }
done
sshd_binary=$(command -v sshd || echo /usr/sbin/sshd)
MIN_ACCURACY=0.70  # the MLP after a few hundred steps of 64 examples (0.78-0.82 seen)
job_bound_s=240

work=$(mktemp -d /tmp/troupe-hosts-XXXXXX)
sshd_pids=()
bg_pids=()  # jobs and tasks started in the background
cleaned=0
cleanup() {
  local status=$?
  ((cleaned)) && return
  cleaned=1
  trap '' INT TERM
  ((${#bg_pids[@]} == 0)) || stop_children "${bg_pids[@]}"
  ((${#sshd_pids[@]} == 0)) || stop_children "${sshd_pids[@]}"
  remove_hosts
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
fail() { echo "hosts_training_test: FAILED: $*" >&2; exit 1; }
show_fail() { cat "$1"; shift; fail "$@"; }

hosts=(ps w0 w1)
make_hosts "${hosts[@]}"
ps_host=${address_of[ps]} w0_host=${address_of[w0]} w1_host=${address_of[w1]}
echo "hosts: ps $ps_host, w0 $w0_host, w1 $w1_host (namespaces $prefix-{ps,w0,w1})"

# ---- sshd on each host, for root with a key made here.
ssh-keygen -q -t ed25519 -N '' -f "$work/id" -C troupe-test
ssh-keygen -q -t ed25519 -N '' -f "$work/stranger" -C stranger
ssh-keygen -q -t ed25519 -N '' -f "$work/host_key" -C host
cp "$work/id.pub" "$work/authorized_keys"
mkdir -p /run/sshd  # sshd's privilege separation directory
cat >"$work/sshd_config" <<EOF
HostKey $work/host_key
AuthorizedKeysFile $work/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AcceptEnv none
EOF
# ps and w0 share this machine's /tmp, as hosts sharing a file system would: a job's files, made
# by the launcher in /tmp, are in place there already. w1 has a /tmp of its own, a tmpfs in a
# mount namespace of its sshd into which what /tmp holds now ($work, a build tree there) is bound
# again through an open descriptor of the old one: what the launcher makes in /tmp later, w1 does
# not see, and the launcher copies it there over ssh, as to a host apart.
for h in "${hosts[@]}"; do
  if [[ $h == w1 ]]; then
    ip netns exec "$prefix-$h" unshare -m --propagation private sh -c '
      exec 3</tmp && mount -t tmpfs tmpfs /tmp || exit 1
      for old in /proc/self/fd/3/* /proc/self/fd/3/.[!.]*; do
        name=${old#/proc/self/fd/3/}
        if [ -d "$old" ]; then mkdir "/tmp/$name"; elif [ -f "$old" ]; then : >"/tmp/$name"; else continue; fi
        mount --no-canonicalize --bind "$old" "/tmp/$name" || exit 1
      done
      exec 3<&-
      exec "$2" -D -e -f "$1/sshd_config" -o "ListenAddress=$3" -o "PidFile=$1/sshd-w1.pid"' \
      sh "$work" "$sshd_binary" "${address_of[$h]}" >"$work/sshd-$h.log" 2>&1 &
  else
    ip netns exec "$prefix-$h" "$sshd_binary" -D -e -f "$work/sshd_config" -o "ListenAddress=${address_of[$h]}" \
      -o "PidFile=$work/sshd-$h.pid" >"$work/sshd-$h.log" 2>&1 &
  fi
  sshd_pids+=($!)
  name_of[$!]="sshd on $h"
done
ssh_cmd="ssh -i $work/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
for h in "${hosts[@]}"; do
  until on w0 $ssh_cmd -o BatchMode=yes -o ConnectTimeout=2 "${address_of[$h]}" true 2>/dev/null; do
    ((SECONDS < 30)) || { cat "$work/sshd-$h.log"; fail "sshd on $h did not answer within 30 s"; }
    sleep 0.2
  done
done
echo "sshd answers on the three hosts"

# Only sshd is left on each host once a job has ended: no task outlives the launcher.
only_sshd_left() {
  local h pids pid others
  for h in "${hosts[@]}"; do
    for ((i = 0; i < 50; ++i)); do  # a task's exit after its session ends takes a moment
      others=""
      pids=$(ip netns pids "$prefix-$h")
      for pid in $pids; do
        [[ $(cat "/proc/$pid/comm" 2>/dev/null) == sshd ]] || others+=" $pid($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null))"
      done
      [[ -n $others ]] || break
      sleep 0.2
    done
    [[ -z $others ]] || fail "$1: left running on $h:$others"
  done
}

# descendant PID NAME: the pid of the first process named NAME under PID.
descendant() {
  local child found
  for child in $(ps -o pid= --ppid "$1"); do
    if [[ $(cat "/proc/$child/comm" 2>/dev/null) == "$2" ]]; then echo "$child"; return; fi
    found=$(descendant "$child" "$2")
    if [[ -n $found ]]; then echo "$found"; return; fi
  done
}

hosts_flag="$ps_host,$w0_host,$w1_host"
# The job, started from w0 and bounded: "${launch_job[@]}" --hosts HOSTS LAUNCH_ARGS... -- APP_ARGS....
launch_job=(ip netns exec "$prefix-w0" timeout -k 5 "$job_bound_s" "$launch" --ssh "$ssh_cmd" --node "$node")
train=("$app" --model mlp --threads 1 --json)
# start_job NAME LAUNCH_ARGS...: the job in the background ($job), its output in $work/NAME.out.
start_job() {
  local name=$1
  shift
  "${launch_job[@]}" "$@" >"$work/$name.out" 2>&1 &
  job=$!
  bg_pids+=($job)
  name_of[$job]="the $name job"
}
# job_ended NAME EXPECTED: waits for $job and fails unless it exited with EXPECTED.
job_ended() {
  local rc=0
  wait "$job" || rc=$?
  bg_pids=()
  ((rc == $2)) || show_fail "$work/$1.out" "$1: the launcher exited with $rc, not $2"
}
# accuracy_kept NAME WHAT: the chief's test accuracy in $work/NAME.out is at least MIN_ACCURACY; says so after WHAT.
accuracy_kept() {
  local accuracy
  accuracy=$(field test_accuracy "$work/$1.out")
  at_least "$accuracy" "$MIN_ACCURACY" 0 || show_fail "$work/$1.out" "$1: test accuracy $accuracy < $MIN_ACCURACY"
  echo "$2: test accuracy $accuracy"
}

# ---- Asynchronous training across the three hosts.
"${launch_job[@]}" --hosts "$hosts_flag" -- "${train[@]}" --mode async --steps 400 >"$work/async.out" 2>&1 || show_fail "$work/async.out" "async: the job failed"
grep -q "ps:0 on $ps_host, .*worker:0 on $w0_host, worker:1 on $w1_host" "$work/async.out" ||
  show_fail "$work/async.out" "async: the tasks were not placed ps, w0, w1"
grep -q "^\[ps:0\] .*started on $ps_host:2222" "$work/async.out" || show_fail "$work/async.out" "async: ps:0 did not start on its host"
[[ $(field global_steps "$work/async.out") -ge 400 ]] || show_fail "$work/async.out" "async: fewer than 400 global steps"
accuracy_kept async "async across three hosts, 400 global steps"
only_sshd_left async

# ---- Synchronous replicas over mutual TLS.
"${launch_job[@]}" --hosts "$hosts_flag" --tls -- "${train[@]}" --mode sync --steps 300 >"$work/tls.out" 2>&1 || show_fail "$work/tls.out" "sync over TLS: the job failed"
grep -q '^\[ps:0\] .* started on .*; mutual TLS, certificate ' "$work/tls.out" || show_fail "$work/tls.out" "ps:0 did not use TLS"
! grep -q 'refused a TLS connection' "$work/tls.out" || show_fail "$work/tls.out" "a member was refused"
! grep -qE 'no data connection|refused a data connection' "$work/tls.out" || show_fail "$work/tls.out" "a data connection was not made"
[[ $(field global_steps "$work/tls.out") == 300 ]] || show_fail "$work/tls.out" "sync over TLS: not 300 global steps"
accuracy_kept tls "sync over mutual TLS across three hosts, 300 global steps"
only_sshd_left tls

# ---- ps:0's process killed on its host, started again by the launcher, restored by the chief;
# then stopped (SIGSTOP): found silent by --hang-timeout, killed through its watchdog, started
# again and restored.
newest_checkpoint() { ls -1 "$1" 2>/dev/null | sed -n 's/^ckpt-\([0-9]*\)$/\1/p' | sort -n | tail -1; }
# after_checkpoint NAME JOB DIR SEEN: waits (bounded) for a checkpoint in DIR newer than SEEN.
after_checkpoint() {
  local until=$((SECONDS + 60))
  until [[ -n $(newest_checkpoint "$3") && $(newest_checkpoint "$3") != "$4" ]]; do
    running_child "$2" || show_fail "$work/$1.out" "$1: the job ended before a new checkpoint"
    ((SECONDS < until)) || show_fail "$work/$1.out" "$1: no new checkpoint within 60 s"
    sleep 0.1
  done
}
# ps_pid NAME DIR: ps:0's pid on host ps, from its pid file there.
ps_pid() {
  local pid
  pid=$(cat "$2/ps-0.pid")
  [[ " $(ip netns pids "$prefix-ps" | tr '\n' ' ') " == *" $pid "* ]] || fail "$1: ps:0's pid file names $pid, not a process of host ps"
  echo "$pid"
}
dir=$work/killed
mkdir -p "$dir"
start_job killed --hosts "$hosts_flag" --dir "$dir" --restart-ps 2 --hang-timeout 5 -- "${train[@]}" --mode async \
  --steps 4000 --checkpoint-dir "$dir/ckpt" --save-every-steps 100
after_checkpoint killed "$job" "$dir/ckpt" ""
victim=$(ps_pid killed "$dir")
echo "killed: SIGKILL to ps:0 (pid $victim on host ps) after ckpt-$(newest_checkpoint "$dir/ckpt")"
kill -KILL "$victim"
until grep -q '^\[worker:0\] worker:0: recovered from the loss of ps:0' "$work/killed.out"; do
  running_child "$job" || show_fail "$work/killed.out" "killed: the job ended before it recovered"
  sleep 0.1
done
after_checkpoint killed "$job" "$dir/ckpt" "$(newest_checkpoint "$dir/ckpt")"
victim=$(ps_pid killed "$dir")
echo "killed: SIGSTOP to ps:0 (pid $victim on host ps, started again) after ckpt-$(newest_checkpoint "$dir/ckpt")"
kill -STOP "$victim"
job_ended killed 0
grep -q 'troupe-launch: ps:0 .* exited with 137 .*starting it again (1 of 2)' "$work/killed.out" ||
  show_fail "$work/killed.out" "killed: the launcher did not start ps:0 again after SIGKILL"
grep -q 'troupe-launch: ps:0 (pid [0-9]*) has not answered for [0-9.]* s (stopped or hung): killing it' "$work/killed.out" ||
  show_fail "$work/killed.out" "killed: the stopped ps:0 was not found silent"
grep -q 'troupe-launch: ps:0 .* exited with 137 .*starting it again (2 of 2)' "$work/killed.out" ||
  show_fail "$work/killed.out" "killed: the launcher did not start the stopped ps:0 again"
[[ $(grep -c '^\[worker:0\] worker:0: recovered from the loss of ps:0' "$work/killed.out") -ge 2 ]] ||
  show_fail "$work/killed.out" "killed: the chief did not recover ps:0 twice"
accuracy_kept killed "async with ps:0 killed, then stopped, and restored each time, 4000 global steps"
only_sshd_left killed

# ---- ps:0 lost for good: a spare on another host takes it over (spare:0 on w0; both workers on w1).
dir=$work/spare
mkdir -p "$dir"
start_job spare --hosts "$ps_host,$w0_host,$w1_host:2" --spares 1 --dir "$dir" -- "${train[@]}" --mode async \
  --steps 3000 --checkpoint-dir "$dir/ckpt" --save-every-steps 100
after_checkpoint spare "$job" "$dir/ckpt" ""
grep -q "ps:0 on $ps_host, spare:0 on $w0_host, worker:0 on $w1_host, worker:1 on $w1_host" "$work/spare.out" ||
  show_fail "$work/spare.out" "spare: the tasks were not placed ps, w0, w1, w1"
victim=$(ps_pid spare "$dir")
echo "spare: SIGKILL to ps:0 (pid $victim on host ps) after ckpt-$(newest_checkpoint "$dir/ckpt")"
kill -KILL "$victim"
job_ended spare 0
grep -q "^\[worker:0\] worker:0: recovered from the loss of ps:0 (again at $w0_host:2222, on spare:0" "$work/spare.out" ||
  show_fail "$work/spare.out" "spare: ps:0 was not taken over by spare:0 on w0"
accuracy_kept spare "async with ps:0 lost for good, taken over by spare:0 on host w0"
only_sshd_left spare

# ---- Ctrl-C to the launcher stops every task on every host.
start_job interrupted --hosts "$hosts_flag" -- "${train[@]}" --mode async --steps 100000
until grep -q '^\[job\] global step' "$work/interrupted.out" 2>/dev/null; do
  running_child "$job" || show_fail "$work/interrupted.out" "interrupted: the job ended before it trained"
  ((SECONDS < 300)) || show_fail "$work/interrupted.out" "interrupted: no progress in time"
  sleep 0.1
done
launcher=$(descendant "$job" troupe-launch)
[[ -n $launcher ]] || fail "interrupted: cannot find the launcher's pid under $job"
kill -INT "$launcher"
job_ended interrupted 1
grep -q 'the job failed: stopped by a signal' "$work/interrupted.out" || show_fail "$work/interrupted.out" "interrupted: no word of the stop"
only_sshd_left interrupted
echo "SIGINT to the launcher stopped every task on the three hosts"

# ---- By hand with TF_CONFIG: a ps that does not see the chief's checkpoint directory, then one that does.
cluster="{\"worker\": [\"$w0_host:2222\", \"$w1_host:2222\"], \"ps\": [\"$ps_host:2222\"]}"
tls_section=""  # ', "tls": {...}' for a run over mutual TLS; its paths are relative to $cwd
cwd=$work
tf_config() { echo "{\"cluster\": $cluster$tls_section, \"task\": {\"type\": \"$1\", \"index\": $2}}"; }
ckpt=$work/shared-ckpt
mkdir -p "$ckpt"
by_hand() {  # by_hand NAME PS_WRAPPER...: ps:0, worker:0 and worker:1 on their hosts; waits for the workers
  local name=$1 pid
  shift
  ip netns exec "$prefix-ps" env -C "$cwd" TF_CONFIG="$(tf_config ps 0)" "$@" "$node" >"$work/$name-ps.log" 2>&1 &
  bg_pids+=($!)
  name_of[$!]="troupe-node ps:0 ($name)"
  local ps_pid=$!
  local workers=()
  for k in 0 1; do
    ip netns exec "$prefix-w$k" env -C "$cwd" TF_CONFIG="$(tf_config worker $k)" timeout -k 5 "$job_bound_s" "${train[@]}" --mode sync --steps 200 \
      --checkpoint-dir "$ckpt" --startup-timeout-s 60 >"$work/$name-w$k.log" 2>&1 &
    workers+=($!)
    bg_pids+=($!)
  done
  # The chief's end decides: worker:1 would wait for its initialisation until its own bound.
  worker_rc=(0 0)
  wait "${workers[0]}" || worker_rc[0]=$?
  if ((worker_rc[0] == 0)); then wait "${workers[1]}" || worker_rc[1]=$?; fi
  stop_children "${bg_pids[@]}"
  bg_pids=()
}
# The ps's own view of the file system: a tmpfs over the checkpoint directory, as on a host that
# does not mount the chief's.
by_hand unshared unshare -m sh -c 'mount -t tmpfs tmpfs "$0" && exec "$@"' "$ckpt"
((worker_rc[0] != 0)) || show_fail "$work/unshared-w0.log" "a ps that does not see the checkpoint directory did not fail the chief"
grep -q "task ps:0: the checkpoint directory $ckpt here is not the one worker:0 (the chief) writes into" "$work/unshared-w0.log" ||
  show_fail "$work/unshared-w0.log" "the chief's error does not name the task and the path"
echo "a ps without the shared checkpoint directory fails the start: $(grep -o "task ps:0: the checkpoint directory .* (the chief) writes into" "$work/unshared-w0.log" | head -1)"
by_hand tf_config
((worker_rc[0] == 0)) || show_fail "$work/tf_config-w0.log" "TF_CONFIG by hand: worker:0 failed"
((worker_rc[1] == 0)) || show_fail "$work/tf_config-w1.log" "TF_CONFIG by hand: worker:1 failed"
[[ $(field global_steps "$work/tf_config-w0.log") == 200 ]] || show_fail "$work/tf_config-w0.log" "TF_CONFIG: not 200 global steps"
compgen -G "$ckpt/ckpt-200" >/dev/null || fail "TF_CONFIG: no checkpoint ckpt-200 in $ckpt"
echo "TF_CONFIG by hand: sync across three hosts, 200 global steps, checkpoint $ckpt/ckpt-200"
only_sshd_left tf_config
# The same over mutual TLS: certificates made by troupe-node --make-certs, the tls section in
# TF_CONFIG, each process started in the certificates' directory.
echo "{\"cluster\": $cluster}" >"$work/plain.json"
"$node" --make-certs "$work/certs" --cluster "$work/plain.json" >/dev/null
tls_section=", \"tls\": $(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["tls"]))' "$work/certs/cluster.json")"
cwd=$work/certs
ckpt=$work/tls-ckpt
by_hand tf_config_tls
((worker_rc[0] == 0 && worker_rc[1] == 0)) || show_fail "$work/tf_config_tls-w0.log" "TF_CONFIG over TLS: a worker failed (${worker_rc[*]})"
grep -q 'started on .*; mutual TLS, certificate ' "$work/tf_config_tls-ps.log" || show_fail "$work/tf_config_tls-ps.log" "TF_CONFIG: ps:0 did not use TLS"
! grep -q 'refused a TLS connection' "$work"/tf_config_tls-*.log || fail "TF_CONFIG over TLS: a member was refused"
[[ $(field global_steps "$work/tf_config_tls-w0.log") == 200 ]] || show_fail "$work/tf_config_tls-w0.log" "TF_CONFIG over TLS: not 200 global steps"
echo "TF_CONFIG by hand over mutual TLS: sync across three hosts, 200 global steps"
only_sshd_left tf_config_tls

# ---- A host that does not answer and a login that is refused: refused by name, within a bound.
# refused_start NAME HOSTS SSH_COMMAND TEXT: the launcher exits 1 before anything starts, saying TEXT.
refused_start() {
  local name=$1 rc=0
  on w0 timeout 60 "$launch" --hosts "$2" --ssh "$3" --node "$node" -- "${train[@]}" >"$work/$name.out" 2>&1 || rc=$?
  ((rc == 1)) || show_fail "$work/$name.out" "$name: exit $rc, not 1"
  grep -q "$4" "$work/$name.out" || show_fail "$work/$name.out" "$name: no '$4'"
  echo "$name: $(grep -o "host .*" "$work/$name.out" | head -1)"
}
nobody=${ps_host%.*}.250
refused_start unreachable "$ps_host,$w0_host,$nobody" "$ssh_cmd" "host $nobody: cannot reach it or log in over ssh"
refused_start stranger "$hosts_flag" "${ssh_cmd/$work\/id/$work/stranger}" \
  "host $ps_host: cannot reach it or log in over ssh (.*Permission denied"
only_sshd_left refused
echo "hosts_training_test: passed"
