#!/bin/sh
# agenttrail container entrypoint.
#   serve [options]   check the volume and config, read secrets from files, exec `agenttrail serve`
#   healthcheck       exit 0 if the sidecar's readiness endpoint answers 200 (HEALTHCHECK)
#   anything else     exec `agenttrail ARGS` (e.g. `schema --cluster prod`, `trajectories`)
# Secrets: each NAME_FILE variable (Docker/Kubernetes secret files) sets NAME from the file's
# content, for AGENTTRAIL_BEARER_TOKEN and any *_API_KEY the judges read.
set -eu

fail() {
    echo "agenttrail-entrypoint: $*" >&2
    exit 64
}

# NAME_FILE -> NAME for the secrets we know about; an unreadable file is an error, not a
# silently unauthenticated sidecar.
load_secret_files() {
    for pair in $(env | sed -n 's/^\(AGENTTRAIL_BEARER_TOKEN_FILE\|[A-Z0-9_]*_API_KEY_FILE\)=.*/\1/p'); do
        name=${pair%_FILE}
        eval "file=\${$pair}"
        [ -n "$file" ] || continue
        [ -r "$file" ] || fail "$pair names $file, which does not exist or is not readable"
        value=$(cat "$file")
        [ -n "$value" ] || fail "$pair names $file, which is empty"
        export "$name=$value"
        unset "$pair"
    done
}

# The store (if embedded) and the spool must be writable by this user: say so plainly instead
# of letting chDB fail deep inside start-up.
check_writable() {
    what=$1
    dir=$2
    mkdir -p "$dir" 2>/dev/null || fail "cannot create the $what directory $dir (is the volume mounted and owned by uid $(id -u)?)"
    [ -w "$dir" ] || fail "the $what directory $dir is not writable by uid $(id -u); chown the volume or set AGENTTRAIL_${3}"
}

http_port() {
    addr=${AGENTTRAIL_HTTP:-127.0.0.1:4318}
    echo "${addr##*:}"
}

cmd=${1:-serve}
case "$cmd" in
    serve)
        shift 2>/dev/null || true
        load_secret_files
        if [ -n "${AGENTTRAIL_CONFIG:-}" ] && [ ! -r "$AGENTTRAIL_CONFIG" ]; then
            fail "AGENTTRAIL_CONFIG=$AGENTTRAIL_CONFIG is not a readable file; mount one or unset it"
        fi
        case "${AGENTTRAIL_STORE:-./agenttrail-data}" in
            http://* | https://*) ;;
            *) check_writable store "${AGENTTRAIL_STORE:-./agenttrail-data}" STORE ;;
        esac
        if [ -n "${AGENTTRAIL_SPOOL_DIR:-}" ]; then
            check_writable spool "$AGENTTRAIL_SPOOL_DIR" SPOOL_DIR
        fi
        exec agenttrail serve "$@"
        ;;
    healthcheck)
        load_secret_files  # the token, for a sidecar with health_auth set
        scheme=http
        [ -n "${AGENTTRAIL_TLS_CERT:-}" ] && scheme=https
        url="$scheme://127.0.0.1:$(http_port)${AGENTTRAIL_READY_PATH:-/readyz}"
        exec python3 - "$url" <<'PY'
import os, ssl, sys, urllib.request
context = ssl._create_unverified_context()  # loopback, our own certificate
request = urllib.request.Request(sys.argv[1])
if os.environ.get("AGENTTRAIL_BEARER_TOKEN"):
    request.add_header("Authorization", "Bearer " + os.environ["AGENTTRAIL_BEARER_TOKEN"])
try:
    with urllib.request.urlopen(request, timeout=4, context=context) as response:
        sys.exit(0 if response.status == 200 else 1)
except Exception as exc:
    print(f"not ready: {sys.argv[1]}: {exc}", file=sys.stderr)
    sys.exit(1)
PY
        ;;
    *)
        load_secret_files
        exec agenttrail "$@"
        ;;
esac
