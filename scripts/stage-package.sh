#!/usr/bin/env bash
# Builds everything the package installs and puts each file where it goes under DESTDIR: the one
# list of installed files, for the Debian package (debian/rules runs it) and so
# for the Docker image (which installs that package). debian/rules stages into debian/stage.
#   scripts/stage-package.sh DESTDIR
# What it puts there:
#   usr/bin/                    capture-send, capture-recv, capture-load: the release build as it
#                               ships (scripts/build-release.sh: Swift runtime and libstdc++ linked in)
#   usr/share/man/man1/         a page for every command and subcommand (ArgumentParser's
#                               generate-manual plugin, from each executable's own --help)
#   usr/share/bash-completion/completions/, usr/share/zsh/vendor-completions/,
#   usr/share/fish/vendor_completions.d/
#                               completions, as each executable generates them
#   lib/systemd/system/         the units in systemd/
#   etc/capture/                capture-send.env and capture-recv.env (from systemd/*.env.example)
set -euo pipefail
cd "$(dirname "$0")/.."
destination=${1:?usage: scripts/stage-package.sh DESTDIR}
rm -rf "$destination"
mkdir -p "$destination"
destination=$(cd "$destination" && pwd)
programs=(capture-send capture-recv capture-load)

for program in "${programs[@]}"; do
  scripts/build-release.sh --product "$program"
done
install -d "$destination/usr/bin"
for program in "${programs[@]}"; do
  install -m 0755 ".build-static/release/$program" "$destination/usr/bin/$program"
done

# Man pages, one per command and subcommand, dated with the changelog's entry, made by ArgumentParser's
# generate-manual from each executable's own --help (the tool its generate-manual plugin runs: the
# plugin itself pages every executable product, and our fuzz targets are products that do not
# answer --experimental-dump-help). Built like the programs, in the same build folder.
scripts/build-release.sh --product generate-manual
generate_manual=.build-static/release/generate-manual
changelog_date=$(sed -n 's/^ -- .*>  \(.*\)$/\1/p' debian/changelog | head -1)
manual_date=$(date -u -d "$changelog_date" +%Y-%m-%d)
manuals=$(mktemp -d)
trap 'rm -rf "$manuals"' EXIT
manual() { "$generate_manual" "$1" --multi-page --date "$manual_date" --authors "capture-streamer maintainers" --output-directory "$2"; }
for program in "${programs[@]}"; do
  manual "$destination/usr/bin/$program" "$manuals"
done
# `capture-send spool` is a command tree of its own (CaptureSend.main dispatches it): its pages come
# from `capture-send spool --experimental-dump-help`, named "capture-send spool.list.1"; renamed
# capture-send.spool.list.1 like every other subcommand's page, cross-references included.
printf '#!/bin/sh\nexec "%s" spool "$@"\n' "$destination/usr/bin/capture-send" > "$manuals/capture-send-spool"
chmod +x "$manuals/capture-send-spool"
mkdir "$manuals/spool"
manual "$manuals/capture-send-spool" "$manuals/spool"
for page in "$manuals/spool/"*.1; do
  name=$(basename "$page")
  sed -e 's/^\.Xr "capture-send spool\([". ]\)/.Xr "capture-send.spool\1/' "$page" > "$manuals/${name/capture-send spool/capture-send.spool}"
done
install -d "$destination/usr/share/man/man1"
install -m 0644 "$manuals"/*.1 "$destination/usr/share/man/man1/"

# Completions, as the executables generate them.
install -d "$destination/usr/share/bash-completion/completions" "$destination/usr/share/zsh/vendor-completions" \
  "$destination/usr/share/fish/vendor_completions.d"
for program in "${programs[@]}"; do
  binary="$destination/usr/bin/$program"
  # Sourced by bash-completion, not run: without the #! line ArgumentParser starts it with.
  "$binary" --generate-completion-script bash | sed '1{/^#!/d}' > "$destination/usr/share/bash-completion/completions/$program"
  "$binary" --generate-completion-script zsh > "$destination/usr/share/zsh/vendor-completions/_$program"
  "$binary" --generate-completion-script fish > "$destination/usr/share/fish/vendor_completions.d/$program.fish"
done

# The units and their environment files.
install -d "$destination/lib/systemd/system" "$destination/etc/capture"
for program in capture-send capture-recv; do
  install -m 0644 "systemd/$program.service" "$destination/lib/systemd/system/$program.service"
  install -m 0640 "systemd/$program.env.example" "$destination/etc/capture/$program.env"
done
echo "stage-package: staged in $destination"
