#!/bin/sh
# Webhook: POST the event (the JSON object on standard input) with the moment and the VM.
#   FOREWARN_WEBHOOK_URL  where to post; unset: nothing is sent (exit 0)
set -eu
if [ -z "${FOREWARN_WEBHOOK_URL:-}" ]; then
  echo "FOREWARN_WEBHOOK_URL is not set; nothing sent"
  exit 0
fi
event="$(cat)"
printf '{"hook":"%s","vm":"%s","event":%s}' "$FOREWARN_HOOK" "$FOREWARN_VM_NAME" "$event" |
  curl --silent --show-error --fail --max-time 8 \
    -H 'Content-Type: application/json' --data-binary @- "$FOREWARN_WEBHOOK_URL"
