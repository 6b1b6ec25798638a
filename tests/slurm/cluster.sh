#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, for tests/test_slurm.py (and for trying
# profiles/slurm by hand). Debian 12, root, no systemd: the daemons are started directly.
#
#   tests/slurm/cluster.sh install   apt-get the packages if missing (slurmctld slurmd slurm-client munge)
#   tests/slurm/cluster.sh up        write /etc/slurm/{slurm,gres}.conf, start munged, slurmctld, slurmd
#   tests/slurm/cluster.sh down      cancel this cluster's jobs, stop the daemons this script started
#   tests/slurm/cluster.sh status    sinfo
#
# Exit status 2 means "cannot run here" (not root, no apt, a foreign SLURM setup): the test skips.
# Daemons are stopped by the pids in their pid files, never by name.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
STATE=${QCLM_SLURM_STATE:-/var/lib/qclm-slurm-test}
CONF=/etc/slurm/slurm.conf
GRES=/etc/slurm/gres.conf
DEV=/dev/qclm-fake-gpu
MARKER=qclm-test-cluster
PACKAGES=(slurmctld slurmd slurm-client munge)
COMMANDS=(slurmctld slurmd sbatch squeue sinfo scancel munged)

cannot() { echo "cluster.sh: cannot run here: $*" >&2; exit 2; }
fail() { echo "cluster.sh: $*" >&2; exit 1; }
installed() { for c in "${COMMANDS[@]}"; do PATH=$PATH:/usr/sbin command -v "$c" >/dev/null || return 1; done; }
[ "$(id -u)" = 0 ] || cannot "needs root (installs packages, writes /etc/slurm, starts daemons)"
export PATH=$PATH:/usr/sbin

pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_pidfile() {  # stop the process whose pid is in file $1, wait up to 10 s, then SIGKILL
    local file=$1 pid
    pid_alive "$file" || { rm -f "$file"; return 0; }
    pid=$(cat "$file")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    rm -f "$file"
}

do_install() {
    if installed; then echo "SLURM and munge already installed"; return 0; fi
    command -v apt-get >/dev/null || cannot "packages missing and no apt-get"
    echo "installing ${PACKAGES[*]} (apt-get update first)"
    timeout 180 apt-get update -qq || cannot "apt-get update failed (no network or no apt source)"
    # no service start during installation (no systemd; this script starts what it needs)
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [ ! -e $policy ]; then printf '#!/bin/sh\nexit 101\n' >$policy; chmod +x $policy; made_policy=1; fi
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends \
        "${PACKAGES[@]}" >/dev/null || { [ $made_policy = 1 ] && rm -f $policy; cannot "apt-get install failed"; }
    [ $made_policy = 1 ] && rm -f $policy
    installed || fail "packages installed but commands missing: ${COMMANDS[*]}"
}

do_up() {
    installed || cannot "SLURM not installed (run: $0 install)"
    if [ -e $CONF ] && ! grep -q "$MARKER" $CONF; then
        cannot "$CONF exists and was not written by this script: not touching a real SLURM setup"
    fi
    if pid_alive "$STATE/slurmctld.pid" || pid_alive "$STATE/slurmd.pid"; then
        echo "already up"; sinfo; return 0
    fi
    mkdir -p /etc/slurm "$STATE"
    # fake GPUs: character devices (major 1 minor 3, like /dev/null); SLURM rejects regular files
    for i in 0 1; do [ -c $DEV$i ] || mknod $DEV$i c 1 3; done
    local cpus mem_mb
    cpus=$(nproc)
    mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
    sed -e "s|@STATE@|$STATE|g" -e "s|@CPUS@|$cpus|" -e "s|@MEM_MB@|$mem_mb|" "$HERE/slurm.conf.in" >$CONF
    sed -e "s|@DEV@|$DEV|" "$HERE/gres.conf.in" >$GRES
    # munge: key, run directory, daemon as user munge (unless one already runs)
    if [ ! -s /etc/munge/munge.key ]; then
        mungekey --create --keyfile /etc/munge/munge.key 2>/dev/null \
            || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
    fi
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    if ! munge -n </dev/null >/dev/null 2>&1; then
        runuser -u munge -- munged --pid-file "/run/munge/munged.pid"
        cp /run/munge/munged.pid "$STATE/munged.pid"  # started by us: stopped by down
        for _ in $(seq 25); do munge -n </dev/null >/dev/null 2>&1 && break; sleep 0.2; done
    fi
    munge -n </dev/null | unmunge >/dev/null || fail "munge does not work"
    # a clean controller state: stale state can keep a drained node or old jobs
    rm -rf "$STATE/ctld" "$STATE/d"; mkdir -p "$STATE/ctld" "$STATE/d"
    slurmctld
    for _ in $(seq 50); do scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
    slurmd -N localhost
    local node=""
    for _ in $(seq 100); do
        node=$(sinfo -h -n localhost -o %T 2>/dev/null || true)
        [ "$node" = idle ] && break
        sleep 0.2
    done
    if [ "$node" != idle ]; then
        scontrol show node localhost >&2 || true
        tail -n 20 "$STATE/slurmctld.log" "$STATE/slurmd.log" >&2 || true
        fail "node not idle after 20 s (state: ${node:-none})"
    fi
    sinfo
}

do_down() {
    if pid_alive "$STATE/slurmctld.pid"; then
        scancel --partition debug 2>/dev/null || true
        for _ in $(seq 50); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
    fi
    stop_pidfile "$STATE/slurmd.pid"
    stop_pidfile "$STATE/slurmctld.pid"
    stop_pidfile "$STATE/munged.pid"
    echo "down"
}

case "${1:-}" in
    install) do_install ;;
    up) do_up ;;
    down) do_down ;;
    status) sinfo ;;
    *) echo "usage: $0 install|up|down|status" >&2; exit 64 ;;
esac
