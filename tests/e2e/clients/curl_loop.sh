#!/bin/sh
# The documentation's curl command in a loop, once a second, until the stop file exists;
# curl's own exit status ends the loop on any failure (reset, empty reply, timeout).
url="$1/metadata/scheduledevents?api-version=2020-07-01"
while [ ! -e "$2" ]; do
  curl -sS -H Metadata:true --noproxy "*" "$url" || exit 1
  echo
  sleep 1
done
