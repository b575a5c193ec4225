#!/usr/bin/env python3
"""What deploy/'s job specs must say for their tasks to find each other (image_test.sh).

  deploy_specs.py check DEPLOY_DIR
      deploy/compose.yaml: every service runs the image with TF_CONFIG, all of them the same
      cluster; a task's address is its own service's name (its hostname) on port 2222; the ps
      runs troupe-node and restarts on failure, the workers troupe-fashion-mnist with the
      checkpoint directory; the checkpoint volume is mounted at that directory in every service.
      deploy/kubernetes/: each job's headless Service publishes not-ready pods and selects the
      pods of its StatefulSet (serviceName, labels); the task counts in troupe-job equal the
      replicas; each container's `sh -c` script parses and sources tf_config.sh, which, run as
      each pod would (its name faked with a `hostname` on PATH), gives every pod the same
      cluster with its own DNS name as its task's address; the shared claim is ReadWriteMany
      and mounted at the workers' checkpoint directory in every pod.
  deploy_specs.py compose-script DEPLOY_DIR TRAINING_FLAGS...
      A sh script that runs compose.yaml's job in one container, each task's service name
      mapped to a loopback address of its own (the container's /etc/hosts): the services'
      commands and TF_CONFIG as they are, the workers' --model/--epochs/--steps replaced by
      TRAINING_FLAGS. It stops the ps tasks (SIGTERM) when the workers have finished, prints each
      task's lines prefixed with [service], and exits 0 when every task exited 0.
  deploy_specs.py compose-hosts DEPLOY_DIR
      The service names with the loopback address compose-script expects each at, "name:ip" per line.
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile

import yaml

PORT = 2222
errors = []


def fail(what):
    errors.append(what)


def flag_value(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv and argv.index(flag) + 1 < len(argv) else None


def load_compose(deploy):
    with open(os.path.join(deploy, "compose.yaml")) as f:
        return yaml.safe_load(f)["services"]


def check_compose(deploy):
    services = load_compose(deploy)
    clusters = {}
    mounts = {}
    checkpoint_dirs = set()
    for name, s in services.items():
        where = f"compose.yaml: service {name}"
        if s.get("image") != "troupe:latest":
            fail(f"{where}: image is {s.get('image')!r}, not troupe:latest")
        env = s.get("environment") or {}
        if isinstance(env, list):
            env = dict(e.split("=", 1) for e in env)
        if "TF_CONFIG" not in env:
            fail(f"{where}: no TF_CONFIG")
            continue
        spec = json.loads(env["TF_CONFIG"])
        clusters[name] = spec["cluster"]
        job, index = spec["task"]["type"], spec["task"]["index"]
        address = spec["cluster"][job][index]
        if address != f"{name}:{PORT}":
            fail(f"{where}: its task {job}:{index} is at {address}, not at its own name {name}:{PORT}")
        if s.get("hostname", name) != name:
            fail(f"{where}: hostname {s['hostname']} is not the service's name")
        command = s.get("command") or []
        if isinstance(command, str):
            command = shlex.split(command)
        program = {"ps": "troupe-node", "worker": "troupe-fashion-mnist"}.get(job)
        if not command or command[0] != program:
            fail(f"{where}: task {job}:{index} runs {command[:1]}, not {program}")
        if job == "ps" and s.get("restart") != "on-failure":
            fail(f"{where}: a ps task's restart policy is {s.get('restart')!r}, not on-failure")
        if job == "worker":
            checkpoint_dirs.add(flag_value(command, "--checkpoint-dir"))
        mounts[name] = {v.split(":")[0]: v.split(":")[1] for v in s.get("volumes") or []}
    if len({json.dumps(c, sort_keys=True) for c in clusters.values()}) > 1:
        fail(f"compose.yaml: the services' TF_CONFIG clusters differ: {clusters}")
    for name, cluster in clusters.items():
        for job, tasks in cluster.items():
            for address in tasks:
                host = address.rsplit(":", 1)[0]
                if host not in services:
                    fail(f"compose.yaml: {name}'s spec names {address}, which is no service")
    if len(checkpoint_dirs) != 1 or None in checkpoint_dirs:
        fail(f"compose.yaml: the workers' --checkpoint-dir differ or are missing: {checkpoint_dirs}")
    else:
        path = checkpoint_dirs.pop()
        for name, m in mounts.items():
            if path not in m.values():
                fail(f"compose.yaml: service {name} does not mount the checkpoint directory {path}")
        if len({tuple(sorted(m.items())) for m in mounts.values()}) > 1:
            fail(f"compose.yaml: the services mount different volumes: {mounts}")


def load_kubernetes(deploy):
    docs = []
    folder = os.path.join(deploy, "kubernetes")
    for f in sorted(os.listdir(folder)):
        if f.endswith(".yaml"):
            with open(os.path.join(folder, f)) as stream:
                docs += [(f, d) for d in yaml.safe_load_all(stream) if d]
    return docs


def pod_tf_config(script_dir, fqdn):
    """TF_CONFIG as tf_config.sh sets it in the pod whose /etc/hosts names it `fqdn`."""
    with tempfile.TemporaryDirectory() as bin_dir:
        fake = os.path.join(bin_dir, "hostname")
        with open(fake, "w") as f:
            f.write(f"#!/bin/sh\necho {fqdn}\n")
        os.chmod(fake, 0o755)
        env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", TROUPE_JOB_DIR=script_dir)
        out = subprocess.run(["sh", "-c", f'. "{script_dir}/tf_config.sh" >/dev/null && printf %s "$TF_CONFIG"'],
                             env=env, capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"kubernetes: tf_config.sh in pod {fqdn} failed: {out.stderr.strip()}")
        return None
    return json.loads(out.stdout)


def check_kubernetes(deploy, compose_checkpoint_dir):
    docs = load_kubernetes(deploy)
    by_kind = {}
    for f, d in docs:
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = (f, d)
    config = by_kind.get("ConfigMap", {}).get("troupe-job")
    if not config:
        fail("kubernetes: no ConfigMap troupe-job")
        return
    data = config[1]["data"]
    claims = by_kind.get("PersistentVolumeClaim", {})
    for name, (f, claim) in claims.items():
        if "ReadWriteMany" not in claim["spec"].get("accessModes", []):
            fail(f"kubernetes/{f}: claim {name} is not ReadWriteMany")
    sets = by_kind.get("StatefulSet", {})
    if sorted(sets) != ["troupe-ps", "troupe-worker"]:
        fail(f"kubernetes: StatefulSets {sorted(sets)}, not troupe-ps and troupe-worker")
        return
    with tempfile.TemporaryDirectory() as script_dir:
        for key, value in data.items():
            with open(os.path.join(script_dir, key), "w") as f:
                f.write(value)
        clusters = {}
        for name, (f, st) in sets.items():
            where = f"kubernetes/{f}: StatefulSet {name}"
            job = name.removeprefix("troupe-")
            spec = st["spec"]
            if str(spec["replicas"]) != data[f"{job}_tasks"].strip():
                fail(f"{where}: {spec['replicas']} replicas, but troupe-job's {job}_tasks is {data[f'{job}_tasks']}")
            service = by_kind.get("Service", {}).get(spec["serviceName"])
            pod = spec["template"]
            labels = pod["metadata"]["labels"]
            if not service:
                fail(f"{where}: no Service {spec['serviceName']}")
            else:
                s = service[1]["spec"]
                if s.get("clusterIP") != "None" or not s.get("publishNotReadyAddresses"):
                    fail(f"{where}: Service {spec['serviceName']} is not headless with publishNotReadyAddresses")
                if any(labels.get(k) != v for k, v in s["selector"].items()):
                    fail(f"{where}: Service {spec['serviceName']} selects {s['selector']}, the pods have {labels}")
                if PORT not in [p["port"] for p in s.get("ports", [])]:
                    fail(f"{where}: Service {spec['serviceName']} has no port {PORT}")
            if any(labels.get(k) != v for k, v in spec["selector"]["matchLabels"].items()):
                fail(f"{where}: its selector does not match its pods' labels")
            (container,) = pod["spec"]["containers"]
            command = " ".join(container.get("command", []) + container.get("args", []))
            program = {"ps": "troupe-node", "worker": "troupe-fashion-mnist"}[job]
            if container["command"][:2] == ["sh", "-c"]:
                syntax = subprocess.run(["sh", "-n", "-c", container["command"][2]], capture_output=True, text=True)
                if syntax.returncode != 0:
                    fail(f"{where}: the container's sh -c script does not parse: {syntax.stderr.strip()}")
            if ". /etc/troupe/tf_config.sh" not in command or program not in command:
                fail(f"{where}: the container does not source /etc/troupe/tf_config.sh and run {program}: {command}")
            if job == "worker" and f"--checkpoint-dir {compose_checkpoint_dir}" not in command:
                fail(f"{where}: the workers' --checkpoint-dir is not {compose_checkpoint_dir}")
            if PORT not in [p["containerPort"] for p in container.get("ports", [])]:
                fail(f"{where}: the container has no port {PORT}")
            volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            if volumes.get(mounts.get("/etc/troupe"), {}).get("configMap", {}).get("name") != "troupe-job":
                fail(f"{where}: troupe-job is not mounted at /etc/troupe")
            claim = volumes.get(mounts.get(compose_checkpoint_dir), {}).get("persistentVolumeClaim", {})
            if claim.get("claimName") not in claims:
                fail(f"{where}: no claim of the job's mounted at {compose_checkpoint_dir}")
            for ordinal in range(int(spec["replicas"])):
                fqdn = f"{name}-{ordinal}.{spec['serviceName']}.ml-team.svc.cluster.local"
                tf_config = pod_tf_config(script_dir, fqdn)
                if not tf_config:
                    continue
                clusters[fqdn] = tf_config["cluster"]
                task = tf_config["task"]
                if (task["type"], task["index"]) != (job, ordinal):
                    fail(f"kubernetes: pod {fqdn} is task {task}, not {job}:{ordinal}")
                elif tf_config["cluster"][job][ordinal:ordinal + 1] != [f"{fqdn}:{PORT}"]:
                    fail(f"kubernetes: pod {fqdn}'s task is at {tf_config['cluster'][job][ordinal:ordinal + 1]}, "
                         f"not at its own name")
        if len({json.dumps(c, sort_keys=True) for c in clusters.values()}) != 1:
            fail(f"kubernetes: the pods' clusters differ: {clusters}")
        elif set(next(iter(clusters.values()))) != {"ps", "worker"}:
            fail(f"kubernetes: the cluster's jobs are {sorted(next(iter(clusters.values())))}")


def loopback_hosts(services):
    return {name: f"127.0.0.{2 + i}" for i, name in enumerate(sorted(services))}


def compose_script(deploy, flags):
    services = load_compose(deploy)
    replaced = {"--model", "--epochs", "--steps"}
    lines = ["set -u", "status=0"]
    workers, ps = [], []
    for name, s in services.items():
        spec = json.loads(s["environment"]["TF_CONFIG"])
        argv = list(s["command"])
        if argv[0] == "troupe-fashion-mnist":
            kept = [a for i, a in enumerate(argv[1:], 1) if a not in replaced and argv[i - 1] not in replaced]
            argv = [argv[0]] + kept + flags
        lines.append(f"TF_CONFIG={shlex.quote(s['environment']['TF_CONFIG'])} {shlex.join(argv)} >/tmp/{name}.log 2>&1 &")
        lines.append(f"pid_{name}=$!")
        (ps if spec["task"]["type"] == "ps" else workers).append(name)
    lines += [f"wait $pid_{name} || status=$?" for name in workers]
    lines += [f"kill -TERM $pid_{name}; wait $pid_{name} || status=1" for name in ps]
    lines += [f"sed 's/^/[{name}] /' /tmp/{name}.log" for name in ps + workers]
    lines.append("exit $status")
    return "\n".join(lines) + "\n"


def main():
    command, deploy = sys.argv[1], sys.argv[2]
    if command == "check":
        check_compose(deploy)
        workers = [s for s in load_compose(deploy).values() if s["command"][0] == "troupe-fashion-mnist"]
        check_kubernetes(deploy, flag_value(workers[0]["command"], "--checkpoint-dir") if workers else "/checkpoints")
        for e in errors:
            print(f"deploy_specs.py: {e}", file=sys.stderr)
        return 1 if errors else 0
    if command == "compose-script":
        sys.stdout.write(compose_script(deploy, sys.argv[3:]))
        return 0
    if command == "compose-hosts":
        for name, ip in loopback_hosts(load_compose(deploy)).items():
            print(f"{name}:{ip}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
