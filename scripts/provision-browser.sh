#!/usr/bin/env bash
# Makes sure Debian's Chromium is at /usr/bin/chromium for the console's browser test
# (test/console/browser.test.ts drives it with playwright-core; no browser is downloaded).
# Cached: returns at once when the binary is there. Installs it only where that is possible
# (root and apt-get); anywhere else it says so in one line and leaves the rest of provisioning
# alone, and the browser test then fails with the same hint.
set -uo pipefail
browser=/usr/bin/chromium
say() { printf '[provision-browser] %s\n' "$*" >&2; }

[ -x "$browser" ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  say "error: $browser is missing and cannot be installed here (needs root and apt-get): install Debian's chromium package for test/console/browser.test.ts"
  exit 0
fi
say "installing Debian's chromium package with apt-get (first run only; a few minutes)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends chromium >/dev/null; then
  # A fresh image often has no package lists yet.
  say "apt-get install failed; updating the package lists and trying again"
  apt-get update >/dev/null && apt-get install -y --no-install-recommends chromium >/dev/null
fi
if [ -x "$browser" ]; then
  say "Chromium: $("$browser" --version 2>/dev/null | head -1)"
else
  say "error: installing chromium failed; see apt-get's messages above"
fi
exit 0
