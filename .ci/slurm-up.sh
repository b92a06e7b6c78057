#!/usr/bin/env bash
# Make a one-node Slurm cluster answer on this machine, with Slurm's OCI container support on runc (idempotent).
#
# What the cluster integration tests (tests/integration/test_slurm*.py) submit envman's sbatch scripts to:
# Debian's slurm-wlm 22.05 and munge, slurmctld + slurmd on 127.0.0.1, proctrack/linuxproc (no cgroup setup
# needed), and /etc/slurm/oci.conf for runc (crun fails on these machines' hybrid cgroups). Also installs what
# envman exports images with: skopeo and umoci (OCI layout and runtime bundle), squashfs-tools (enroot's
# .sqsh). State, spool and logs live under $ENVMAN_SLURM_DIR (default /var/tmp/envman-slurm).
#
#   bash .ci/slurm-up.sh          start (or confirm) the cluster
#   bash .ci/slurm-up.sh --down   stop the daemons this script started (the packages stay)
set -euo pipefail

DIR="${ENVMAN_SLURM_DIR:-/var/tmp/envman-slurm}"
CONF=/etc/slurm/slurm.conf
FEATURE="${ENVMAN_SLURM_FEATURE:-envman-ci}"  # the node's Slurm feature: what an sbatch --constraint names

log() { echo "slurm-up: $*" >&2; }
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

stop() {  # only the daemons started with this script's pid files, and wait until they are gone: a slurmctld
    # that exits after its successor started removes the successor's pid file with its own
    local f pid
    for f in "$DIR/slurmd.pid" "$DIR/slurmctld.pid"; do
        pid=$(cat "$f" 2>/dev/null || true)
        if [ -n "$pid" ] && $SUDO kill "$pid" 2>/dev/null; then
            for _ in $(seq 1 50); do $SUDO kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
            log "stopped $(basename "$f" .pid) ($pid)"
        fi
        $SUDO rm -f "$f"
    done
}

if [ "${1-}" = "--down" ]; then
    stop
    exit 0
fi

answers() {
    timeout 10 sinfo -h -N -o '%N %T' 2>/dev/null | grep -qE ' (idle|mixed|allocated)'
}
if command -v sinfo >/dev/null 2>&1 && answers && [ -f /etc/slurm/oci.conf ] && [ -f /etc/slurm/gres.conf ]; then
    log "cluster already answers: $(sinfo -h -N -o '%N %T %f' | head -n 1)"
    exit 0
fi

missing=()
for pair in sbatch:slurm-wlm munged:munge runc:runc skopeo:skopeo umoci:umoci mksquashfs:squashfs-tools; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
        { $SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null; }
fi

# munge: the key the package made (or a new one), its run folder, the daemon as the munge user
if [ ! -s /etc/munge/munge.key ]; then
    log "creating /etc/munge/munge.key"
    $SUDO mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null ||
        $SUDO dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    $SUDO chown munge:munge /etc/munge/munge.key
    $SUDO chmod 0400 /etc/munge/munge.key
fi
$SUDO mkdir -p /run/munge /var/log/munge /var/lib/munge
$SUDO chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! munge -n >/dev/null 2>&1; then
    log "starting munged"
    $SUDO runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 1 20); do munge -n >/dev/null 2>&1 && break; sleep 0.5; done
fi

host=$(hostname -s)
cpus=$(nproc)
mem_mib=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
$SUDO mkdir -p /etc/slurm "$DIR/state" "$DIR/spool" "$DIR/log"
log "writing $CONF (node $host, $cpus CPUs, ${mem_mib} MiB, feature $FEATURE)"
$SUDO tee "$CONF" >/dev/null <<EOF
# written by envman's .ci/slurm-up.sh: a one-node test cluster on loopback
ClusterName=envman
SlurmctldHost=${host}(127.0.0.1)
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
StateSaveLocation=${DIR}/state
SlurmdSpoolDir=${DIR}/spool
SlurmctldLogFile=${DIR}/log/slurmctld.log
SlurmdLogFile=${DIR}/log/slurmd.log
SlurmctldPidFile=${DIR}/slurmctld.pid
SlurmdPidFile=${DIR}/slurmd.pid
GresTypes=gpu
NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem_mib} Feature=${FEATURE} Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
# One GPU in Slurm's books and none in the machine: jobs that ask for --gpus-per-node=1 are scheduled, and a
# node that promises a GPU it cannot deliver is exactly what envman's preflight must catch
$SUDO tee /etc/slurm/gres.conf >/dev/null <<'EOF'
# written by envman's .ci/slurm-up.sh: one "GPU" whose device file is /dev/null (there is no GPU here)
Name=gpu File=/dev/null Count=1
EOF
# Slurm's OCI support (srun --container=BUNDLE): runc, with its state under a root of its own
$SUDO tee /etc/slurm/oci.conf >/dev/null <<'EOF'
# written by envman's .ci/slurm-up.sh: srun --container runs OCI bundles with runc
RunTimeQuery="runc --root=/run/runc-slurm state %n.%u.%j.%s.%t"
RunTimeKill="runc --root=/run/runc-slurm kill -a %n.%u.%j.%s.%t SIGTERM"
RunTimeDelete="runc --root=/run/runc-slurm delete --force %n.%u.%j.%s.%t"
RunTimeRun="runc --root=/run/runc-slurm run --bundle %b %n.%u.%j.%s.%t"
EOF

stop
if timeout 10 scontrol ping 2>/dev/null | grep -q "is UP"; then
    log "a slurmctld this script did not start answers: reconfiguring it"
    $SUDO scontrol reconfigure
else
    log "starting slurmctld (logs: $DIR/log)"
    $SUDO slurmctld
fi
log "starting slurmd"
$SUDO slurmd
for _ in $(seq 1 60); do
    if answers; then
        log "cluster answers: $(sinfo -h -N -o '%N %T %f' | head -n 1)"
        exit 0
    fi
    # a node left DOWN by an earlier run comes back on its own with ReturnToService=2; nudge it once it registered
    $SUDO scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1 || true
    sleep 1
done
log "no idle node after 60 s; last lines of the logs:"
tail -n 15 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
exit 1
