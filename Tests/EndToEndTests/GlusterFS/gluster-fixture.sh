#!/usr/bin/env bash
# A real GlusterFS volume for the shared-storage end-to-end tests (GlusterFSTests.swift): a replica-2
# volume on two brick folders of this machine, mounted twice through GlusterFS's FUSE client, as two
# receivers' machines would mount one volume. Needs root, /dev/fuse and Debian's glusterfs-server and
# glusterfs-client (scripts/install-deps.sh installs them).
#
#   gluster-fixture.sh up WORKDIR    starts glusterd if it is not running, makes the volume on
#                                    WORKDIR/brick1 and WORKDIR/brick2, mounts it at WORKDIR/mnt-a and
#                                    WORKDIR/mnt-b, waits until a file written through one mount reads
#                                    back through the other, and prints the two mountpoints (one a line)
#   gluster-fixture.sh down WORKDIR  unmounts both, stops and deletes the volume, removes the bricks;
#                                    stops glusterd when no volume is left and this script started it
#
# The volume is named after WORKDIR (capture-<its name>-<hash of its path>), so parallel runs on
# different folders do not clash. `up` first takes down whatever a killed earlier run of the same
# WORKDIR left (mounts, volume, bricks). Runs of the script are serialized with a lock, as the
# gluster command line refuses concurrent transactions. Only the mountpoints go to standard output;
# progress and errors go to standard error.
set -euo pipefail
# Descriptors the caller left open (Foundation's Process watches one to learn that the script
# exited) must not reach the daemons this script starts, or the caller waits for them to exit too.
for descriptor in /proc/$$/fd/*; do
  number=${descriptor##*/}
  if [ "$number" -gt 2 ] 2>/dev/null; then eval "exec $number>&-" 2>/dev/null || true; fi
done

readonly fixture_lock=/run/lock/capture-gluster-fixture.lock
# Where Debian's glusterd.service keeps the daemon's pid, so that a glusterd started either way is found.
readonly glusterd_pid_file=/run/glusterd.pid
# The pid of the glusterd this script started: only that one is stopped when no volume is left.
readonly started_marker=/run/capture-gluster-fixture.glusterd
readonly live_deadline_seconds=60

log() { echo "gluster-fixture: $*" >&2; }
fail() { log "$*"; exit 1; }

# The gluster command line, without prompts, never hanging on an unresponsive glusterd.
cli() { timeout 120 gluster --mode=script "$@"; }

# The volume name for a work folder: gluster allows letters, digits, - and _ (at most 64 characters).
volume_name() {
  local workdir=$1 base hash
  base=$(printf '%s' "$(basename "$workdir")" | tr -c 'A-Za-z0-9_-' '-' | cut -c1-32)
  hash=$(printf '%s' "$workdir" | sha256sum | cut -c1-8)
  printf 'capture-%s-%s' "$base" "$hash"
}

# From the kernel's mount table, not stat(2): a mount whose client died answers stat with ENOTCONN.
is_mounted() { awk -v mountpoint="$1" '$5 == mountpoint { found = 1 } END { exit !found }' /proc/self/mountinfo; }
is_unmounted() { ! is_mounted "$1"; }

# Whether process `pid` runs: a killed process not yet reaped (a zombie) does not.
is_running() { [ -r "/proc/$1/stat" ] && awk '{ exit ($3 == "Z" || $3 == "X") }' "/proc/$1/stat" 2>/dev/null; }
process_gone() { ! is_running "$1"; }

# The running glusterd's pid, or nothing.
glusterd_pid() {
  local pid
  for pid in $(cat "$glusterd_pid_file" 2>/dev/null || true) $(pgrep -x glusterd || true); do
    if is_running "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = glusterd ]; then
      echo "$pid"
      return 0
    fi
  done
}

# Waits until `condition` (a command) succeeds, for at most `seconds`; false when it never did.
wait_until() {
  local seconds=$1; shift
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

glusterd_answers() { cli volume list >/dev/null 2>&1; }

start_glusterd() {
  if [ -n "$(glusterd_pid)" ]; then
    wait_until 30 glusterd_answers || fail "glusterd runs but does not answer: see /var/log/glusterfs/glusterd.log"
    return 0
  fi
  log "starting glusterd"
  # No systemd here: run the daemon as Debian's glusterd.service does. It forks into the background;
  # its output goes to its log, never to a pipe of whoever ran this script, and it must not keep the
  # fixture's lock (descriptor 9) open for as long as it runs.
  /usr/sbin/glusterd -p "$glusterd_pid_file" --log-level WARNING </dev/null >/dev/null 2>&1 9>&- \
    || fail "glusterd did not start: see /var/log/glusterfs/glusterd.log"
  wait_until 30 glusterd_answers || fail "glusterd started but does not answer: see /var/log/glusterfs/glusterd.log"
  glusterd_pid > "$started_marker"
}

no_hook_runs() { ! pgrep -f /var/lib/glusterd/hooks/ >/dev/null; }

# Stops glusterd when no volume is left, if this script started it (a glusterd an operator runs stays).
stop_glusterd_if_unused() {
  local pid volumes
  pid=$(glusterd_pid)
  [ -n "$pid" ] || { rm -f "$started_marker"; return 0; }
  volumes=$(cli volume list 2>/dev/null || true)
  if [ -n "$volumes" ] && [ "$volumes" != "No volumes present in cluster" ]; then
    return 0
  fi
  if [ "$(cat "$started_marker" 2>/dev/null)" != "$pid" ]; then
    log "no volume is left; glusterd ($pid) was not started by this script, so it keeps running"
    return 0
  fi
  log "no volume is left: stopping glusterd ($pid)"
  # The hooks glusterd runs after a volume is deleted ask glusterd things: let them finish first.
  wait_until 30 no_hook_runs || true
  kill -TERM "$pid" 2>/dev/null || true
  wait_until 30 process_gone "$pid" || kill -KILL "$pid" 2>/dev/null || true
  rm -f "$started_marker"
}

unmount() {
  local mountpoint=$1
  is_mounted "$mountpoint" || return 0
  umount "$mountpoint" 2>/dev/null || { log "$mountpoint is busy: detaching it lazily"; umount -l "$mountpoint"; }
  wait_until 30 is_unmounted "$mountpoint" || fail "$mountpoint stays mounted"
}

volume_exists() { cli volume info "$1" >/dev/null 2>&1; }

take_down() {
  local workdir=$1 volume=$2
  unmount "$workdir/mnt-a"
  unmount "$workdir/mnt-b"
  if volume_exists "$volume"; then
    log "stopping and deleting the volume $volume"
    # force: a leftover whose bricks are gone stops all the same.
    cli volume stop "$volume" force >&2 || true
    cli volume delete "$volume" >&2 || fail "cannot delete the volume $volume"
  fi
  rm -rf "$workdir/brick1" "$workdir/brick2"
  rmdir "$workdir/mnt-a" "$workdir/mnt-b" 2>/dev/null || true
}

# Creates the volume with bricks on `host`; what gluster said when it refused. The gluster command
# line refuses 127.0.0.1 and localhost as a brick's host, so the caller tries this machine's other
# names after it.
create_volume() {
  local workdir=$1 volume=$2 host=$3
  cli volume create "$volume" replica 2 "$host:$workdir/brick1" "$host:$workdir/brick2" force 2>&1 >/dev/null
}

# The EXIT trap of `up` while it builds: when it fails, takes down what it made.
take_down_after_failure() {
  local status=$?
  [ "$status" -ne 0 ] || return 0
  log "up failed: taking down what it made"
  take_down "$1" "$2" || true
  exit "$status"
}

# Whether a token written through one mount reads back through the other, both ways.
mounts_see_each_other() {
  local workdir=$1 probe token
  probe=".gluster-fixture-probe-$$"
  token="$(date +%s%N)-$RANDOM"
  printf '%s' "$token" > "$workdir/mnt-a/$probe" 2>/dev/null || return 1
  [ "$(cat "$workdir/mnt-b/$probe" 2>/dev/null)" = "$token" ] || return 1
  token="$token-back"
  printf '%s' "$token" > "$workdir/mnt-b/$probe" 2>/dev/null || return 1
  [ "$(cat "$workdir/mnt-a/$probe" 2>/dev/null)" = "$token" ] || return 1
  rm -f "$workdir/mnt-a/$probe"
}

up() {
  local workdir=$1 volume host refusal created=false
  volume=$(volume_name "$workdir")
  [ "$(id -u)" -eq 0 ] || fail "making and mounting a GlusterFS volume needs root"
  [ -x /usr/sbin/glusterd ] || fail "glusterd is not installed (glusterfs-server; scripts/install-deps.sh installs it)"
  [ -x /sbin/mount.glusterfs ] || [ -x /usr/sbin/mount.glusterfs ] || fail "mount.glusterfs is not installed (glusterfs-client; scripts/install-deps.sh installs it)"
  [ -c /dev/fuse ] || fail "no /dev/fuse here: GlusterFS's client mounts through FUSE"
  mkdir -p "$workdir"
  # The unprivileged receivers reach the mounts through this folder.
  chmod 755 "$workdir"
  start_glusterd
  take_down "$workdir" "$volume"
  # A failure from here on takes down what this run made (glusterd stays: it is shared).
  trap "take_down_after_failure $(printf '%q %q' "$workdir" "$volume")" EXIT
  mkdir -p "$workdir/brick1" "$workdir/brick2" "$workdir/mnt-a" "$workdir/mnt-b"
  for host in 127.0.0.1 "$(hostname)" $(hostname -I 2>/dev/null || true); do
    if refusal=$(create_volume "$workdir" "$volume" "$host"); then
      created=true
      break
    fi
    log "gluster refuses bricks on $host ($(printf '%s' "$refusal" | head -n 1)); trying this machine's next name"
  done
  [ "$created" = true ] || fail "cannot create the volume $volume on this machine"
  cli volume start "$volume" >&2 || fail "cannot start the volume $volume"
  for node in a b; do
    # The client stays as a daemon: not with the fixture's lock (descriptor 9), nor with the
    # caller's output (a test reading it to its end would wait for the daemon to exit).
    mount -t glusterfs "127.0.0.1:/$volume" "$workdir/mnt-$node" </dev/null >>"$workdir/mount-$node.log" 2>&1 9>&- \
      || fail "cannot mount $volume at $workdir/mnt-$node: $(cat "$workdir/mount-$node.log" 2>/dev/null); see /var/log/glusterfs/$(printf '%s' "${workdir#/}/mnt-$node" | tr / -).log"
  done
  wait_until "$live_deadline_seconds" mounts_see_each_other "$workdir" \
    || fail "a file written through $workdir/mnt-a did not read back through $workdir/mnt-b (or back) within ${live_deadline_seconds} s"
  trap - EXIT
  log "the volume $volume is mounted at $workdir/mnt-a and $workdir/mnt-b"
  printf '%s\n' "$workdir/mnt-a" "$workdir/mnt-b"
}

down() {
  local workdir=$1 volume
  volume=$(volume_name "$workdir")
  [ "$(id -u)" -eq 0 ] || fail "unmounting and deleting a GlusterFS volume needs root"
  # A volume glusterd knows of while it is down (it died, or the machine restarted) is deleted too.
  if [ -z "$(glusterd_pid)" ] && [ -d "/var/lib/glusterd/vols/$volume" ]; then
    start_glusterd
  fi
  if [ -z "$(glusterd_pid)" ]; then
    unmount "$workdir/mnt-a"
    unmount "$workdir/mnt-b"
    rm -rf "$workdir/brick1" "$workdir/brick2"
    rmdir "$workdir/mnt-a" "$workdir/mnt-b" 2>/dev/null || true
    return 0
  fi
  wait_until 30 glusterd_answers || fail "glusterd runs but does not answer: see /var/log/glusterfs/glusterd.log"
  take_down "$workdir" "$volume"
  stop_glusterd_if_unused
}

[ $# -eq 2 ] || { echo "usage: $0 up|down WORKDIR" >&2; exit 2; }
command=$1
workdir=$(realpath -m "$2")
mkdir -p "$(dirname "$fixture_lock")"
exec 9>"$fixture_lock"
flock 9
case "$command" in
  up) up "$workdir" ;;
  down) down "$workdir" ;;
  *) echo "usage: $0 up|down WORKDIR" >&2; exit 2 ;;
esac
