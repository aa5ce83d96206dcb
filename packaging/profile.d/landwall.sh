# landwall: put the shim directory first on PATH, so that `claude`, `opencode` and `codex`
# in login shells are the walled ones (see landwall(1)). The shims find the real agents
# further down PATH. Does nothing when the directory is on PATH already, or is gone (the
# package was removed; this file stays until it is purged).
# Users whose own startup files put ~/.local/bin (or an npm prefix) first can run
# `landwall shim enable --user`.
if [ -d /usr/lib/landwall/bin ]; then
    case ":${PATH}:" in
        *:/usr/lib/landwall/bin:*) ;;
        *) PATH="/usr/lib/landwall/bin${PATH:+:$PATH}"; export PATH ;;
    esac
fi
