#!/usr/bin/env bash
# Prerequisites of the browser tests (tests/test_browser.py): Debian's `chromium` from apt-get
# and the npm packages pinned in tests/browser/package-lock.json (the mermaid library and
# puppeteer-core), installed with `npm ci`. Both are skipped when already in place.
#
# Best effort by design: what cannot be installed here (no root, no apt-get, no npm) is
# reported on stderr and the browser tests are then skipped with that reason; this script
# always exits 0 so the test command goes on to run every other test.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 0

say() { echo "setup-browser: $*" >&2; }

if [ -n "${CHROME_PATH:-}" ] || command -v chromium >/dev/null 2>&1; then
  :
elif ! command -v apt-get >/dev/null 2>&1; then
  say "chromium is missing and apt-get is not available; the browser tests will be skipped"
else
  if [ "$(id -u)" = 0 ]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
  else
    as_root=(false)
  fi
  if [ "${as_root[*]}" = false ]; then
    say "chromium is missing and apt-get needs root; the browser tests will be skipped"
  elif "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
    && "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; then
    say "installed $(chromium --version 2>/dev/null || echo chromium)"
  else
    say "apt-get install chromium failed; the browser tests will be skipped"
  fi
fi

lock=tests/browser/package-lock.json
stamp=tests/browser/node_modules/.package-lock.sha256
if ! command -v npm >/dev/null 2>&1; then
  say "npm is missing; the browser tests will be skipped"
else
  want="$(sha256sum "$lock" | cut -d' ' -f1)"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    if (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error >/dev/null); then
      echo "$want" >"$stamp"
    else
      say "npm ci failed in tests/browser; the browser tests will be skipped"
    fi
  fi
fi
exit 0
