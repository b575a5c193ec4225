#!/usr/bin/env bash
# The container image (Dockerfile) and the job specs built on it (deploy/), with buildah on a
# Debian 12 root of debootstrap's (no registry needed):
#   1. debootstrap a minbase bookworm root and import it as the base image;
#   2. buildah bud the Dockerfile on it (BASE), the host's ccache mounted into the build when
#      there is one (objects the same as the host build's are not compiled again);
#   3. in a container of the image: ldd finds every library of every installed program and
#      library, troupe-node --help answers, and a job of 1 ps + 2 workers trains on loopback
#      with troupe-launch to its summary line;
#   4. compose.yaml's job in one container, each service's name in /etc/hosts at a loopback
#      address of its own: the services' own commands and TF_CONFIG (shorter training), each task
#      listening on its name; the chief's summary and checkpoint line;
#   5. deploy_specs.py check: what compose.yaml and the manifests must agree on.
# Exits 77 (skipped) when not root, without buildah, debootstrap or python3's yaml, when buildah
# cannot make a container here or deb.debian.org cannot be reached. Every container and image it
# made is removed at exit, by name; the debootstrap root too. Downloaded .debs are kept in
# WORK_DIR/image-test-debs for the next run.
#
# Usage: image_test.sh SOURCE_DIR WORK_DIR   (WORK_DIR: where the root is made, e.g. the build dir)
set -euo pipefail
src=$(cd "$1" && pwd)
work_parent=$(mkdir -p "$2" && cd "$2" && pwd)
mirror=${TROUPE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
say() { echo "image_test: $(date +%T) $*"; }
skip() { echo "image_test: SKIPPED: $*"; exit 77; }
die() { echo "image_test: FAILED: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || skip "not root (debootstrap and buildah's chroot isolation need it)"
command -v buildah >/dev/null || skip "no buildah (tools/setup.sh installs it)"
command -v debootstrap >/dev/null || skip "no debootstrap (tools/setup.sh installs it)"
python3 -c 'import yaml' 2>/dev/null || skip "no yaml module for python3 (python3-yaml; tools/setup.sh installs it)"

id=$$
base=localhost/troupe-test-base-$id
image=localhost/troupe-test-$id
containers=(troupe-test-probe-$id troupe-test-import-$id troupe-test-run-$id troupe-test-compose-$id)
work=$(mktemp -d "$work_parent/image-test.XXXXXX")
cleanup() {
  local c
  for c in "${containers[@]}"; do
    if buildah inspect --type container "$c" >/dev/null 2>&1; then
      buildah umount "$c" >/dev/null 2>&1 || true
      buildah rm "$c" >/dev/null || echo "image_test: could not remove container $c" >&2
    fi
  done
  for c in "$image" "$base"; do
    if buildah inspect --type image "$c" >/dev/null 2>&1; then
      buildah rmi "$c" >/dev/null || echo "image_test: could not remove image $c" >&2
    fi
  done
  rm -rf "$work"
}
trap cleanup EXIT

# buildah can make and mount a container here (the storage driver works).
buildah from --name "troupe-test-probe-$id" scratch >/dev/null 2>"$work/probe.log" &&
  buildah mount "troupe-test-probe-$id" >/dev/null 2>>"$work/probe.log" ||
  skip "buildah cannot make a container here: $(tail -1 "$work/probe.log")"
buildah umount "troupe-test-probe-$id" >/dev/null
buildah rm "troupe-test-probe-$id" >/dev/null

host=${mirror#*://}
host=${host%%/*}
timeout 10 bash -c "exec 3<>/dev/tcp/$host/80" 2>/dev/null || skip "$host cannot be reached (debootstrap needs it)"

# 1. The base: Debian 12 minbase, as debian:12 would be (PATH set, no apt lists).
say "debootstrap bookworm (minbase) from $mirror"
debs=$work_parent/image-test-debs
mkdir -p "$debs"
debootstrap --variant=minbase --cache-dir="$debs" bookworm "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { tail -20 "$work/debootstrap.log"; die "debootstrap (its log above)"; }
rm -rf "$work/root/var/lib/apt/lists/"* "$work/root/var/cache/apt/archives/"*.deb
# debian:12's package sources: the release, its updates and its security updates (the versions a
# host set up from the same sources has, so that the host's ccache can hit).
rm -f "$work/root/etc/apt/sources.list"
cat >"$work/root/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${TROUPE_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
ctr=$(buildah from --name "troupe-test-import-$id" scratch)
mnt=$(buildah mount "$ctr")
cp -a "$work/root/." "$mnt/"
buildah umount "$ctr" >/dev/null
rm -rf "$work/root"
buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd bash "$ctr"
buildah commit --quiet --rm "$ctr" "$base" >/dev/null
buildah run --isolation chroot "$(buildah from --name "troupe-test-probe-$id" "$base")" -- true 2>"$work/probe.log" ||
  skip "buildah cannot run a container here: $(tail -1 "$work/probe.log")"
buildah rm "troupe-test-probe-$id" >/dev/null

# 2. The image.
cache=()
ccache_dir=${CCACHE_DIR:-$HOME/.cache/ccache}
if [[ -d "$ccache_dir" ]]; then cache=(--volume "$ccache_dir:/ccache" --build-arg CCACHE_DIR=/ccache); fi
say "buildah bud ${cache[*]:+(with $ccache_dir)}"
started=$SECONDS
buildah bud --isolation chroot --pull=never --build-arg BASE="$base" "${cache[@]}" \
  -t "$image" -f "$src/Dockerfile" "$src" >"$work/bud.log" 2>&1 ||
  { tail -40 "$work/bud.log"; die "buildah bud (the end of its log above)"; }
say "image built in $((SECONDS - started)) s: $(buildah images --format '{{.Size}}' "$image")"

# 3. The programs in the image.
ctr=$(buildah from --name "troupe-test-run-$id" "$image")
in_image() { buildah run --isolation chroot "$ctr" -- "$@"; }
[[ $(in_image id -un) == troupe ]] || die "the image's commands do not run as the user troupe"
in_image sh -c 'for f in /opt/troupe/bin/* /opt/troupe/lib/*.so; do echo "== $f"; ldd "$f"; done' >"$work/ldd.txt"
[[ $(grep -c '^== ' "$work/ldd.txt") -ge 10 ]] || { cat "$work/ldd.txt"; die "fewer programs and libraries in /opt/troupe than expected"; }
if grep -q 'not found' "$work/ldd.txt"; then
  grep -E '^== |not found' "$work/ldd.txt"
  die "the image lacks libraries its programs load (above)"
fi
in_image troupe-node --help >"$work/node_help.txt" || die "troupe-node --help failed"
grep -q 'troupe-node: one process' "$work/node_help.txt" || { cat "$work/node_help.txt"; die "troupe-node --help said something else"; }

training=(--model mlp --steps 40 --warmup-steps 5 --batch 32 --threads 1 --startup-timeout-s 30)
say "1 ps + 2 workers with troupe-launch"
in_image sh -c "cd /tmp && timeout 120 troupe-launch --ps 1 --workers 2 -- troupe-fashion-mnist --mode async ${training[*]}" \
  >"$work/launch.log" 2>&1 || { tail -30 "$work/launch.log"; die "the job under troupe-launch failed"; }
grep -Eq '^\[worker:0\] done: async on 2 workers, [0-9]+ global steps, .*test accuracy 0\.[0-9]+' "$work/launch.log" ||
  { tail -30 "$work/launch.log"; die "the job under troupe-launch printed no summary"; }

# 4. compose.yaml's job, each task on the address its service's name has.
hosts=()
while read -r h; do hosts+=(--add-host "$h"); done < <(python3 "$src/test/deploy/deploy_specs.py" compose-hosts "$src/deploy")
ctr=$(buildah from --name "troupe-test-compose-$id" "${hosts[@]}" "$image")
python3 "$src/test/deploy/deploy_specs.py" compose-script "$src/deploy" "${training[@]}" >"$work/compose.sh"
buildah copy --chown 1000:1000 "$ctr" "$work/compose.sh" /tmp/compose.sh >/dev/null
say "compose.yaml's job: ${hosts[*]}"
buildah run --isolation chroot "$ctr" -- timeout 120 sh /tmp/compose.sh >"$work/compose.log" 2>&1 ||
  { tail -40 "$work/compose.log"; die "compose.yaml's job failed"; }
grep -Eq '^\[worker0\] done: async on 2 workers, [0-9]+ global steps, .*test accuracy 0\.[0-9]+' "$work/compose.log" ||
  { tail -40 "$work/compose.log"; die "compose.yaml's chief printed no summary"; }
grep -q '^\[worker0\] checkpoints: .* written into /checkpoints' "$work/compose.log" ||
  { tail -40 "$work/compose.log"; die "compose.yaml's chief wrote no checkpoint into /checkpoints"; }
grep -q '^\[ps0\] .*troupe-node ps:0: stopped' "$work/compose.log" ||
  { tail -40 "$work/compose.log"; die "compose.yaml's ps task did not stop cleanly"; }

# 5. What the specs must agree on.
python3 "$src/test/deploy/deploy_specs.py" check "$src/deploy" || die "deploy/'s specs (above)"
say "ok"
