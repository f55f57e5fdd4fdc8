#!/usr/bin/env bash
# A LAN testbed on this one machine: N hosts, each a network namespace with its own address on a
# bridge and a container booting systemd (systemd-nspawn on a copy-on-write overlay of this
# machine's root), each running sshd. `p2pnode deploy` then treats them as ordinary LAN hosts.
#
#   deploy/testbed.sh up [N]            build N hosts (default 3): h1..hN at 10.77.0.11..
#   deploy/testbed.sh inventory [NODES] write $TESTBED/inventory.yml (NODES per host, default 20)
#   deploy/testbed.sh fault HOST cut|tbf RATE|drop PERCENT|kill   inject a fault, logged
#   deploy/testbed.sh clear HOST        undo cut, tbf and drop on HOST, logged
#   deploy/testbed.sh status            hosts, addresses, containers alive
#   deploy/testbed.sh down              tear everything down (also after a failed up)
#
# Needs root, systemd-nspawn (apt-get install systemd-container), sshd (openssh-server), iproute2,
# nftables. Traffic stays on the bridge p2ptb0 (10.77.0.0/24): no route or NAT to the outside.
# P2PNODE_TESTBED (folder), P2PNODE_TESTBED_PREFIX and P2PNODE_TESTBED_NET let two testbeds coexist.
# Every fault is appended to $TESTBED/faults.jsonl, which `p2pnode deploy collect --faults` reads.
set -euo pipefail

TESTBED="${P2PNODE_TESTBED:-/var/lib/p2pnode-testbed}"
PREFIX="${P2PNODE_TESTBED_PREFIX:-p2ptb}"  # names of the bridge, namespaces, links (<= 8 chars)
NET="${P2PNODE_TESTBED_NET:-10.77.0}"     # the hosts' /24
BRIDGE="${PREFIX}0"
KEY="$TESTBED/id_ed25519"
SSH_OPTS=(-i "$KEY" -o UserKnownHostsFile="$TESTBED/known_hosts" -o StrictHostKeyChecking=accept-new
  -o BatchMode=yes -o ConnectTimeout=3)

die() { echo "testbed: $*" >&2; exit 1; }
hosts() { [ -f "$TESTBED/hosts" ] && cat "$TESTBED/hosts" || true; }
addr() { echo "$NET.$((10 + ${1#h}))"; }
log_fault() { # host fault action detail
  printf '{"time": %s, "host": "%s", "fault": "%s", "action": "%s", "detail": "%s"}\n' \
    "$(date +%s.%N)" "$1" "$2" "$3" "$4" >> "$TESTBED/faults.jsonl"
}
need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found ($2)"; }

up() {
  local n="${1:-3}"
  [ "$(id -u)" = 0 ] || die "needs root"
  need systemd-nspawn "apt-get install systemd-container"
  need sshd "apt-get install openssh-server"
  need nft "apt-get install nftables"
  [ "$n" -ge 1 ] && [ "$n" -le 50 ] || die "between 1 and 50 hosts"
  [ ! -f "$TESTBED/hosts" ] || die "a testbed is up already ($TESTBED); run: $0 down"
  mkdir -p "$TESTBED"
  : > "$TESTBED/faults.jsonl"
  : > "$TESTBED/known_hosts"
  [ -f "$KEY" ] || ssh-keygen -q -t ed25519 -N '' -C p2pnode-testbed -f "$KEY"
  ip link add "$BRIDGE" type bridge
  ip addr add "$NET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for i in $(seq 1 "$n"); do
    local h="h$i" ns="$PREFIX-h$i" dir="$TESTBED/h$i"
    echo "$h" >> "$TESTBED/hosts"
    ip netns add "$ns"
    ip link add "$PREFIX$h" type veth peer name eth0 netns "$ns"
    ip link set "$PREFIX$h" master "$BRIDGE" up
    ip -n "$ns" addr add "$(addr $h)/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    mkdir -p "$dir/upper" "$dir/work" "$dir/root"
    mount -t overlay overlay -o "lowerdir=/,upperdir=$dir/upper,workdir=$dir/work" "$dir/root"
    local r="$dir/root"
    echo "$h" > "$r/etc/hostname"
    rm -f "$r/etc/machine-id"
    mkdir -p "$r/root/.ssh" && chmod 700 "$r/root/.ssh"
    cp "$KEY.pub" "$r/root/.ssh/authorized_keys" && chmod 600 "$r/root/.ssh/authorized_keys"
    { echo "127.0.0.1 localhost $h"; for j in $(seq 1 "$n"); do echo "$(addr h$j) h$j"; done; } > "$r/etc/hosts"
    # boot only what a testbed host needs (not every service this machine has installed)
    cat > "$r/etc/systemd/system/p2ptb.target" <<UNIT
[Unit]
Description=p2pnode testbed host
Requires=basic.target
Wants=ssh.service systemd-logind.service systemd-user-sessions.service
After=basic.target
AllowIsolate=yes
UNIT
    ln -sf /dev/null "$r/etc/systemd/system/nftables.service"  # this machine's ruleset is not the host's
    setsid systemd-nspawn -D "$r" --register=no --keep-unit --link-journal=no \
      --uuid="$(cat /proc/sys/kernel/random/uuid)" --network-namespace-path="/run/netns/$ns" \
      -M "$PREFIX-$h" -b systemd.unit=p2ptb.target > "$dir/console.log" 2>&1 < /dev/null &
    echo $! > "$dir/nspawn.pid"
  done
  for h in $(hosts); do
    local ok=0
    for _ in $(seq 1 120); do
      if ssh "${SSH_OPTS[@]}" "root@$(addr $h)" true 2>/dev/null; then ok=1; break; fi
      kill -0 "$(cat "$TESTBED/$h/nspawn.pid")" 2>/dev/null || break
      sleep 0.5
    done
    [ "$ok" = 1 ] || die "$h did not come up; see $TESTBED/$h/console.log"
    echo "$h $(addr $h) up"
  done
  inventory
}

inventory() {
  local per="${1:-20}"
  {
    echo "# testbed hosts (deploy/testbed.sh); edit p2pnode_settings for the experiment"
    echo "p2pnode:"
    echo "  hosts:"
    for h in $(hosts); do
      echo "    $h: {ansible_host: $(addr $h), p2pnode_nodes: $per}"
    done
    echo "  vars:"
    echo "    ansible_user: root"
    echo "    ansible_ssh_private_key_file: $KEY"
    echo "    ansible_ssh_common_args: -o UserKnownHostsFile=$TESTBED/known_hosts -o StrictHostKeyChecking=accept-new"
    echo "    ansible_python_interpreter: /usr/bin/python3"
    echo "    p2pnode_cluster: testbed"
    echo "    p2pnode_settings: {rounds: 30, tick_seconds: 0.01, seed: 1}"
  } > "$TESTBED/inventory.yml"
  echo "inventory: $TESTBED/inventory.yml"
}

fault() {
  local h="$1" kind="$2" arg="${3:-}" ns="$PREFIX-$1"
  grep -qx "$h" "$TESTBED/hosts" 2>/dev/null || die "no host $h in the testbed"
  case "$kind" in
    cut)
      ip link set "$PREFIX$h" down ;;
    tbf) # both directions: the bridge's port towards the host, and the host's own eth0
      [ -n "$arg" ] || die "tbf needs a rate, e.g. 2mbit"
      tc qdisc replace dev "$PREFIX$h" root tbf rate "$arg" burst 32kbit latency 200ms
      ip netns exec "$ns" tc qdisc replace dev eth0 root tbf rate "$arg" burst 32kbit latency 200ms ;;
    drop)
      [[ "$arg" =~ ^[0-9]+$ ]] && [ "$arg" -le 100 ] || die "drop needs a percentage 0..100"
      ip netns exec "$ns" nft -f - <<NFT
table inet p2ptb_fault
delete table inet p2ptb_fault
table inet p2ptb_fault {
  chain input { type filter hook input priority 0; policy accept; iifname "eth0" numgen random mod 100 < $arg drop; }
  chain output { type filter hook output priority 0; policy accept; oifname "eth0" numgen random mod 100 < $arg drop; }
}
NFT
      ;;
    kill) # SIGKILL the host's node processes; systemd restarts them (Restart=on-failure)
      ssh "${SSH_OPTS[@]}" "root@$(addr $h)" "systemctl kill --kill-who=main --signal=SIGKILL 'p2pnode@*'" ;;
    *) die "fault: cut, tbf RATE, drop PERCENT or kill" ;;
  esac
  log_fault "$h" "$kind" on "$arg"
  echo "$h: $kind $arg"
}

clear_faults() {
  local h="$1" ns="$PREFIX-$1"
  grep -qx "$h" "$TESTBED/hosts" 2>/dev/null || die "no host $h in the testbed"
  ip link set "$PREFIX$h" up
  tc qdisc del dev "$PREFIX$h" root 2>/dev/null || true
  ip netns exec "$ns" tc qdisc del dev eth0 root 2>/dev/null || true
  ip netns exec "$ns" nft delete table inet p2ptb_fault 2>/dev/null || true
  log_fault "$h" all off ""
  echo "$h: faults cleared"
}

status() {
  [ -f "$TESTBED/hosts" ] || { echo "no testbed"; return 0; }
  for h in $(hosts); do
    local pid state="down"
    pid="$(cat "$TESTBED/$h/nspawn.pid" 2>/dev/null || echo 0)"
    kill -0 "$pid" 2>/dev/null && state="running"
    echo "$h $(addr $h) container $state"
  done
}

down() {
  local pids=()
  for h in $(hosts); do  # every container powers off at once (SIGTERM), then stragglers die
    local pid
    pid="$(cat "$TESTBED/$h/nspawn.pid" 2>/dev/null || echo)"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  for _ in $(seq 1 60); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.25
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for h in $(hosts); do
    local dir="$TESTBED/$h"
    if mountpoint -q "$dir/root"; then umount "$dir/root" 2>/dev/null || umount -l "$dir/root"; fi
    rm -rf "$dir"
    ip netns del "$PREFIX-$h" 2>/dev/null || true
    ip link del "$PREFIX$h" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  rm -f "$TESTBED/hosts" "$TESTBED/inventory.yml"
  echo "testbed down"
}

cmd="${1:-}"; shift || true
case "$cmd" in
  up) up "$@" ;;
  inventory) inventory "$@" ;;
  fault) [ $# -ge 2 ] || die "fault HOST KIND [ARG]"; fault "$@" ;;
  clear) [ $# -ge 1 ] || die "clear HOST"; clear_faults "$1" ;;
  status) status ;;
  down) down ;;
  *) sed -n '2,16p' "$0"; exit 2 ;;
esac
