#!/bin/sh
# Load balancer: take this VM out of rotation before the event, put it back afterwards.
# The VM's health probe endpoint is expected to fail while the marker file exists (for an
# Azure Load Balancer probe, serve the probe path from a handler that checks the file).
#   FOREWARN_LB_MARKER  the marker file (default: /run/forewarn/out-of-rotation)
#   LB_DRAIN_SECONDS    how long to wait for connections to finish (default: 0)
set -eu
marker="${FOREWARN_LB_MARKER:-/run/forewarn/out-of-rotation}"
case "${FOREWARN_HOOK:-}" in
  prepare)
    mkdir -p "$(dirname "$marker")"
    printf '%s %s\n' "$FOREWARN_EVENT_ID" "$FOREWARN_EVENT_TYPE" > "$marker"
    echo "out of rotation: $marker"
    sleep "${LB_DRAIN_SECONDS:-0}"
    ;;
  recover)
    rm -f "$marker"
    echo "back in rotation"
    ;;
  *)
    ;;
esac
