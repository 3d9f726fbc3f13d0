#!/usr/bin/env bash
# The browser tests (test/oauth-browser.e2e-spec.ts) drive Debian's Chromium through
# playwright-core; no browser is ever downloaded. Installs the `chromium` package when it is
# missing and this is a root shell with apt (CI and a fresh machine of the project's kind);
# otherwise says how to install it, and the browser tests will fail with the same advice.
set -euo pipefail
CHROMIUM="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$CHROMIUM" ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "chromium: not found at $CHROMIUM; installing Debian's chromium package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  [ -x "$CHROMIUM" ] && exit 0
fi
echo "chromium: not found at $CHROMIUM; install it (sudo apt-get install chromium) or set CHROMIUM_PATH for the browser tests" >&2
exit 0
