#!/usr/bin/env bash
# Sets up (or restarts) a real one-node Slurm cluster on this Debian/Ubuntu machine, for
# tests and for running the Hydra submitit launcher locally. See scripts/slurm/README.md.
#
# Usage: sudo bash scripts/slurm/setup_local_slurm.sh [options]
#   --partition NAME    partition name (default: local)          env SLURM_LOCAL_PARTITION
#   --spool-dir DIR     state, logs and PID files                 env SLURM_LOCAL_SPOOL_DIR
#                       (default: /var/spool/slurm-local)
#   --conf-dir DIR      where slurm.conf is written               env SLURM_LOCAL_CONF_DIR
#                       (default: /etc/slurm; elsewhere, export SLURM_CONF to use it)
#   --no-install        never call apt-get                        env SLURM_LOCAL_INSTALL=0
#   --no-accounting     no MariaDB/slurmdbd (sacct won't work)    env SLURM_LOCAL_ACCOUNTING=0
#   --mem-margin PCT    memory kept back from Slurm (default 10)  env SLURM_LOCAL_MEM_MARGIN_PERCENT
#   --force             replace a slurm.conf not written by this script (a backup is kept)
#   --stop              stop everything this script started, then exit
#   -h, --help          show this help
# Re-running restarts the cluster cleanly with an empty queue.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$SCRIPT_DIR/lib/common.sh"
source "$SCRIPT_DIR/lib/config.sh"
source "$SCRIPT_DIR/lib/daemons.sh"

PARTITION=${SLURM_LOCAL_PARTITION:-local}
DEFAULT_SPOOL_DIR=/var/spool/slurm-local
SPOOL_DIR=${SLURM_LOCAL_SPOOL_DIR:-$DEFAULT_SPOOL_DIR}
# Debian/Ubuntu before Slurm 20.11 read /etc/slurm-llnl instead of /etc/slurm.
DEFAULT_CONF_DIR=/etc/slurm
[[ ! -d /etc/slurm && -d /etc/slurm-llnl ]] && DEFAULT_CONF_DIR=/etc/slurm-llnl
CONF_DIR=${SLURM_LOCAL_CONF_DIR:-$DEFAULT_CONF_DIR}
INSTALL=${SLURM_LOCAL_INSTALL:-1}
ACCOUNTING=${SLURM_LOCAL_ACCOUNTING:-1}
MEM_MARGIN_PERCENT=${SLURM_LOCAL_MEM_MARGIN_PERCENT:-10}
FORCE=0
ACTION=setup
CLUSTER_NAME=localcluster
CTLD_PORT=6817
SLURMD_PORT=6818
DBD_PORT=6819
DB_NAME=slurm_local_acct_db
DB_USER=slurm_local

usage() { sed -n '2,/^# Re-running/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

parse_args() {
    while (( $# )); do
        case "$1" in
            --partition) PARTITION="${2:?--partition needs a name}"; shift ;;
            --spool-dir) SPOOL_DIR="${2:?--spool-dir needs a directory}"; shift ;;
            --conf-dir) CONF_DIR="${2:?--conf-dir needs a directory}"; shift ;;
            --no-install) INSTALL=0 ;;
            --no-accounting) ACCOUNTING=0 ;;
            --mem-margin) MEM_MARGIN_PERCENT="${2:?--mem-margin needs a percentage}"; shift ;;
            --force) FORCE=1 ;;
            --stop) ACTION=stop ;;
            -h|--help) usage; exit 0 ;;
            *) die "unknown option '$1' (see --help)" ;;
        esac
        shift
    done
    [[ "$PARTITION" =~ ^[A-Za-z0-9_-]+$ ]] || die "partition name '$PARTITION' must be letters, digits, '_' or '-'"
    if [[ ! "$MEM_MARGIN_PERCENT" =~ ^[0-9]+$ ]] || (( MEM_MARGIN_PERCENT >= 90 )); then
        die "--mem-margin must be a whole percentage below 90, got '$MEM_MARGIN_PERCENT'"
    fi
    [[ "$INSTALL" =~ ^[01]$ ]] || die "SLURM_LOCAL_INSTALL must be 0 or 1, got '$INSTALL'"
    [[ "$ACCOUNTING" =~ ^[01]$ ]] || die "SLURM_LOCAL_ACCOUNTING must be 0 or 1, got '$ACCOUNTING'"
    [[ "$SPOOL_DIR" == /* && "$CONF_DIR" == /* ]] || die "--spool-dir and --conf-dir must be absolute paths"
}

required_packages() {
    local packages=(munge slurmctld slurmd slurm-client)
    [[ "$ACCOUNTING" == 1 ]] && packages+=(slurmdbd mariadb-server mariadb-client)
    printf '%s\n' "${packages[@]}"
}

missing_commands() {
    local commands=(munged munge slurmctld slurmd sbatch sinfo srun scontrol)
    [[ "$ACCOUNTING" == 1 ]] && commands+=(slurmdbd sacct sacctmgr mariadbd mysql mysqladmin)
    local command_name
    for command_name in "${commands[@]}"; do
        command -v "$command_name" >/dev/null 2>&1 || printf '%s ' "$command_name"
    done
}

install_packages() {
    local missing
    missing=$(missing_commands)
    if [[ -z "$missing" ]]; then
        log "packages already installed: $(slurmctld -V 2>/dev/null || echo slurm)"
        return 0
    fi
    [[ "$INSTALL" == 1 ]] || die "missing commands: $missing; run without --no-install, or: apt-get install $(required_packages | tr '\n' ' ')"
    command -v apt-get >/dev/null 2>&1 || die "missing commands: $missing and no apt-get to install them"
    log "missing commands: $missing; installing $(required_packages | tr '\n' ' ')"
    apt-get update -qq
    # shellcheck disable=SC2046
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        $(required_packages) >/dev/null
    missing=$(missing_commands)
    [[ -z "$missing" ]] || die "still missing after installing: $missing"
    log "installed $(slurmctld -V)"
}

prepare_directories() {
    install -d -m 0755 "$SPOOL_DIR" "$SPOOL_DIR/run" "$SPOOL_DIR/log" "$SPOOL_DIR/ctld"
    # slurmd keeps per-job state here; a restart starts from an empty directory.
    rm -rf "$SPOOL_DIR/slurmd"
    install -d -m 0755 "$SPOOL_DIR/slurmd"
}

node_state() { sinfo --noheader --nodes="$NODE_NAME" --format=%t 2>/dev/null | head -n1; }
node_is_idle() { [[ "$(node_state)" == idle ]]; }

wait_for_idle_node() {
    if ! wait_until 30 "node $NODE_NAME to be idle" node_is_idle; then
        # A node that came back after a crash may be down or drained; it is ours to resume.
        scontrol update NodeName="$NODE_NAME" State=RESUME 2>/dev/null || true
        wait_until 15 "node $NODE_NAME to be idle after resume" node_is_idle \
            || die "node $NODE_NAME is '$(node_state)', not idle; see $SPOOL_DIR/log/slurmd.log"
    fi
    log "$(sinfo --format='%P %a %l %D %t %N' | tr '\n' ';' | sed 's/;$//; s/;/ | /g')"
}

job_state() { scontrol show job "$1" 2>/dev/null | grep -oE 'JobState=[A-Z_]+' | cut -d= -f2; }
job_finished() { [[ "$(job_state "$1")" =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY)$ ]]; }

# smoke_test: one interactive step and one batch job (the path the submitit launcher takes).
smoke_test() {
    local job_flags=(--nodes=1 --ntasks=1 --cpus-per-task=1 --mem=100M --time=1 --partition="$PARTITION")
    timeout 60 srun "${job_flags[@]}" --job-name=setup-smoke-srun true \
        || die "srun smoke job failed; see $SPOOL_DIR/log/slurmctld.log and slurmd.log"
    log "srun -N1 true succeeded on partition $PARTITION"
    local job_id
    job_id=$(sbatch --parsable "${job_flags[@]}" --job-name=setup-smoke-sbatch --output=/dev/null \
        --wrap=true) || die "sbatch refused the smoke job"
    job_id=${job_id%%;*}
    # Poll rather than `sbatch --wait`, which checks only every few seconds.
    wait_until 60 "batch job $job_id to finish" job_finished "$job_id" \
        || die "batch smoke job $job_id did not finish (state '$(job_state "$job_id")')"
    [[ "$(job_state "$job_id")" == COMPLETED ]] \
        || die "batch smoke job $job_id ended $(job_state "$job_id"); see $SPOOL_DIR/log/slurmd.log"
    log "sbatch --wrap true (job $job_id) completed on partition $PARTITION"
}

stop_everything() {
    stop_slurm_daemons
    stop_mariadb
    stop_munge
    log "stopped the local Slurm cluster"
}

main() {
    parse_args "$@"
    (( EUID == 0 )) || die "run as root (e.g. sudo bash $0): the Slurm daemons need it"
    export SLURM_CONF="$CONF_DIR/slurm.conf"
    local start_ms
    start_ms=$(now_ms)
    if [[ "$ACTION" == stop ]]; then
        stop_everything
        return 0
    fi

    phase_begin "packages"; install_packages; phase_end
    refuse_foreign_config "$SLURM_CONF"
    phase_begin "stop previous daemons"
    [[ -e "$SLURM_CONF" ]] && stop_slurm_daemons
    refuse_foreign_daemons
    phase_end
    local cluster_start_ms
    cluster_start_ms=$(now_ms)
    phase_begin "configuration"
    detect_node_facts
    prepare_directories
    write_slurm_conf
    phase_end
    phase_begin "munge"; start_munge; phase_end
    if [[ "$ACCOUNTING" == 1 ]]; then
        phase_begin "accounting (MariaDB + slurmdbd)"
        start_mariadb
        grant_slurm_database
        write_slurmdbd_conf
        start_slurmdbd
        phase_end
    fi
    phase_begin "slurmctld + slurmd"; start_slurmctld; start_slurmd; wait_for_idle_node; phase_end
    phase_begin "smoke job"; smoke_test; phase_end

    log "cluster ready: partition '$PARTITION' on node $NODE_NAME; start-up $(format_ms $(( $(now_ms) - cluster_start_ms ))), total $(format_ms $(( $(now_ms) - start_ms )))"
    local stop_command="bash $0 --stop"
    [[ "$SPOOL_DIR" == "$DEFAULT_SPOOL_DIR" ]] || stop_command+=" --spool-dir $SPOOL_DIR"
    [[ "$CONF_DIR" == "$DEFAULT_CONF_DIR" ]] || stop_command+=" --conf-dir $CONF_DIR"
    log "config $SLURM_CONF; logs $SPOOL_DIR/log; stop with: $stop_command"
    [[ "$CONF_DIR" == "$DEFAULT_CONF_DIR" ]] || log "this config is not the default one: export SLURM_CONF=$SLURM_CONF"
}

main "$@"
