#!/usr/bin/env bash
# Installs the headless browser the HTML report's tests load pages in: Debian's chromium and chromium-driver
# (selenium, from the test extras, drives it). Does nothing when both are already there.
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    echo "chromium already installed: $(chromium --version)"
    exit 0
fi
command -v apt-get >/dev/null || { echo "no apt-get: install chromium and chromedriver by hand" >&2; exit 1; }
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
chromium --version
