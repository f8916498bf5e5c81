# Shared helpers for the local Slurm scripts: logging, phase timing, waiting and
# stopping processes that this setup started (identified by their PID files only).
# shellcheck shell=bash

SETUP_LOG_PREFIX="[local-slurm]"

log() { printf '%s %s\n' "$SETUP_LOG_PREFIX" "$*"; }
warn() { printf '%s WARNING: %s\n' "$SETUP_LOG_PREFIX" "$*" >&2; }
die() { printf '%s ERROR: %s\n' "$SETUP_LOG_PREFIX" "$*" >&2; exit 1; }

now_ms() { date +%s%3N; }

# phase_begin NAME / phase_end: print how long each step took.
phase_begin() {
    PHASE_NAME="$1"
    PHASE_START_MS=$(now_ms)
    log "-> $PHASE_NAME"
}
phase_end() {
    local elapsed_ms=$(( $(now_ms) - PHASE_START_MS ))
    log "   done: $PHASE_NAME ($(format_ms "$elapsed_ms"))"
}
format_ms() { printf '%d.%03ds' $(( $1 / 1000 )) $(( $1 % 1000 )); }

# wait_until TIMEOUT_S DESCRIPTION CMD...: poll CMD every 0.2 s until it succeeds.
wait_until() {
    local timeout_s="$1" description="$2"
    shift 2
    local deadline_ms=$(( $(now_ms) + timeout_s * 1000 ))
    until "$@" >/dev/null 2>&1; do
        if (( $(now_ms) > deadline_ms )); then
            warn "timed out after ${timeout_s}s waiting for: $description"
            return 1
        fi
        sleep 0.2
    done
}

# pid_from_file FILE EXPECTED_COMM: print the PID recorded in FILE when that process
# is alive and its command name starts with EXPECTED_COMM (guards against PID reuse).
pid_from_file() {
    local pid_file="$1" expected_comm="$2" pid comm
    [[ -s "$pid_file" ]] || return 1
    pid=$(tr -dc '0-9' <"$pid_file")
    [[ -n "$pid" ]] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [[ "$comm" == "$expected_comm"* ]] && process_alive "$pid" || return 1
    printf '%s\n' "$pid"
}

# process_alive PID: true while PID runs. A zombie counts as gone (its reaper may be slow),
# but not a zombie thread-group leader whose other threads are still shutting down.
process_alive() {
    local state threads
    state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    threads=$(awk '/^Threads:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
    [[ -n "$state" ]] && { [[ "$state" != Z ]] || (( ${threads:-0} > 1 )); }
}
process_gone() { ! process_alive "$1"; }

# stop_by_pid_files "FILE:COMM:LABEL"...: SIGTERM every recorded process at once (each
# daemon takes a second or two to shut down), then wait; SIGKILL whatever is left after 15 s.
stop_by_pid_files() {
    local spec pid_file comm label pid pids=() labels=()
    for spec in "$@"; do
        IFS=: read -r pid_file comm label <<<"$spec"
        if pid=$(pid_from_file "$pid_file" "$comm"); then
            log "stopping $label (pid $pid)"
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid")
            labels+=("$label")
        fi
        rm -f "$pid_file"
    done
    local index
    for index in "${!pids[@]}"; do
        pid=${pids[$index]}
        wait_until 15 "${labels[$index]} to exit" process_gone "$pid" && continue
        warn "${labels[$index]} (pid $pid) ignored SIGTERM; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        wait_until 5 "${labels[$index]} to die" process_gone "$pid" || die "could not stop ${labels[$index]} (pid $pid)"
    done
}

# other_instances COMM PID_FILE: live processes named COMM other than the one in PID_FILE.
other_instances() {
    local comm="$1" pid_file="$2" ours=""
    ours=$(pid_from_file "$pid_file" "$comm" || true)
    local pid
    for pid in $(pgrep -x "$comm" || true); do
        [[ "$pid" != "$ours" ]] && process_alive "$pid" && printf '%s\n' "$pid"
    done
    return 0
}
