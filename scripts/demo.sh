#!/usr/bin/env bash
# `make demo`: the wall on this machine. A stand-in agent (a shell script installed as
# `claude-real`, with a `claude` link to the built landwall ahead of it on PATH) starts in a
# linked worktree of a fresh git repository and tries a handful of things; the table shows
# what Unix permissions alone would allow and what happened inside the wall.
#
# Everything lives in one scratch directory under /var/tmp (not /tmp: the default policy
# makes /tmp writable, so "another project" there would be reachable), removed on exit.
# Exits non-zero if anything turns out differently from what the default policy promises.
set -euo pipefail

landwall=$(realpath "${1:?usage: demo.sh PATH/TO/landwall}")
demo=$(mktemp -d /var/tmp/landwall-demo.XXXXXX)
# A server outside the wall, on a Unix socket: git's credential cache, holding a password.
sock=$demo/cred/socket
trap 'git credential-cache --socket "$sock" exit >/dev/null 2>&1 || true; rm -rf "$demo"' EXIT

mkdir -p "$demo/shims" "$demo/agents" "$demo/home" "$demo/other-project"
ln -s "$landwall" "$demo/shims/claude"
echo "another project's code" >"$demo/other-project/secret.txt"

git_q() { git -c user.name=demo -c user.email=demo@landwall.invalid -c init.defaultBranch=main "$@" >/dev/null 2>&1; }
git_q init "$demo/project"
echo "the main checkout" >"$demo/project/README.md"
git_q -C "$demo/project" add README.md
git_q -C "$demo/project" commit -m "initial commit"
git_q -C "$demo/project" worktree add -b feature "$demo/feature"
wt=$demo/feature
# README.md's blob, a loose object of the repository: the agent will try to rewrite it.
blob=$(git -C "$demo/project" rev-parse HEAD:README.md)
obj=$demo/project/.git/objects/${blob:0:2}/${blob:2}
mkdir -m 700 "$demo/cred"
printf 'protocol=https\nhost=demo.invalid\nusername=you\npassword=demo-password\n\n' |
    git -c credential.helper="cache --socket $sock --timeout 300" credential approve 2>/dev/null

# The stand-in agent (its argument: the demo directory): each probe prints `name|allowed` or `name|denied|<error>`.
cat >"$demo/agents/claude-real" <<'AGENT'
#!/bin/sh
demo=$1 obj=$2
try() {
    name=$1; shift
    if out=$("$@" 2>&1); then echo "$name|allowed"
    else echo "$name|denied|$(printf '%s\n' "$out" | tail -n 1 | sed 's/.*: //')"; fi
}
try worktree sh -c 'echo "agent was here" > notes.txt'
try commit sh -c 'git add notes.txt && git commit -q -m "agent commit"'
try home sh -c 'echo "# planted by the agent" >> "$HOME/.bashrc"'
try hook sh -c 'echo "echo planted by the agent" > "$0/project/.git/hooks/post-checkout"' "$demo"
# Where it is, and where the agent sees the real store: read-only at landwall-base.
try object sh -c 'for o in "$0" "$1"; do chmod u+w "$o" 2>/dev/null; echo poisoned > "$o" || exit 1; done' \
    "$(printf '%s\n' "$obj" | sed "s#/objects/#/worktrees/feature/landwall-base/#")" "$obj"
try main cat "$demo/project/README.md"
try other cat "$demo/other-project/secret.txt"
try root ls /root
try etc sh -c 'echo x > /etc/landwall-demo'
try shadow cat /etc/shadow
# Ask the credential cache outside for the password it holds (a Unix socket connect).
try cred sh -c 'out=$(printf "protocol=https\nhost=demo.invalid\n\n" |
        GIT_TERMINAL_PROMPT=0 git -c credential.helper="cache --socket $0" credential fill 2>&1)
    case $out in *password=demo-password*) exit 0 ;; esac
    printf "%s\n" "$out" | grep -m 1 "cache daemon" || printf "%s\n" "$out" | tail -n 1
    exit 1' "$demo/cred/socket"
if [ -n "${AWS_SECRET_ACCESS_KEY:-}" ]; then echo "secret|present"; else echo "secret|absent"; fi
echo "pid|$$"
grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/$$/status | tr -d ' \t' | sed 's/:/|/'
AGENT
chmod 755 "$demo/agents/claude-real"

run_env=(env -i
    PATH="$demo/shims:$demo/agents:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    HOME="$demo/home" TERM="${TERM:-dumb}" LANG=C.UTF-8
    LANDWALL_CONFIG="$demo/no-config.toml"
    AWS_SECRET_ACCESS_KEY=demo-not-a-real-key
    GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=agent@landwall.invalid
    GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=agent@landwall.invalid)

# What Unix permissions alone would allow this user (access(2), which Landlock does not
# restrict, so it is checked here, outside the wall, without touching anything).
perm() { if test "$@"; then echo allow; else echo deny; fi; }
declare -A unix=(
    [worktree]=$(perm -w "$wt")
    [commit]=$(perm -w "$demo/project/.git")
    [home]=$(perm -w "$demo/home")
    [hook]=$(perm -w "$demo/project/.git/hooks")
    # 0444, but its owner may chmod it (and root ignores the mode).
    [object]=$( { [ "$(id -u)" -eq 0 ] || [ -O "$obj" ]; } && echo allow || echo deny)
    [main]=$(perm -r "$demo/project/README.md")
    [other]=$(perm -r "$demo/other-project/secret.txt")
    [root]=$(perm -r /root -a -x /root)
    [etc]=$(perm -w /etc)
    [shadow]=$(perm -r /etc/shadow)
    [cred]=$(perm -w "$sock")
)

set +e
report=$(cd "$wt" && "${run_env[@]}" sh -c 'echo "shim|$$"; exec claude "$1" "$2"' sh "$demo" "$obj" 2>"$demo/stderr")
status=$?
set -e
if [ $status -ne 0 ]; then
    echo "demo: the shim or the agent failed (status $status):" >&2
    cat "$demo/stderr" >&2
    exit 1
fi
declare -A got=()
while IFS='|' read -r key value detail; do
    got[$key]=$value${detail:+|$detail}
done <<<"$report"

short() { sed "s|$demo|\$D|g; s/^/  /"; }
# As root, /etc is granted entry by entry around root's secrets: fold those lines into one.
fold_etc() {
    awk '/^  [a-z+-]+ +\/etc\/[^ ]+  \(system\)$/ { n++; next }
         n { printf "  %-17s /etc/*  (%d entries granted one by one, leaving out root'"'"'s secrets: shadow, gshadow, sudoers, SSH host keys)\n", "read-only", n; n = 0 }
         { print }'
}
echo "landwall demo: a stand-in agent behind $landwall"
echo "  D           $demo (scratch, removed at the end)"
echo "  repository  \$D/project (main checkout)"
echo "  worktree    \$D/feature (linked; the agent starts here)"
echo "  HOME        \$D/home"
echo "  config      none: LANDWALL_CONFIG names a missing file, so the default policy applies"
echo

unexpected=0
row() { # key, description, expected (allowed|denied)
    local key=$1 what=$2 want=$3 result=${got[$1]:-missing} shown
    case $result in
    allowed) shown=allowed ;;
    denied*)
        if [ "${unix[$key]}" = allow ]; then shown="DENIED by the kernel (${result#denied|})"
        else shown="denied (${result#denied|}; Unix permissions deny it too)"; fi ;;
    *) shown="no answer" ;;
    esac
    [ "${result%%|*}" = "$want" ] || { unexpected=1; shown="$shown  <-- UNEXPECTED"; }
    printf '  %-54s %-12s %s\n' "$what" "${unix[$key]}" "$shown"
}
printf '  %-54s %-12s %s\n' "what the agent tried" "Unix perms" "inside the wall"
row worktree "write notes.txt in its worktree" allowed
row commit "git commit in the linked worktree" allowed
row home "append to ~/.bashrc (\$HOME writable: seeds' default)" allowed
row hook "plant a hook in the repository's .git/hooks" denied
row object "rewrite an existing object in .git/objects" denied
row main "read the main checkout's README.md" denied
row other "read another project's secret.txt" denied
row root "list /root" denied
row etc "write /etc/landwall-demo" denied
row shadow "read /etc/shadow" denied
row cred "get a password from git's credential cache (a socket)" denied
printf '  %-54s %-12s %s\n' "read \$AWS_SECRET_ACCESS_KEY (set by the caller)" "-" \
    "${got[secret]} (the environment is rebuilt from an allowlist)"
[ "${got[secret]}" = absent ] || unexpected=1
if [ -e /etc/landwall-demo ] && [ "${got[etc]}" = allowed ]; then rm -f /etc/landwall-demo; fi

# Outside the wall the same question gets the password: the row above is no accident.
if ! printf 'protocol=https\nhost=demo.invalid\n\n' |
    GIT_TERMINAL_PROMPT=0 git -c credential.helper="cache --socket $sock" credential fill 2>/dev/null |
    grep -q password=demo-password; then
    echo "  git's credential cache did not answer outside the wall either  <-- UNEXPECTED"
    unexpected=1
fi
if [ "$(git -C "$demo/project" cat-file -p "$blob")" != "the main checkout" ]; then
    echo "  the repository's object $blob was changed  <-- UNEXPECTED"
    unexpected=1
fi
commit=$(git -C "$demo/project" log -1 --format='%h %s' feature)
echo
echo "  the agent's commit is on branch feature: $commit"
[ "${commit#* }" = "agent commit" ] || unexpected=1

echo
echo "process"
same="yes"
[ "${got[shim]}" = "${got[pid]}" ] || { same="NO"; unexpected=1; }
echo "  PID that ran the shim ${got[shim]}, PID of the agent ${got[pid]}: same process: $same (landwall execs the agent)"
mine() { grep -E "^$1:" /proc/$$/status | tr -d ' \t' | cut -d: -f2; }
for set in CapInh CapPrm CapEff CapBnd CapAmb NoNewPrivs; do
    printf '  %-12s outside %-18s agent %s\n' "$set" "$(mine $set)" "${got[$set]}"
done
for set in CapInh CapPrm CapEff CapBnd CapAmb; do
    [ "${got[$set]}" = 0000000000000000 ] || unexpected=1
done
[ "${got[NoNewPrivs]}" = 1 ] || unexpected=1

echo
echo "\$ landwall policy        (in the linked worktree)"
(cd "$wt" && "${run_env[@]}" "$landwall" policy | fold_etc | short)
echo
echo "\$ landwall check ...     (in the linked worktree)"
(cd "$wt" && "${run_env[@]}" "$landwall" check notes.txt "$demo/home/.bashrc" \
    "$demo/project/.git/hooks" "$demo/project/README.md" "$demo/other-project" \
    /etc/passwd /root | short)

if [ $unexpected -ne 0 ]; then
    echo >&2
    echo "demo: something above is not what the default policy promises" >&2
    exit 1
fi
