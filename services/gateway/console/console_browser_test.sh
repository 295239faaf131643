#!/usr/bin/env bash
# The operator console in a real browser: headless Chromium (Debian's, through
# chromedriver and python3-selenium) drives /console/ of a real `tessera serve
# --http-port`. Fails, not skips, when the browser stack is missing: the
# console's contract is only checked here.
#   bazel test //services/gateway/console:console_browser_test
# Screenshots: bazel-testlogs/services/gateway/console/console_browser_test/test.outputs/
set -uo pipefail
fail() { echo "FAILED: $*" >&2; exit 1; }
for tool in chromium chromedriver; do
  command -v "$tool" >/dev/null || fail "$tool is missing (./tessera setup installs chromium chromium-driver)"
done
# Debian's selenium lives in the system interpreter, not in a pyenv/venv one.
PYTHON=/usr/bin/python3
"$PYTHON" -c "import selenium" 2>/dev/null || fail "python3-selenium is missing (./tessera setup installs it)"
exec "$PYTHON" "$(dirname "${BASH_SOURCE[0]}")/console_browser_test.py" "$@"
