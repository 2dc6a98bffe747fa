#!/usr/bin/env bash
# Installs the Debian package on this machine and checks what an administrator relies on, then
# removes and purges it. CI runs it (.ci/run, when CI=true) after `make deb`; it changes the
# system (a package, the capture user, /etc/capture, /var/lib/capture), so `make test` does not.
#   scripts/test-package.sh dist/capture-streamer_VERSION_ARCH.deb
# Checks, in order:
#   lintian: no error, and no warning but the one README names ("Install the package");
#   apt-get install works; every program prints "NAME VERSION (commit COMMIT)" for --version, the
#   package's version and this checkout's commit;
#   man -w finds a page for every command and subcommand; each renders without a groff warning;
#   bash completes `capture-send --co` to --codec (zsh and fish scripts are installed too);
#   the units pass `systemd-analyze verify` (or, without it, the suite's sandbox test covers them),
#   are installed but not enabled, and the user, its groups, folders and conffiles are in place;
#   a real recording as the capture user lands in /var/lib/capture/recordings and ffprobe reads it;
#   `apt-get remove` removes the programs and leaves the recordings and /etc/capture's files;
#   `apt-get purge` leaves the recordings too.
set -euo pipefail
cd "$(dirname "$0")/.."
deb=${1:?usage: scripts/test-package.sh PACKAGE.deb}
deb=$(realpath "$deb")
checks=0
fail() { echo "test-package: FAIL: $*" >&2; exit 1; }
ok() { checks=$((checks + 1)); echo "test-package: ok: $*"; }
export DEBIAN_FRONTEND=noninteractive

lintian_output=$(lintian --fail-on error --tag-display-limit 0 "$deb" 2>&1) || { echo "$lintian_output" >&2; fail "lintian reports errors"; }
# The one warning left, on each subcommand's page (README, "Install the package"): its NAME says
# the command as typed, `capture-recv export`, while the page is capture-recv.export.1.
unexpected=$(printf '%s\n' "$lintian_output" | grep -E '^[EW]: ' | grep -v ' bad-whatis-entry ' || true)
[ -z "$unexpected" ] || fail "lintian warns: $unexpected"
ok "lintian: no error; $(printf '%s\n' "$lintian_output" | grep -c ' bad-whatis-entry ' || true) bad-whatis-entry warnings (subcommand pages), nothing else"

dpkg-query -W capture-streamer >/dev/null 2>&1 && fail "capture-streamer is installed already; remove it first (apt-get purge capture-streamer)"
apt-get install -y -qq "$deb" > /tmp/test-package-install.log 2>&1 || { cat /tmp/test-package-install.log >&2; fail "apt-get install $deb"; }
ok "apt-get install $(basename "$deb")"
trap 'apt-get purge -y -qq capture-streamer >/dev/null 2>&1 || true' EXIT

version=$(dpkg-query -W -f='${Version}' capture-streamer)
commit=$(git rev-parse --short=12 HEAD)
for program in capture-send capture-recv capture-load; do
  [ "$(command -v "$program")" = "/usr/bin/$program" ] || fail "$program is not /usr/bin/$program"
  printed=$("$program" --version)
  [ "$printed" = "$program $version (commit $commit)" ] || fail "$program --version printed '$printed', not '$program $version (commit $commit)'"
done
printed=$(capture-recv export --version)
[ "$printed" = "capture-recv $version (commit $commit)" ] || fail "capture-recv export --version printed '$printed'"
ok "--version: $(capture-send --version)"

pages=$(dpkg -L capture-streamer | grep -E '^/usr/share/man/man1/.*\.1\.gz$' | sort)
for command in capture-send capture-send.spool capture-send.spool.list capture-send.spool.deliver capture-send.spool.discard \
  capture-recv capture-recv.serve capture-recv.recover capture-recv.export capture-recv.gen-cert \
  capture-load capture-load.run capture-load.verify; do
  printf '%s\n' "$pages" | grep -qx "/usr/share/man/man1/$command.1.gz" || fail "no man page $command.1 (pages: $(echo $pages))"
done
[ "$(man -w capture-send)" = /usr/share/man/man1/capture-send.1.gz ] || fail "man -w capture-send: $(man -w capture-send 2>&1)"
for page in $pages; do
  warnings=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l "$page" 2>&1 >/dev/null || true)
  [ -z "$warnings" ] || fail "$page renders with warnings: $warnings"
done
ok "man: $(printf '%s\n' "$pages" | wc -l) pages, man -w capture-send finds /usr/share/man/man1/capture-send.1.gz, none with a groff warning"

completion=/usr/share/bash-completion/completions/capture-send
[ -f "$completion" ] || fail "no bash completion at $completion"
words=$(bash --norc --noprofile -c '
  source "$1"
  COMP_LINE="capture-send --co"; COMP_POINT=${#COMP_LINE}; COMP_WORDS=(capture-send --co); COMP_CWORD=1
  function=$(complete -p capture-send | sed -n "s/.* -F \([^ ]*\) .*/\1/p")
  "$function" capture-send --co capture-send
  printf "%s\n" "${COMPREPLY[@]}"' bash "$completion")
printf '%s\n' "$words" | grep -qx -- --codec || fail "bash completes 'capture-send --co' to: $(echo $words)"
for file in /usr/share/zsh/vendor-completions/_capture-send /usr/share/fish/vendor_completions.d/capture-recv.fish; do
  [ -s "$file" ] || fail "no completion $file"
done
ok "bash completes 'capture-send --co' to: $(echo $words)"

if command -v systemd-analyze >/dev/null; then
  for unit in capture-recv.service capture-send.service; do
    verify=$(systemd-analyze verify "/lib/systemd/system/$unit" 2>&1) || fail "systemd-analyze verify $unit: $verify"
    [ -z "$verify" ] || fail "systemd-analyze verify $unit warns: $verify"
  done
  ok "systemd-analyze verify: both units"
else
  echo "test-package: systemd-analyze is not installed; SystemdServiceSandbox in the suite runs the units"
fi
for unit in capture-recv.service capture-send.service; do
  [ -e "/etc/systemd/system/multi-user.target.wants/$unit" ] && fail "$unit was enabled at install; it needs /etc/capture configured first"
done
ok "units installed, not enabled"

getent passwd capture >/dev/null || fail "no capture user"
[ "$(getent passwd capture | cut -d: -f7)" = /usr/sbin/nologin ] || fail "the capture user has a login shell: $(getent passwd capture)"
id -nG capture | tr ' ' '\n' | grep -qx audio || fail "capture is not in the audio group: $(id -nG capture)"
for folder in /var/lib/capture /var/lib/capture/recordings /var/lib/capture-send; do
  [ "$(stat -c '%U:%G %a' "$folder")" = "capture:capture 750" ] || fail "$folder is $(stat -c '%U:%G %a' "$folder")"
done
[ "$(stat -c '%U:%G %a' /etc/capture)" = "root:capture 750" ] || fail "/etc/capture is $(stat -c '%U:%G %a' /etc/capture)"
conffiles=$(dpkg-query -W -f='${Conffiles}\n' capture-streamer)
for file in /etc/capture/capture-send.env /etc/capture/capture-recv.env; do
  printf '%s\n' "$conffiles" | grep -q " $file " || fail "$file is not a conffile"
  [ "$(stat -c '%U:%G %a' "$file")" = "root:capture 640" ] || fail "$file is $(stat -c '%U:%G %a' "$file")"
done
ok "user capture (nologin, in audio), /var/lib folders, /etc/capture and its conffiles"

# A recording, made by the installed programs as the capture user.
work=$(mktemp -d)
chmod 0755 "$work"
install -d -o capture -g capture "$work/spool"
setpriv --reuid=capture --regid=capture --init-groups \
  capture-recv --out /var/lib/capture/recordings --listen 127.0.0.1:0 > "$work/recv.out" 2> "$work/recv.err" &
receiver=$!
address=""
for _ in $(seq 1 600); do
  address=$(sed -n 's/^listening on \(.*\)$/\1/p' "$work/recv.out")
  [ -n "$address" ] && break
  kill -0 "$receiver" 2>/dev/null || { cat "$work/recv.err" >&2; fail "capture-recv exited before it listened"; }
  sleep 0.1
done
[ -n "$address" ] || fail "capture-recv did not listen: $(cat "$work/recv.err")"
setpriv --reuid=capture --regid=capture --init-groups env HOME=/var/lib/capture \
  capture-send "$address" --source tone --duration 1 --no-pace --stream-name package-test --spool "$work/spool" 2> "$work/send.err" \
  || { cat "$work/send.err" >&2; fail "capture-send to the installed receiver"; }
kill -TERM "$receiver"
wait "$receiver" || fail "capture-recv did not exit 0 on SIGTERM: $(cat "$work/recv.err")"
recording=$(find /var/lib/capture/recordings -name 'package-test_*.caf' | head -1)
[ -n "$recording" ] || fail "no recording in /var/lib/capture/recordings"
frames=$(ffprobe -v error -select_streams a:0 -count_packets -show_entries stream=duration_ts -of csv=p=0 "$recording")
[ "$frames" = 48000 ] || fail "$recording holds $frames frames, not 48000"
ok "a recording as the capture user: $recording, 48000 frames (ffprobe)"

apt-get remove -y -qq capture-streamer > /dev/null 2>&1 || fail "apt-get remove"
[ ! -e /usr/bin/capture-recv ] || fail "capture-recv is still installed after apt-get remove"
[ -f "$recording" ] || fail "apt-get remove deleted the recording"
[ -f /etc/capture/capture-send.env ] || fail "apt-get remove deleted the conffile /etc/capture/capture-send.env"
ok "apt-get remove: programs gone, recording and conffiles kept"
apt-get purge -y -qq capture-streamer > /dev/null 2>&1 || fail "apt-get purge"
[ -f "$recording" ] || fail "apt-get purge deleted the recording"
ok "apt-get purge: recording kept"
trap - EXIT
rm -rf "$work" "$(dirname "$recording")/package-test_"*
echo "test-package: all $checks checks passed"
