#!/usr/bin/env bash
# Installs what the chat-proxy benchmark compares Framegate with into .tools/bench-venv
# (git-ignored, apart from the engines' venv so the test suite never carries it): the LiteLLM
# proxy, pinned. Cached: a second run finds it in place and returns at once.
# Used by bench/chat-proxy.ts; nothing in the api, the worker or the tests needs it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# Pinned on purpose: never float this (LiteLLM has had compromised releases on PyPI).
LITELLM_REQUIREMENT='litellm[proxy]==1.80.5'

venv="$root/.tools/bench-venv"
stamp="$venv/.requirements"
say() { printf '[provision-bench] %s\n' "$*" >&2; }

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$LITELLM_REQUIREMENT" ] && [ -x "$venv/bin/litellm" ]; then
  exit 0
fi
command -v python3 >/dev/null 2>&1 || { say 'python3 (with venv) is required'; exit 1; }
say "installing $LITELLM_REQUIREMENT into .tools/bench-venv (first run only)"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "$LITELLM_REQUIREMENT"
printf '%s' "$LITELLM_REQUIREMENT" > "$stamp"
say "LiteLLM: $("$venv/bin/pip" show litellm 2>/dev/null | sed -n 's/^Version: //p')"
