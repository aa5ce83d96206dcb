#!/usr/bin/env bash
# `make demo`: the wall on this machine. A stand-in agent (a shell script installed as
# `claude-real`, with a `claude` link to the built landwall ahead of it on PATH) starts in a
# linked worktree in a home laid out like a developer's and tries a handful of things; the
# table shows what Unix permissions alone would allow and what happened inside the wall
# under the default policy (home = "private"). Then it starts the agent from ~ and ~/src,
# where it would get every project, and shows that landwall refuses.
#
# Everything lives in one scratch directory under /var/tmp (not /tmp: the default policy
# makes /tmp writable, so "another project" there would be reachable), removed on exit.
# Exits non-zero if anything turns out differently from what the default policy promises.
set -euo pipefail

landwall=$(realpath "${1:?usage: demo.sh PATH/TO/landwall}")
demo=$(realpath "$(mktemp -d /var/tmp/landwall-demo.XXXXXX)")
# A server outside the wall, on a Unix socket: git's credential cache, holding a password.
sock=$demo/cred/socket
trap 'git credential-cache --socket "$sock" exit >/dev/null 2>&1 || true; rm -rf "$demo"' EXIT

# The home: projects in ~/src, the identity git commits with in ~/.gitconfig, a shell rc
# file, and (fake) secrets where real ones live.
home=$demo/home
mkdir -p "$demo/shims" "$demo/agents" "$home/src" "$home/.config/gh" "$home/.aws"
mkdir -m 700 "$home/.ssh"
ln -s "$landwall" "$demo/shims/claude"
printf '[user]\n\tname = A. Developer\n\temail = dev@landwall.invalid\n' >"$home/.gitconfig"
printf '# ~/.bashrc\nalias ll="ls -l"\n' >"$home/.bashrc"
printf 'Host *\n\tIdentityFile ~/.ssh/id_ed25519\n' >"$home/.ssh/config"
printf 'github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDemoDemoDemoDemoDemoDemoDemoDemoDemoDemo\n' \
    >"$home/.ssh/known_hosts"
printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-real-key\n-----END OPENSSH PRIVATE KEY-----\n' \
    >"$home/.ssh/id_ed25519"
printf '[default]\naws_access_key_id = AKIADEMONOTAREALKEY0\naws_secret_access_key = demo-not-a-real-secret\n' \
    >"$home/.aws/credentials"
printf 'github.com:\n    user: you\n    oauth_token: gho_demoNotARealToken\n' >"$home/.config/gh/hosts.yml"
chmod 600 "$home/.ssh/id_ed25519" "$home/.aws/credentials" "$home/.config/gh/hosts.yml"

git_q() { git -c user.name=demo -c user.email=demo@landwall.invalid -c init.defaultBranch=main "$@" >/dev/null 2>&1; }
app=$home/src/app wt=$home/src/app-feature other=$home/src/other
git_q init "$other"
echo "DATABASE_PASSWORD=another-projects-secret" >"$other/.env"
git_q init "$app"
echo "the main checkout" >"$app/README.md"
git_q -C "$app" add README.md
git_q -C "$app" commit -m "initial commit"
git_q -C "$app" worktree add -b feature "$wt"
# README.md's blob, a loose object of the repository: the agent will try to rewrite it, and
# where the agent sees the real store: read-only at the worktree's landwall-base.
blob=$(git -C "$app" rev-parse HEAD:README.md)
obj=$app/.git/objects/${blob:0:2}/${blob:2}
base_obj=$(git -C "$wt" rev-parse --absolute-git-dir)/landwall-base/${blob:0:2}/${blob:2}
mkdir -m 700 "$demo/cred"
printf 'protocol=https\nhost=demo.invalid\nusername=you\npassword=demo-password\n\n' |
    git -c credential.helper="cache --socket $sock --timeout 300" credential approve 2>/dev/null

# The stand-in agent (its arguments: the socket, the object as it sees it and as it is):
# each probe prints `name|allowed` or `name|denied|<error>`. Without arguments it only starts.
cat >"$demo/agents/claude-real" <<'AGENT'
#!/bin/sh
[ $# -eq 3 ] || { echo "the agent started in $PWD"; exit 0; }
sock=$1
try() {
    name=$1; shift
    if out=$("$@" 2>&1); then echo "$name|allowed"
    else echo "$name|denied|$(printf '%s\n' "$out" | tail -n 1 | sed 's/.*: //')"; fi
}
try worktree sh -c 'echo "agent was here" > notes.txt'
try commit sh -c 'git add notes.txt && git commit -q -m "agent commit"'
try gitconfig cat "$HOME/.gitconfig"
try bashrc sh -c 'echo "# planted by the agent" >> "$HOME/.bashrc"'
try other cat "$HOME/src/other/.env"
try sshkey cat "$HOME/.ssh/id_ed25519"
try aws cat "$HOME/.aws/credentials"
try gh cat "$HOME/.config/gh/hosts.yml"
try lshome ls "$HOME"
try hook sh -c 'echo "echo planted by the agent" > "$HOME/src/app/.git/hooks/post-checkout"'
try gitfile sh -c 'printf "gitdir: /tmp/a-git-dir-of-its-own\n" > .git'
try object sh -c 'for o in "$0" "$1"; do chmod u+w "$o" 2>/dev/null; echo poisoned > "$o" || exit 1; done' "$2" "$3"
try main cat "$HOME/src/app/README.md"
try root ls /root
try etc sh -c 'echo x > /etc/landwall-demo'
try shadow cat /etc/shadow
# Ask the credential cache outside for the password it holds (a Unix socket connect).
try cred sh -c 'out=$(printf "protocol=https\nhost=demo.invalid\n\n" |
        GIT_TERMINAL_PROMPT=0 git -c credential.helper="cache --socket $0" credential fill 2>&1)
    case $out in *password=demo-password*) exit 0 ;; esac
    printf "%s\n" "$out" | grep -m 1 "cache daemon" || printf "%s\n" "$out" | tail -n 1
    exit 1' "$sock"
if [ -n "${AWS_SECRET_ACCESS_KEY:-}" ]; then echo "secret|present"; else echo "secret|absent"; fi
echo "pid|$$"
grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/$$/status | tr -d ' \t' | sed 's/:/|/'
AGENT
chmod 755 "$demo/agents/claude-real"

# No GIT_AUTHOR_*/GIT_COMMITTER_*: the agent's git takes its identity from ~/.gitconfig.
run_env=(env -i
    PATH="$demo/shims:$demo/agents:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    HOME="$home" TERM="${TERM:-dumb}" LANG=C.UTF-8
    LANDWALL_CONFIG="$demo/no-config.toml"
    AWS_SECRET_ACCESS_KEY=demo-not-a-real-key)

# What Unix permissions alone would allow this user (access(2), which Landlock does not
# restrict, so it is checked here, outside the wall, without touching anything).
perm() { if test "$@"; then echo allow; else echo deny; fi; }
declare -A unix=(
    [worktree]=$(perm -w "$wt")
    [commit]=$(perm -w "$app/.git")
    [gitconfig]=$(perm -r "$home/.gitconfig")
    [bashrc]=$(perm -w "$home/.bashrc")
    [other]=$(perm -r "$other/.env")
    [sshkey]=$(perm -r "$home/.ssh/id_ed25519")
    [aws]=$(perm -r "$home/.aws/credentials")
    [gh]=$(perm -r "$home/.config/gh/hosts.yml")
    [lshome]=$(perm -r "$home")
    [hook]=$(perm -w "$app/.git/hooks")
    [gitfile]=$(perm -w "$wt/.git")
    # 0444, but its owner may chmod it (and root ignores the mode).
    [object]=$( { [ "$(id -u)" -eq 0 ] || [ -O "$obj" ]; } && echo allow || echo deny)
    [main]=$(perm -r "$app/README.md")
    [root]=$(perm -r /root -a -x /root)
    [etc]=$(perm -w /etc)
    [shadow]=$(perm -r /etc/shadow)
    [cred]=$(perm -w "$sock")
)

set +e
report=$(cd "$wt" && "${run_env[@]}" sh -c 'echo "shim|$$"; exec claude "$@"' sh "$sock" "$base_obj" "$obj" 2>"$demo/stderr")
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

short() { sed "s|$home|~|g; s|$demo|\$D|g; s/^/  /"; }
# As root, /etc is granted entry by entry around root's secrets: fold those lines into one.
fold_etc() {
    awk '/^  [a-z+-]+ +\/etc\/[^ ]+  \(system\)$/ { n++; next }
         n { printf "  %-17s /etc/*  (%d entries granted one by one, leaving out root'"'"'s secrets: shadow, gshadow, sudoers, SSH host keys)\n", "read-only", n; n = 0 }
         { print }'
}
echo "landwall demo: a stand-in agent behind $landwall"
echo "  D           $demo (scratch, removed at the end)"
echo "  HOME (~)    \$D/home, laid out as a developer's:"
echo "  repository  ~/src/app (main checkout)"
echo "  worktree    ~/src/app-feature (linked; the agent starts here)"
echo "  elsewhere   ~/src/other (another project, with a .env), ~/.gitconfig (git's identity), ~/.bashrc,"
echo "              ~/.ssh/{config,known_hosts,id_ed25519}, ~/.aws/credentials, ~/.config/gh/hosts.yml (fake secrets)"
echo "  config      none: LANDWALL_CONFIG names a missing file, so the default policy applies (home = \"private\")"
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
row gitconfig "read ~/.gitconfig (read-only: what tools need)" allowed
row bashrc "append to ~/.bashrc (read-only)" denied
row other "read another project's ~/src/other/.env" denied
row sshkey "read ~/.ssh/id_ed25519" denied
row aws "read ~/.aws/credentials" denied
row gh "read ~/.config/gh/hosts.yml" denied
row lshome "list ~" denied
row hook "plant a hook in the repository's .git/hooks" denied
row gitfile "point the worktree's .git file at its own git dir" denied
row object "rewrite an existing object in .git/objects" denied
row main "read the main checkout's ~/src/app/README.md" denied
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
if [ "$(git -C "$app" cat-file -p "$blob")" != "the main checkout" ]; then
    echo "  the repository's object $blob was changed  <-- UNEXPECTED"
    unexpected=1
fi
if [ "$(tail -n 1 "$home/.bashrc")" = "# planted by the agent" ]; then
    echo "  ~/.bashrc was changed  <-- UNEXPECTED"
    unexpected=1
fi
commit=$(git -C "$app" log -1 --format='%h %s, by %an <%ae>' feature)
echo
echo "  the agent's commit is on branch feature: $commit (from ~/.gitconfig)"
[ "${commit#* }" = "agent commit, by A. Developer <dev@landwall.invalid>" ] || unexpected=1

# Started where the worktree would be every project: ~ itself, or ~/src (not a repository,
# holding repositories). The stand-in agent, started without arguments, only says so.
echo
echo "starting the agent where it would get every project"
for dir in "$home" "$home/src"; do
    set +e
    out=$(cd "$dir" && "${run_env[@]}" claude 2>&1)
    status=$?
    set -e
    shown=$(printf '%s\n' "$out" | head -n 1 | short | sed 's/^ *//')
    [ $status -eq 78 ] || { unexpected=1; shown="$shown  <-- UNEXPECTED (want 78)"; }
    printf '  %-7s status %s: %s\n' "$(printf '%s' "$dir" | short | sed 's/^ *//')" "$status" "$shown"
done
echo
echo "process"
same="yes"
[ "${got[shim]}" = "${got[pid]}" ] || { same="NO"; unexpected=1; }
echo "  PID that ran the shim ${got[shim]}, PID of the agent ${got[pid]}: same process: $same (landwall execs the agent)"
mine() { grep -E "^$1:" /proc/$$/status | tr -d ' \t' | cut -d: -f2; }
for set in CapInh CapPrm CapEff CapBnd CapAmb NoNewPrivs; do
    printf '  %-12s outside %-18s agent %s\n' "$set" "$(mine $set)" "${got[$set]}"
done
for set in CapInh CapPrm CapEff CapAmb; do
    [ "${got[$set]}" = 0000000000000000 ] || unexpected=1
done
# Clearing the bounding set needs CAP_SETPCAP: root's launch clears it, a user's keeps the
# one it was given (cleared all the same where the launch entered a user namespace of its
# own). With no capabilities and no_new_privs, nothing can gain one from it through exec.
if [ "${got[CapBnd]}" != 0000000000000000 ]; then
    if [ "$(id -u)" -eq 0 ] || [ "${got[CapBnd]}" != "$(mine CapBnd)" ]; then
        unexpected=1
    else
        echo "  (as a user, the launch cannot clear the bounding set; it holds nothing the agent can use: no capabilities, no_new_privs)"
    fi
fi
[ "${got[NoNewPrivs]}" = 1 ] || unexpected=1

echo
echo "\$ landwall policy        (in the linked worktree)"
(cd "$wt" && "${run_env[@]}" "$landwall" policy | fold_etc | short)
echo
echo "\$ landwall check ...     (in the linked worktree)"
(cd "$wt" && "${run_env[@]}" "$landwall" check notes.txt "$home/.gitconfig" "$home/.bashrc" \
    "$home/.ssh/id_ed25519" "$home/.aws" "$home" "$other" "$app/.git/hooks" "$app/README.md" \
    /etc/passwd /root | short)

if [ $unexpected -ne 0 ]; then
    echo >&2
    echo "demo: something above is not what the default policy promises" >&2
    exit 1
fi
