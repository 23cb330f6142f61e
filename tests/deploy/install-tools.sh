#!/usr/bin/env bash
# The Debian packages tests/deploy runs for real: prometheus (with promtool) and
# prometheus-alertmanager (with amtool). Installed once, only if missing (`make test-deploy`,
# which `make test` runs through `unit`). The PyPI checkers (hadolint, shellcheck,
# check-jsonschema, kubernetes-validate) come with the project's dev extra.
set -euo pipefail

missing=()
{ command -v prometheus && command -v promtool; } >/dev/null || missing+=(prometheus)
{ command -v prometheus-alertmanager && command -v amtool; } >/dev/null || missing+=(prometheus-alertmanager)
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "!!! tests/deploy: cannot install ${missing[*]} (needs root and apt-get);" \
        "the Prometheus and Alertmanager tests will be SKIPPED" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
# Another apt run (a parallel job) may hold the lock for a while: wait for it.
apt-get -o DPkg::Lock::Timeout=900 update -qq
apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}"
