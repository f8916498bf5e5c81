# Starts and stops the daemons of the local cluster: munged, MariaDB and slurmdbd (only
# with accounting), slurmctld and slurmd. A munged or MariaDB that was already serving is
# reused and left alone; only processes this setup started are ever stopped.
# shellcheck shell=bash

MUNGE_SOCKET=/run/munge/munge.socket.2
MARIADB_SOCKET=/run/mysqld/mysqld.sock

munge_works() {
    # A dead munged leaves its socket behind and the munge client then retries for seconds.
    local pid_file=/run/munge/munged.pid
    if [[ -s "$pid_file" ]] && ! process_alive "$(tr -dc '0-9' <"$pid_file")"; then
        return 1
    fi
    munge -n 2>/dev/null | unmunge >/dev/null 2>&1
}
mariadb_works() { mysqladmin --socket="$MARIADB_SOCKET" ping >/dev/null 2>&1; }

# Marker files record which shared services this setup started, so --stop leaves others alone.
started_marker() { printf '%s/run/started-%s\n' "$SPOOL_DIR" "$1"; }

ensure_munge_key() {
    local key=/etc/munge/munge.key
    [[ -s "$key" ]] && return 0
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null 2>&1; then
        mungekey --create --keyfile="$key" --force
    else
        dd if=/dev/urandom of="$key" bs=1024 count=1 status=none
    fi
    chown munge:munge "$key" 2>/dev/null || true
    chmod 400 "$key"
    log "created munge key $key"
}

start_munge() {
    if munge_works; then
        log "munged is already serving $MUNGE_SOCKET; reusing it"
        return 0
    fi
    ensure_munge_key
    local run_as=munge
    getent passwd munge >/dev/null || run_as=root
    install -d -m 0755 -o "$run_as" /run/munge
    install -d -m 0700 -o "$run_as" /var/log/munge /var/lib/munge
    if [[ "$run_as" == munge ]]; then
        runuser -u munge -- munged
    else
        munged --force
    fi
    touch "$(started_marker munged)"
    wait_until 10 "munged to answer" munge_works || die "munged did not start; see /var/log/munge/munged.log"
    log "started munged as $run_as"
}

stop_munge() {
    local marker
    marker=$(started_marker munged)
    [[ -e "$marker" ]] || return 0
    if munge_works; then
        log "stopping munged"
        munged --stop >/dev/null 2>&1 || warn "munged --stop failed"
    fi
    rm -f "$marker"
}

start_mariadb() {
    if mariadb_works; then
        log "MariaDB is already serving $MARIADB_SOCKET; reusing it"
        return 0
    fi
    install -d -m 0755 -o mysql -g mysql /run/mysqld "$SPOOL_DIR/mariadb"
    if [[ ! -d /var/lib/mysql/mysql ]]; then
        log "initialising the MariaDB data directory"
        mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
    fi
    # Socket only: the database needs no TCP port for slurmdbd on the same machine.
    setsid /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql --socket="$MARIADB_SOCKET" \
        --pid-file="$SPOOL_DIR/mariadb/mariadbd.pid" --skip-networking \
        --log-error="$SPOOL_DIR/mariadb/mariadbd.log" </dev/null >/dev/null 2>&1 &
    touch "$(started_marker mariadbd)"
    wait_until 60 "MariaDB to answer" mariadb_works || die "MariaDB did not start; see $SPOOL_DIR/mariadb/mariadbd.log"
    log "started MariaDB (socket $MARIADB_SOCKET)"
}

stop_mariadb() {
    local marker
    marker=$(started_marker mariadbd)
    [[ -e "$marker" ]] || return 0
    stop_by_pid_files "$SPOOL_DIR/mariadb/mariadbd.pid:mariadbd:MariaDB"
    rm -f "$marker"
}

# grant_slurm_database: the slurmdbd user gets a fresh random password on every run.
grant_slurm_database() {
    DB_PASSWORD=$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')
    mysql --socket="$MARIADB_SOCKET" <<EOF
CREATE DATABASE IF NOT EXISTS \`$DB_NAME\`;
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost';
ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASSWORD';
GRANT ALL ON \`$DB_NAME\`.* TO '$DB_USER'@'localhost';
EOF
}

start_slurmdbd() {
    slurmdbd
    wait_until 60 "slurmdbd to answer" sacctmgr --noheader --immediate list cluster \
        || die "slurmdbd did not start; see $SPOOL_DIR/log/slurmdbd.log"
    log "started slurmdbd (port $DBD_PORT)"
}

start_slurmctld() {
    # -c: start from an empty job queue so that a re-run gives a clean cluster.
    slurmctld -c
    wait_until 30 "slurmctld to answer" scontrol ping \
        || die "slurmctld did not start; see $SPOOL_DIR/log/slurmctld.log"
    log "started slurmctld (port $CTLD_PORT)"
}

start_slurmd() {
    slurmd -N "$NODE_NAME"
    wait_until 30 "slurmd to start" pid_from_file "$SPOOL_DIR/run/slurmd.pid" slurmd \
        || die "slurmd did not start; see $SPOOL_DIR/log/slurmd.log"
    log "started slurmd for node $NODE_NAME (port $SLURMD_PORT)"
}

queue_is_empty() { [[ -z "$(timeout 10 squeue --noheader 2>/dev/null)" ]]; }

# cancel_all_jobs: best effort, so that no job steps outlive the daemons being restarted.
cancel_all_jobs() {
    pid_from_file "$SPOOL_DIR/run/slurmctld.pid" slurmctld >/dev/null || return 0
    local job_ids
    job_ids=$(timeout 10 squeue --noheader --format=%i 2>/dev/null || true)
    [[ -n "$job_ids" ]] || return 0
    log "cancelling jobs still queued: $(echo "$job_ids" | tr '\n' ' ')"
    # shellcheck disable=SC2086
    timeout 10 scancel $job_ids 2>/dev/null || true
    wait_until 15 "jobs to leave the queue" queue_is_empty || true
}

stop_slurm_daemons() {
    cancel_all_jobs
    stop_by_pid_files "$SPOOL_DIR/run/slurmd.pid:slurmd:slurmd" \
        "$SPOOL_DIR/run/slurmctld.pid:slurmctld:slurmctld"
    # slurmdbd last, so that slurmctld can hand over its final job records.
    stop_by_pid_files "$SPOOL_DIR/run/slurmdbd.pid:slurmdbd:slurmdbd"
}

# refuse_foreign_daemons: a Slurm daemon that this setup did not start (a site installation,
# a systemd unit) would fight over the ports; stop rather than kill someone else's process.
refuse_foreign_daemons() {
    local daemon others
    for daemon in slurmctld slurmd slurmdbd; do
        others=$(other_instances "$daemon" "$SPOOL_DIR/run/$daemon.pid")
        if [[ -n "$others" ]]; then
            die "$daemon is already running (pid $(echo "$others" | tr '\n' ' ')) but was not started by this script; stop it first (e.g. systemctl stop $daemon)"
        fi
    done
}
