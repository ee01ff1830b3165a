#!/bin/sh
# Kubernetes node: cordon and drain before the event (prepare), uncordon after it (recover).
#   FOREWARN_K8S_NODE   the node name (default: this host's name)
#   KUBECTL             the kubectl to run (default: kubectl on PATH)
#   DRAIN_TIMEOUT       how long kubectl drain may take (default: 5m; keep it under the
#                       hook's timeout in agent.yaml)
set -eu
node="${FOREWARN_K8S_NODE:-$(hostname)}"
kubectl="${KUBECTL:-kubectl}"
case "${FOREWARN_HOOK:-}" in
  prepare)
    echo "cordon and drain $node for $FOREWARN_EVENT_TYPE $FOREWARN_EVENT_ID"
    "$kubectl" cordon "$node"
    "$kubectl" drain "$node" --ignore-daemonsets --delete-emptydir-data \
      --timeout="${DRAIN_TIMEOUT:-5m}"
    ;;
  recover)
    echo "uncordon $node after $FOREWARN_EVENT_ID"
    "$kubectl" uncordon "$node"
    ;;
  *)
    ;;
esac
