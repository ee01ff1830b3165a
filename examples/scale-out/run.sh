#!/usr/bin/env bash
# Three forewarn front-ends as one fleet, each on a "machine" of its own (a network namespace),
# all keeping their state in one PostgreSQL namespace. See examples/scale-out/README.md.
#
#   sudo examples/scale-out/run.sh start     # namespaces, links, relay, three front-ends
#   sudo examples/scale-out/run.sh status    # each front-end, one of its VMs' documents; 3: down
#   sudo examples/scale-out/run.sh stop      # everything start made, gone
#
# Front-end X (a, b, c) runs in network namespace fwhost-X: it answers its VMs at
# 169.254.169.254:80 and serves its control API on its end of a veth pair to the host
# (10.200.0.2, .6, .10 port 16955), whose host end (10.200.0.1, .5, .9) relays to PostgreSQL
# on the host's loopback. Its VMs' addresses (10.201.N.x in fleet.yaml) are on the
# namespace's loopback, so `curl --interface ADDRESS` inside it calls as that VM.
#
# Settings (environment): FOREWARN (the forewarn command), FOREWARN_SCALE_OUT_PG (PostgreSQL's
# HOST:PORT on the host, 127.0.0.1:5432), FOREWARN_SCALE_OUT_PG_USER (postgres),
# FOREWARN_SCALE_OUT_PG_DATABASE (test), FOREWARN_SCALE_OUT_NAMESPACE (the store namespace,
# forewarn-scale-out), FOREWARN_SCALE_OUT_PREFIX (network namespace and link names, fwhost),
# FOREWARN_SCALE_OUT_LINKS (the /24 the links are cut from, 10.200.0),
# FOREWARN_SCALE_OUT_RUN_DIR (pids, logs and token, /run/forewarn-scale-out).
set -Eeuo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FLEET="$HERE/fleet.yaml"
PG=${FOREWARN_SCALE_OUT_PG:-127.0.0.1:5432}
PG_USER=${FOREWARN_SCALE_OUT_PG_USER:-postgres}
PG_DATABASE=${FOREWARN_SCALE_OUT_PG_DATABASE:-test}
STORE_NAMESPACE=${FOREWARN_SCALE_OUT_NAMESPACE:-forewarn-scale-out}
PREFIX=${FOREWARN_SCALE_OUT_PREFIX:-fwhost}
LINKS=${FOREWARN_SCALE_OUT_LINKS:-10.200.0}
RUN_DIR=${FOREWARN_SCALE_OUT_RUN_DIR:-/run/forewarn-scale-out}
IMDS=169.254.169.254
CONTROL_PORT=16955
FRONT_ENDS=(a b c)
QUERY="metadata/scheduledevents?api-version=2020-07-01"

die() {
    echo "run.sh: $*" >&2
    exit 1
}

usage() {
    echo "usage: $0 start|stop|status" >&2
    exit 2
}

# Front-end $1 (a, b, c): its index, network namespace, link addresses and VMs.
index_of() { case $1 in a) echo 0 ;; b) echo 1 ;; c) echo 2 ;; esac }
netns_of() { echo "$PREFIX-$1"; }
host_end() { echo "$LINKS.$((4 * $(index_of "$1") + 1))"; }
netns_end() { echo "$LINKS.$((4 * $(index_of "$1") + 2))"; }
# "NAME ADDRESS" per VM of front-end $1: fleet.yaml's VMs at 10.201.<index + 1>.x.
vms_of() {
    local subnet
    subnet="10\\.201\\.$(($(index_of "$1") + 1))\\."
    sed -n "s/.*name: \\([^,]*\\), address: \\(${subnet}[0-9]*\\).*/\\1 \\2/p" "$FLEET"
}

check_settings() {
    [[ $LINKS =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] ||
        die "FOREWARN_SCALE_OUT_LINKS must be the first three octets of a /24, not '$LINKS'"
    [[ $PREFIX =~ ^[a-z0-9-]{1,13}$ ]] ||
        die "FOREWARN_SCALE_OUT_PREFIX must be 1 to 13 of a-z, 0-9 and '-' (an interface name)"
}

require_root() {
    [[ $(id -u) -eq 0 ]] || die "needs root for network namespaces: sudo $0 $1"
    command -v ip >/dev/null || die "iproute2's ip is not installed"
}

find_forewarn() {
    local repo_venv="$HERE/../../.venv/bin/forewarn"
    if [[ -n ${FOREWARN:-} ]]; then
        FOREWARN_BIN=$FOREWARN
    elif [[ -x $repo_venv ]]; then
        FOREWARN_BIN=$(cd "$(dirname "$repo_venv")" && pwd)/forewarn
    else
        FOREWARN_BIN=$(command -v forewarn) ||
            die "forewarn is not installed (pip install 'forewarn[postgres]', or set FOREWARN)"
    fi
    [[ -x $FOREWARN_BIN ]] || die "FOREWARN=$FOREWARN_BIN is not executable"
    # The relay needs only the standard library: the Python beside forewarn, or any python3.
    PYTHON_BIN=$(dirname "$FOREWARN_BIN")/python
    [[ -x $PYTHON_BIN ]] || PYTHON_BIN=$(command -v python3) || die "python3 is not installed"
}

# True when something accepts TCP connections at HOST:PORT $1 (within 3 seconds).
answers() {
    timeout 3 bash -c "exec 3<>/dev/tcp/${1%:*}/${1##*:}" 2>/dev/null
}

netns_exists() { ip netns list | cut -d' ' -f1 | grep -qx "$1"; }

is_running() {
    [[ -e $RUN_DIR/token ]] && return 0
    local letter
    for letter in "${FRONT_ENDS[@]}"; do
        netns_exists "$(netns_of "$letter")" && return 0
    done
    return 1
}

# Wait until front-end $1 (process $2) has printed its control line to log $3, or fail
# with its last words.
wait_for_front_end() {
    local letter=$1 pid=$2 log=$3 waited=0 status=0 last
    until grep -q '^  control: http' "$log" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid" || status=$?
            last=$(grep -v '^\s*$' "$log" | tail -n 1 || true)
            echo "run.sh: front-end ${letter^^} exited with status $status: ${last:-no output}" >&2
            return 1
        fi
        if ((waited >= 600)); then
            echo "run.sh: front-end ${letter^^} did not start within 60 s (see $log)" >&2
            return 1
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
}

make_links() {
    local letter netns
    for letter in "${FRONT_ENDS[@]}"; do
        netns=$(netns_of "$letter")
        ip netns add "$netns"
        ip -n "$netns" link set lo up
        ip -n "$netns" addr add "$IMDS/32" dev lo
        while read -r _ address; do
            ip -n "$netns" addr add "$address/32" dev lo
        done < <(vms_of "$letter")
        ip link add "$netns" type veth peer name eth0 netns "$netns"
        ip addr add "$(host_end "$letter")/30" dev "$netns"
        ip link set "$netns" up
        ip -n "$netns" addr add "$(netns_end "$letter")/30" dev eth0
        ip -n "$netns" link set eth0 up
    done
}

start_relay() {
    local letter pg_port=${PG##*:} listen=()
    for letter in "${FRONT_ENDS[@]}"; do
        listen+=(--listen "$(host_end "$letter"):$pg_port")
    done
    "$PYTHON_BIN" "$HERE/pg_relay.py" --to "$PG" "${listen[@]}" >"$RUN_DIR/relay.log" 2>&1 &
    echo $! >"$RUN_DIR/relay.pid"
    local waited=0
    until answers "$(host_end a):$pg_port"; do
        kill -0 "$(cat "$RUN_DIR/relay.pid")" 2>/dev/null ||
            { echo "run.sh: $(tail -n 1 "$RUN_DIR/relay.log")" >&2 && return 1; }
        ((waited++ < 50)) || { echo "run.sh: the PostgreSQL relay did not start" >&2 && return 1; }
        sleep 0.1
    done
}

start_front_end() {
    local letter=$1 netns store log
    netns=$(netns_of "$letter")
    store="postgresql://$PG_USER@$(host_end "$letter"):${PG##*:}/$PG_DATABASE"
    store+="?namespace=$STORE_NAMESPACE"
    log="$RUN_DIR/front-end-$letter.log"
    FOREWARN_TOKEN=$(cat "$RUN_DIR/token") FOREWARN_RUNTIME_DIR="$RUN_DIR" \
        ip netns exec "$netns" "$FOREWARN_BIN" serve --fleet "$FLEET" \
        --bind "0.0.0.0:80" --control "$(netns_end "$letter"):$CONTROL_PORT" \
        --store "$store" >"$log" 2>&1 &
    echo $! >"$RUN_DIR/front-end-$letter.pid"
    wait_for_front_end "$letter" "$!" "$log"
}

start() {
    require_root start
    check_settings
    find_forewarn
    command -v timeout >/dev/null || die "timeout (coreutils) is not installed"
    if is_running; then
        die "already running ($RUN_DIR/token or a $PREFIX-* namespace exists): $0 status, or $0 stop"
    fi
    answers "$PG" ||
        die "no PostgreSQL answers at $PG (start it, or set FOREWARN_SCALE_OUT_PG=HOST:PORT)"
    if [[ ! -d $RUN_DIR ]]; then
        mkdir -p -- "$RUN_DIR" && chmod 0700 "$RUN_DIR"
    fi
    # A partial start is undone: nothing of it outlives a failure.
    trap 'stop_everything >/dev/null 2>&1; exit 1' ERR INT TERM
    (umask 077 && od -An -tx1 -N24 /dev/urandom | tr -d ' \n' >"$RUN_DIR/token")
    make_links
    start_relay
    # The first front-end creates the namespace's platform (fleet, seed, profile); the others
    # find it there and join it.
    local letter
    for letter in "${FRONT_ENDS[@]}"; do
        start_front_end "$letter"
    done
    trap - ERR INT TERM
    echo "forewarn scale-out: 3 front-ends on PostgreSQL $PG, namespace $STORE_NAMESPACE"
    for letter in "${FRONT_ENDS[@]}"; do
        echo "  front-end ${letter^^}: network namespace $(netns_of "$letter")," \
            "VMs $(vms_of "$letter" | cut -d' ' -f1 | paste -sd' ' -)," \
            "control http://$(netns_end "$letter"):$CONTROL_PORT/api/v1"
    done
    local first_vm
    first_vm=$(vms_of c | head -n 1)
    echo "  token: $RUN_DIR/token (export FOREWARN_TOKEN=\$(cat $RUN_DIR/token))"
    echo "  try: ip netns exec $(netns_of c) curl -H Metadata:true --interface" \
        "${first_vm#* } \"http://$IMDS/$QUERY\""
}

# Stop what start started, by the ids it recorded, then anything left in its namespaces.
stop_everything() {
    local pidfile pid letter netns
    for pidfile in "$RUN_DIR"/*.pid; do
        [[ -e $pidfile ]] || continue
        pid=$(cat "$pidfile")
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pidfile in "$RUN_DIR"/*.pid; do
        [[ -e $pidfile ]] || continue
        pid=$(cat "$pidfile")
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
    done
    for letter in "${FRONT_ENDS[@]}"; do
        netns=$(netns_of "$letter")
        if netns_exists "$netns"; then
            for pid in $(ip netns pids "$netns"); do
                kill -KILL "$pid" 2>/dev/null || true
            done
            ip netns del "$netns"
        fi
        # Deleting the namespace deletes the pair, though not at once (the kernel tears a
        # namespace down in the background); a start that failed early may leave one.
        if ip link show "$netns" >/dev/null 2>&1; then
            ip link del "$netns" 2>/dev/null || ! ip link show "$netns" >/dev/null 2>&1 ||
                die "could not delete the link $netns"
        fi
    done
    # Only what start wrote: the run directory may be one that was there before.
    rm -f -- "$RUN_DIR"/token "$RUN_DIR"/*.pid "$RUN_DIR"/*.log "$RUN_DIR"/control-*.token
    rmdir -- "$RUN_DIR" 2>/dev/null || true
}

stop() {
    require_root stop
    check_settings
    stop_everything
    echo "forewarn scale-out: stopped; the fleet's state stays in PostgreSQL namespace" \
        "$STORE_NAMESPACE"
}

status() {
    require_root status
    check_settings
    local letter netns pid vm address document state=0
    for letter in "${FRONT_ENDS[@]}"; do
        netns=$(netns_of "$letter")
        pid=$(cat "$RUN_DIR/front-end-$letter.pid" 2>/dev/null || true)
        if [[ -z $pid ]] || ! kill -0 "$pid" 2>/dev/null; then
            echo "front-end ${letter^^} ($netns): not running"
            state=3
            continue
        fi
        read -r vm address < <(vms_of "$letter")
        if ! document=$(ip netns exec "$netns" curl -sS --max-time 3 -H Metadata:true \
            --interface "$address" "http://$IMDS/$QUERY" 2>&1); then
            # A VM under an impact (rebooting, frozen) is answered when the impact ends.
            document="no answer within 3 s (rebooting or frozen?): $document"
        fi
        echo "front-end ${letter^^} ($netns, pid $pid): $vm sees $document"
    done
    return "$state"
}

case ${1:-} in
start) start ;;
stop) stop ;;
status) status ;;
*) usage ;;
esac
