#!/usr/bin/env bash
# Landlock checks on one kernel. tests/kernels/run.sh runs this natively for the host's
# kernel, and inside each guest (through pid1.pl) for the kernels it boots.
#
#   guest.sh PROFILE PLAN bindir=DIR [SUITE=TEST-BINARY]...
#
# PLAN lists what to run, one "SUITE TEST" a line (run.sh expands tests/kernels/expect):
# SUITE guest is a check below (function t_<test, with - as _>); any other SUITE is a test of
# the host-built test binary given as SUITE=PATH, run with --exact. For each line, one
# "LWK-RESULT SUITE:TEST pass|fail" goes to $LWK_RESULTS; the details go to stdout (the
# guest's console, kept in target/kernels/logs/). Exit status: 1 if anything failed.
#
# The checks drive the built `landwall` and `landwall-drain` as a user would: a `claude` link
# to landwall in front of a stand-in agent (a shell script that leaves a marker, then runs its
# arguments), configuration in a root-owned file named by LANDWALL_CONFIG, real git, real
# processes. Scratch trees go under /var/tmp/landwall-kernels (never /tmp, which the default
# policy makes writable).
set -uo pipefail

PROFILE=${1:?profile}
PLAN=${2:?plan file}
shift 2
declare -A BIN=()
for a in "$@"; do BIN[${a%%=*}]=${a#*=}; done
BINDIR=${BIN[bindir]:?bindir=DIR}
LANDWALL=$BINDIR/landwall
DRAIN=$BINDIR/landwall-drain
HELPER=$BINDIR/lw-helper
: "${LWK_RESULTS:?LWK_RESULTS names where results go}"
exec 3>>"$LWK_RESULTS"

SYS_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
umask 022
mkdir -p /var/tmp/landwall-kernels
SCRATCH=$(mktemp -d "/var/tmp/landwall-kernels/$PROFILE-XXXXXX")
chmod 755 "$SCRATCH"
export PATH=$SYS_PATH

echo "guest.sh: profile $PROFILE on $(uname -r); LSMs: $(cat /sys/kernel/security/lsm 2>/dev/null || echo '?')"
ABI=$(LANDWALL_CONFIG=$SCRATCH/absent.toml "$LANDWALL" doctor 2>/dev/null |
    sed -n 's/^kernel .* with Landlock ABI \([0-9][0-9]*\)$/\1/p')
printf 'LWK-INFO abi=%s\n' "${ABI:-none}" >&3

# ---- Helpers.

FAILS=0
fail() {
    echo "    FAIL: $*"
    FAILS=$((FAILS + 1))
}
ok() { echo "    ok: $*"; }
# expect WHAT COMMAND...: the command must succeed.
expect() {
    local what=$1
    shift
    if "$@"; then ok "$what"; else fail "$what"; fi
}
has() { grep -qF -- "$2" <<<"$1"; }
has_re() { grep -qE -- "$2" <<<"$1"; }

# scene NAME: a fresh scratch tree in $S: shims/claude -> landwall, agents/claude-real (a
# stand-in that writes `marker` in its cwd, then runs its arguments), agents/lw-helper, home/,
# wt/ (the worktree), outside/secret, etc/ (root-owned, 0755: trusted for configuration).
# No configuration until `config` writes one.
scene() {
    S=$SCRATCH/$1
    mkdir -p "$S"/{shims,agents,home,wt,outside,etc}
    ln -s "$LANDWALL" "$S/shims/claude"
    # shellcheck disable=SC2016
    printf '#!/bin/sh\necho ran > "$PWD/marker"\nexec "$@"\n' >"$S/agents/claude-real"
    chmod 755 "$S/agents/claude-real"
    cp "$HELPER" "$S/agents/lw-helper"
    echo "outside secret" >"$S/outside/secret"
    CONF=$S/etc/absent.toml
    WD=$S/wt
    ENVX=()
}

# config LINE...: the system configuration file (LANDWALL_CONFIG) of this scene.
config() {
    CONF=$S/etc/landwall.toml
    printf '%s\n' "$@" >"$CONF"
}

# invoke PROGRAM ARGS...: runs it in $WD with a clean environment (plus ${ENVX[@]});
# sets OUT, ERR, RC.
invoke() {
    OUT=$(cd "$WD" && env -i PATH="$S/shims:$S/agents:$SYS_PATH" HOME="$S/home" TERM=xterm \
        LANG=C.UTF-8 LANDWALL_CONFIG="$CONF" "${ENVX[@]}" "$@" 2>"$S/stderr" </dev/null)
    RC=$?
    ERR=$(cat "$S/stderr")
    echo "    \$ ${*:1:4} ... -> status $RC"
    [ -z "$ERR" ] || sed 's/^/      stderr: /' <<<"$ERR" | head -20
}
shim() { invoke "$S/shims/claude" "$@"; }
lw() { invoke "$LANDWALL" "$@"; }

want_rc() { expect "exit status $1 (got $RC)" test "$RC" = "$1"; }
ran() { expect "the agent ran" test -e "$WD/marker"; }
never_ran() { expect "the agent never ran" test ! -e "$WD/marker"; }
one_line_err() { expect "one line on stderr" test "$(grep -c . <<<"$ERR")" = 1; }
err_has() { expect "stderr says \"$1\"" has "$ERR" "$1"; }
out_has() { expect "output says \"$1\"" has "$OUT" "$1"; }
out_has_re() { expect "output matches /$1/" has_re "$OUT" "$1"; }

# The refusal every fail-closed check wants: STATUS, one line naming REASON..., no agent.
refused() {
    local status=$1
    shift
    want_rc "$status"
    one_line_err
    for r in "$@"; do err_has "$r"; done
    expect "nothing on stdout" test -z "$OUT"
    never_ran
}

abi_from_doctor() { sed -n 's/^kernel .* with Landlock ABI \([0-9][0-9]*\)$/\1/p' <<<"$OUT"; }

# ---- Files.

# The agent's view of files: inside the worktree it writes, reads and renames across
# directories (REFER); outside it is refused with EACCES, the system is read-only, /root and
# /etc/shadow are denied. MIN_ABI (optional) goes in the configuration.
files_probe() {
    scene "files$1"
    [ -z "$1" ] || config "min_abi = $1"
    mkdir -p "$S/wt/a" "$S/wt/b"
    echo data >"$S/wt/a/f"
    local p=/landwall-kernels-probe-$$
    # shellcheck disable=SC2016
    local script='h=$1; shift
        while [ $# -ge 2 ]; do
            if [ "$1" = rename ]; then "$h" rename "$2" "$3"; echo "rename $2 $?"; shift 3
            else "$h" "$1" "$2"; echo "$1 $2 $?"; shift 2; fi
        done
        ls / >/dev/null 2>&1; echo "list / $?"'
    shim sh -c "$script" sh "$S/agents/lw-helper" \
        write "$S/wt/new" read "$S/wt/a/f" rename "$S/wt/a/f" "$S/wt/b/f" \
        read "$S/outside/secret" write "$S/outside/planted" write "$S/outside/secret" \
        rename "$S/outside/secret" "$S/wt/stolen" \
        read /etc/passwd read /etc/shadow write "/etc$p" write "/usr$p" mkdir "/var$p" \
        mkdir "/root$p"
    want_rc 0
    ran
    echo "$OUT" | sed 's/^/      /'
    st() { awk -v op="$1" -v p="$2" '$1 == op && $2 == p { print $3 }' <<<"$OUT"; }
    for ok_op in "write $S/wt/new" "read $S/wt/a/f" "rename $S/wt/a/f" "read /etc/passwd"; do
        # shellcheck disable=SC2086
        expect "$ok_op: allowed" test "$(st $ok_op)" = 0
    done
    for denied in "read $S/outside/secret" "write $S/outside/planted" \
        "write $S/outside/secret" "read /etc/shadow" "write /etc$p" "write /usr$p" \
        "mkdir /var$p" "mkdir /root$p"; do
        # shellcheck disable=SC2086
        expect "$denied: EACCES" test "$(st $denied)" = 13
    done
    expect "rename from outside into the worktree: refused" test "$(st rename "$S/outside/secret")" != 0
    expect "listing / is refused" test "$(st list /)" != 0
    expect "outside/secret unchanged" test "$(cat "$S/outside/secret")" = "outside secret"
    expect "nothing planted outside" test ! -e "$S/outside/planted" -a ! -e "$S/wt/stolen"
    expect "nothing written in the system" test ! -e "/etc$p" -a ! -e "/usr$p" -a ! -e "/var$p" -a ! -e "/root$p"
    rm -rf "/etc${p:?}" "/usr${p:?}" "/var${p:?}" "/root${p:?}"
}
t_min_abi_2_outside_denied() { files_probe 2; }
t_outside_denied() { files_probe ""; }

# git commit in a linked worktree: git renames its temporary object and ref files across
# directories (REFER, ABI 2). The main checkout and the repository's config stay out of reach.
git_probe() {
    scene "git$1"
    [ -z "$1" ] || config "min_abi = $1"
    local repo=$S/repo g=(git -c user.name=lwk -c user.email=lwk@landwall.invalid -c init.defaultBranch=main)
    "${g[@]}" init -q "$repo" && echo one >"$repo/file" && "${g[@]}" -C "$repo" add file &&
        "${g[@]}" -C "$repo" commit -q -m one && "${g[@]}" -C "$repo" worktree add -q -b task "$S/linked" ||
        fail "setting up the repository"
    local config_before
    config_before=$(cksum <"$repo/.git/config")
    WD=$S/linked
    # shellcheck disable=SC2016
    shim sh -c 'echo two >> file && git add file &&
        git -c user.name=agent -c user.email=agent@landwall.invalid commit -q -m "from the agent" &&
        echo committed
        cat "$1" >/dev/null 2>&1; echo "read-main $?"
        echo "[x]" >> "$2" 2>/dev/null; echo "write-config $?"' sh "$repo/file" "$repo/.git/config"
    want_rc 0
    ran
    out_has committed
    expect "the main checkout is unreadable" has "$OUT" "read-main 1"
    expect "the repository's config is not writable" has_re "$OUT" "write-config [1-9]"
    expect "the commit is on branch task" test "$(git -C "$repo" log -1 --format=%s task)" = "from the agent"
    expect "the repository's config is unchanged" test "$(cksum <"$repo/.git/config")" = "$config_before"
}
t_min_abi_2_git_commit_in_linked_worktree() { git_probe 2; }
t_git_commit_in_linked_worktree() { git_probe ""; }

# Protected paths in a main checkout (issue 19): .git/config and .vscode/tasks.json are
# read-only in the launch's mount namespace, .git cannot be renamed away, and an .envrc the
# agent creates is set aside by the watcher. Mount-setattr (5.12) and inotify on every kernel.
protect_probe() {
    scene "protect$1"
    [ -z "$1" ] || config "min_abi = $1"
    local g=(git -c user.name=lwk -c user.email=lwk@landwall.invalid -c init.defaultBranch=main)
    "${g[@]}" init -q "$S/wt" && mkdir -p "$S/wt/.vscode" && echo '{}' >"$S/wt/.vscode/tasks.json" ||
        fail "setting up the repository"
    local config_before tasks_before
    config_before=$(cksum <"$S/wt/.git/config")
    tasks_before=$(cksum <"$S/wt/.vscode/tasks.json")
    WD=$S/wt
    # shellcheck disable=SC2016
    shim sh -c 'echo "[core] fsmonitor = x" >> .git/config; echo "config $?"
        mv .git .g 2>/dev/null; echo "rename $?"
        echo evil > .vscode/tasks.json; echo "tasks $?"
        echo evil > .envrc; echo "envrc $?"'
    want_rc 0
    ran
    expect "the config is not writable" has_re "$OUT" "config [1-9]"
    expect ".git cannot be renamed away" has_re "$OUT" "rename [1-9]"
    expect "tasks.json is not writable" has_re "$OUT" "tasks [1-9]"
    expect "the agent could create .envrc" has "$OUT" "envrc 0"
    expect "the config is unchanged" test "$(cksum <"$S/wt/.git/config")" = "$config_before"
    expect "tasks.json is unchanged" test "$(cksum <"$S/wt/.vscode/tasks.json")" = "$tasks_before"
    expect ".git is where it was" test -d "$S/wt/.git" -a ! -e "$S/wt/.g"
    local i=0
    while [ -e "$S/wt/.envrc" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    expect ".envrc was set aside" test ! -e "$S/wt/.envrc"
    expect "its content is kept aside" test -n "$(ls "$S/wt/" -a | grep '^\.envrc\.landwall-swept-')"
}
t_min_abi_2_protected_paths_hold() { protect_probe 2; }
t_protected_paths_hold() { protect_probe ""; }

# truncate(2) on a file granted read-only: TRUNCATE is ABI 3.
truncate_probe() {
    scene "trunc$1"
    mkdir -p "$S/ro"
    echo "read-only data" >"$S/ro/data"
    config ${1:+"min_abi = $1"} "read_only = [\"$S/ro\"]"
    shim "$S/agents/lw-helper" write "$S/ro/data"
    expect "writing the read-only file: EACCES" test "$RC" = 13
    # shellcheck disable=SC2016
    shim perl -e 'truncate($ARGV[0], 0) or die "truncate: $!\n"; print "truncated\n"' "$S/ro/data"
}
t_min_abi_2_gap_truncate_not_enforced() {
    truncate_probe 2
    want_rc 0
    expect "truncate(2) went through, as doctor says (TRUNCATE needs ABI 3)" test ! -s "$S/ro/data"
}
t_truncate_read_only_denied() {
    truncate_probe ""
    expect "truncate(2) refused" test "$RC" != 0
    err_has "Permission denied"
    expect "the file is unchanged" test "$(cat "$S/ro/data")" = "read-only data"
}

# ---- Processes.

t_min_abi_2_caps_nnp_seccomp() {
    scene caps
    config "min_abi = 2"
    shim grep -E '^(NoNewPrivs|Seccomp|Cap(Inh|Prm|Eff|Bnd|Amb)):' /proc/self/status
    want_rc 0
    echo "$OUT" | sed 's/^/      /'
    out_has_re $'^NoNewPrivs:\t1$'
    # No terminal here (stdin /dev/null, no controlling terminal): the filter is on anyway
    # (every launch: Unix sockets, io_uring, keyrings, terminal input).
    out_has_re $'^Seccomp:\t2$'
    for c in Inh Prm Eff Bnd Amb; do out_has_re "^Cap$c:"$'\t'"0+$"; done
    # On a terminal (script(1) runs it with a pty as controlling terminal): on as well.
    invoke script -qec "$S/shims/claude grep -E '^Seccomp:' /proc/self/status" /dev/null
    want_rc 0
    OUT=$(tr -d '\r' <<<"$OUT")
    echo "$OUT" | sed 's/^/      /'
    out_has_re $'^Seccomp:\t2$'
}

# A process outside the wall, same user: scopes (ABI 6) would refuse the signal.
t_min_abi_2_gap_signals_not_scoped() {
    scene signal
    config "min_abi = 2"
    sleep 60 &
    local victim=$!
    # shellcheck disable=SC2016
    shim sh -c 'kill -TERM "$1"; echo "kill $?"' sh "$victim"
    out_has "kill 0"
    wait "$victim"
    local vs=$?
    expect "the outside process got SIGTERM, as doctor says (scopes need ABI 6) (status $vs)" test "$vs" = 143
    kill "$victim" 2>/dev/null
}

t_min_abi_2_tcp_rules_refused() {
    scene tcp
    config "min_abi = 2" "[network]" "connect_tcp = [443]"
    shim sh -c 'echo hello'
    refused 100 "ABI 4" "Landlock ABI 2"
}

# ---- Refusals.

t_shim_refuses_below_min_abi() {
    scene below
    shim sh -c 'echo hello'
    refused 100 "Landlock ABI 2" "ABI 3"
}
t_shim_refuses_no_landlock() {
    scene noll
    shim sh -c 'echo hello'
    refused 100 "no Landlock"
}
t_shim_refuses_no_landlock_even_with_min_abi_1() {
    scene noll1
    config "min_abi = 1"
    shim sh -c 'echo hello'
    refused 100 "no Landlock"
}
t_run_refuses_no_landlock() {
    scene runnoll
    lw run -- sh -c 'echo ran > marker'
    refused 100 "no Landlock"
}

# ---- doctor.

t_kernel_landlock_abi() {
    scene kabi
    lw doctor
    local abi
    abi=$(abi_from_doctor)
    echo "      $(grep '^kernel' <<<"$OUT")"
    case $PROFILE in
    abi2) expect "Landlock ABI 2" test "$abi" = 2 ;;
    abi6) expect "Landlock ABI 6" test "$abi" = 6 ;;
    abi9) expect "Landlock ABI 9 or newer ($abi)" test "${abi:-0}" -ge 9 ;;
    nolandlock) expect "no Landlock" test -z "$abi" ;;
    *) expect "Landlock ABI 3 or newer ($abi)" test "${abi:-0}" -ge 3 ;;
    esac
}

t_doctor_says_min_abi_not_met() {
    scene docbelow
    lw doctor
    want_rc 1
    out_has "with Landlock ABI 2"
    out_has_re "^min ABI +3 \(default\): NOT MET"
    out_has "the shim CANNOT work here"
}

# Every feature above ABI 2 is listed as not available, hence not enforced.
t_min_abi_2_doctor_lists_what_is_not_covered() {
    scene doc2
    config "min_abi = 2"
    lw doctor
    want_rc 0
    echo "$OUT" | grep -E '^ *\[|^min' | sed 's/^/      /'
    out_has_re "^min ABI +2 \(configured\): met"
    out_has_re '^  \[x\] REFER.*\(ABI 2\): enforced'
    for f in "TRUNCATE" "TCP bind/connect" "IOCTL_DEV" "scopes" "audit of denials"; do
        out_has_re "^  \[ \] $f.*NOT available"
    done
}

t_doctor_says_audit_unavailable() {
    scene doc6
    lw doctor
    want_rc 0
    echo "$OUT" | grep -E '^ *\[|^min' | sed 's/^/      /'
    out_has_re '^  \[ \] audit of denials after exec \(ABI 7\): NOT available'
    out_has_re '^  \[x\] scopes.*\(ABI 6\): enforced'
    out_has_re '^  \[x\] TRUNCATE.*enforced'
    out_has_re '^  \[x\] IOCTL_DEV.*enforced'
    out_has_re '^  \[x\] TCP bind/connect by port \(ABI 4\): available'
    out_has_re '^min ABI +3 \(default\): met'
}

# Whatever the host's ABI: each feature is marked available exactly when the ABI has it.
t_doctor_reports_every_feature() {
    scene dochost
    lw doctor
    want_rc 0
    local abi line since n=0
    abi=$(abi_from_doctor)
    echo "$OUT" | grep -E '^ *\[|^min' | sed 's/^/      /'
    while IFS= read -r line; do
        n=$((n + 1))
        since=$(sed -n 's/.*(ABI \([0-9]*\)).*/\1/p' <<<"$line")
        if [ "$since" -le "${abi:-0}" ]; then
            expect "listed as available: $line" has "$line" "[x]"
        else
            expect "listed as not available: $line" has "$line" "[ ]"
        fi
    done < <(grep -E '^  \[.\] ' <<<"$OUT")
    expect "doctor lists the features ($n)" test "$n" -ge 7
}

t_doctor_says_no_landlock() {
    scene docnoll
    lw doctor
    want_rc 1
    out_has "offers no Landlock"
    out_has "the shim CANNOT work here"
}

t_landlock_not_in_lsm_list() {
    local lsm
    lsm=$(cat /sys/kernel/security/lsm 2>/dev/null)
    echo "      active LSMs: $lsm"
    expect "the LSM list is readable" test -n "$lsm"
    expect "landlock is not in it" test "${lsm/landlock/}" = "$lsm"
}

# ---- The drain daemon.

# drain_scene NAME CONFIG-LINE...: a spool, a worktree root work/ with work/w, the config (the
# given lines, then [drain] with the root), and one queued job in jobs/w ($JOB) that leaves
# a marker, then tries to write outside.
drain_scene() {
    scene "$1"
    shift
    mkdir -p "$S/jobs/w" "$S/spool"
    config "$@" "[drain]" "worktree_roots = [\"$S/jobs\"]"
    WD=$S/jobs/w
    # shellcheck disable=SC2016
    lw submit --spool "$S/spool" --worktree "$S/jobs/w" -- \
        sh -c 'echo ran > marker; echo x > "$1/from-job"; echo outside=$?' sh "$S/outside"
    JOB=$(tr -d '[:space:]' <<<"$OUT")
    expect "a job is queued ($JOB)" test -n "$JOB" -a -e "$S/spool/queue/$JOB.toml"
    WD=$S
}
daemon() { invoke "$DRAIN" --spool "$S/spool" --config "$CONF" --once; }
snapshot() { (cd "$S/spool" && find . -printf '%y %m %s %T@ %p\n' | sort); }

# LANDWALL_DRAIN_SANDBOX=1 and a wall that cannot go up: status 100, the spool untouched.
drain_refuses() {
    local before
    before=$(snapshot)
    ENVX=(LANDWALL_DRAIN_SANDBOX=1)
    daemon
    want_rc 100
    one_line_err
    for r in "$@"; do err_has "$r"; done
    expect "the spool is untouched" test "$(snapshot)" = "$before"
    expect "no lock file" test ! -e "$S/spool/lock"
    expect "the job is still queued" test -e "$S/spool/queue/$JOB.toml"
    expect "the job never ran" test ! -e "$S/jobs/w/marker"
}
t_drain_sandbox_refuses_below_min_abi() {
    drain_scene drainbelow
    drain_refuses LANDWALL_DRAIN_SANDBOX=1 "Landlock ABI 2"
}
t_drain_sandbox_exits_100_spool_untouched() {
    drain_scene drainnoll
    drain_refuses LANDWALL_DRAIN_SANDBOX=1 "no Landlock"
}

# Without the flag the daemon serves, but the job's own wall cannot go up: never started.
t_drain_job_not_started_without_landlock() {
    drain_scene drainjob
    daemon
    want_rc 0
    err_has "WITHOUT its own wall"
    local r=$S/spool/failed/$JOB.result.toml
    expect "the job failed" test -e "$r"
    local text
    text=$(cat "$r" 2>/dev/null)
    echo "$text" | sed 's/^/      /'
    expect "reason: not started, no Landlock" has_re "$text" '^reason = "not started: .*no Landlock'
    expect "exit_code = 100" has_re "$text" '^exit_code = 100$'
    expect "the job never ran" test ! -e "$S/jobs/w/marker"
}

# With min_abi = 2 the daemon walls itself in on ABI 2 and its job runs behind its own wall.
t_min_abi_2_drain_sandbox_serves() {
    drain_scene drain2 "min_abi = 2"
    ENVX=(LANDWALL_DRAIN_SANDBOX=1)
    daemon
    want_rc 0
    err_has "walled in"
    expect "the job is done" test -e "$S/spool/done/$JOB.result.toml"
    expect "the job ran" test -e "$S/jobs/w/marker"
    local log
    log=$(cat "$S/spool/logs/$JOB.log" 2>/dev/null)
    echo "      job log: $log"
    expect "the job could not write outside" test ! -e "$S/outside/from-job"
    expect "its log shows the refused write" has_re "$log" 'outside=[1-9]'
}

# ---- The drain's caps per job, on a cgroup v2 hierarchy with its controllers (mounted by
# tests/kernels/init; the host's cgroup v2 has none, so `make test` shows the rlimits).

# caps_scene NAME DRAIN-LINE...: a spool, a worktree root, the config with the given lines in
# [drain], and a daemon run with `--once` after `queue` has queued the jobs.
caps_scene() {
    scene "$1"
    shift
    mkdir -p "$S/jobs/w" "$S/spool"
    config "[drain]" "worktree_roots = [\"$S/jobs\"]" "$@"
    WD=$S/jobs/w
}
# queue ARGV...: submits a job in jobs/w; its ID in the named variable $Q.
queue() {
    lw submit --spool "$S/spool" --worktree "$S/jobs/w" -- "$@"
    Q=$(tr -d '[:space:]' <<<"$OUT")
    expect "a job is queued ($Q)" test -n "$Q" -a -e "$S/spool/queue/$Q.toml"
}
result_of() { cat "$S/spool/$2/$1.result.toml" 2>/dev/null; }

t_drain_memory_max_kills_a_job() {
    caps_scene drainmem 'memory_max = "64M"'
    queue python3 -c 'b = b"x" * (256 << 20); print("allocated")'
    local hog=$Q
    queue sh -c 'echo next-ran'
    local next=$Q
    invoke "$DRAIN" --spool "$S/spool" --config "$CONF" --once
    want_rc 0
    err_has "caps: memory.max, pids.max, cpu.max"
    local r
    r=$(result_of "$hog" failed)
    echo "$r" | sed 's/^/      /'
    expect "the allocating job failed: memory.max 64M reached" has "$r" 'reason = "memory.max 64M reached"'
    expect "it never allocated" test -z "$(grep allocated "$S/spool/logs/$hog.log" 2>/dev/null)"
    expect "the next job ran" test -e "$S/spool/done/$next.result.toml"
    expect "no job cgroup is left" test -z "$(ls -d /sys/fs/cgroup/landwall-drain/job.* 2>/dev/null)"
}

t_drain_pids_max_stops_a_fork_bomb() {
    caps_scene drainpids 'tasks_max = 64'
    # Forks until a fork fails; every child sleeps. Under pids.max 64 the 64th task fails.
    queue python3 -c '
import os, sys, time
n = 0
try:
    for n in range(1000):
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
except OSError as e:
    print("fork failed after", n, e)
    sys.exit(3)
print("forked them all")'
    local bomb=$Q
    queue sh -c 'echo next-ran'
    local next=$Q
    local start=$SECONDS
    invoke "$DRAIN" --spool "$S/spool" --config "$CONF" --once
    want_rc 0
    local r
    r=$(result_of "$bomb" failed)
    echo "$r" | sed 's/^/      /'
    expect "the fork bomb failed: pids.max 64 reached" has "$r" 'reason = "pids.max 64 reached"'
    expect "its forks were refused" has "$(cat "$S/spool/logs/$bomb.log" 2>/dev/null)" "fork failed after"
    expect "the next job ran" test -e "$S/spool/done/$next.result.toml"
    expect "its sleeping children did not hold the daemon up ($((SECONDS - start))s)" test $((SECONDS - start)) -lt 50
    expect "none of them is left" test -z "$(pgrep -f 'forked them all' 2>/dev/null)"
}

# ---- Run the plan.

declare -a GUEST=()
declare -A E2E=()
declare -a SUITES=()
while read -r suite test; do
    [ -n "$suite" ] || continue
    if [ "$suite" = guest ]; then
        GUEST+=("$test")
    else
        [ -n "${E2E[$suite]+x}" ] || SUITES+=("$suite")
        E2E[$suite]+="$test "
    fi
done <"$PLAN"

TOTAL_FAILED=0
report() {
    printf 'LWK-RESULT %s %s\n' "$1" "$2" >&3
    [ "$2" = pass ] || TOTAL_FAILED=$((TOTAL_FAILED + 1))
}

for t in "${GUEST[@]}"; do
    fn=t_${t//-/_}
    echo "== guest:$t"
    if ! declare -F "$fn" >/dev/null; then
        echo "    no such check in guest.sh"
        report "guest:$t" fail
        continue
    fi
    (
        FAILS=0
        "$fn"
        exit $((FAILS > 0))
    )
    if [ $? = 0 ]; then report "guest:$t" pass; else report "guest:$t" fail; fi
done

for suite in "${SUITES[@]}"; do
    bin=${BIN[$suite]:-}
    read -r -a names <<<"${E2E[$suite]}"
    echo "== $suite: ${#names[@]} tests of ${bin:-(no binary)}"
    out=$SCRATCH/$suite.out
    if [ -n "$bin" ] && [ -x "$bin" ]; then
        (cd "$SCRATCH" && "$bin" --exact --test-threads=1 "${names[@]}") 2>&1 | tee "$out"
    else
        echo "no test binary for $suite" | tee "$out"
    fi
    for n in "${names[@]}"; do
        if grep -qxF "test $n ... ok" "$out"; then
            report "$suite:$n" pass
        else
            report "$suite:$n" fail
        fi
    done
done

echo "guest.sh: $PROFILE: $TOTAL_FAILED failed"
if [ "$TOTAL_FAILED" = 0 ]; then rm -rf "$SCRATCH"; else echo "guest.sh: scratch kept in $SCRATCH"; fi
[ "$TOTAL_FAILED" = 0 ]
