#!/bin/sh
# dreamkit plugin: what the slash commands run (`!` lines in commands/*.md).
#
#   command.sh status | show [TASK_ID] | apply [TASK_ID] | undo [TASK_ID] | recap SESSION_ID
#
# Prints the tools' output (JSON, or show's diff) for the model to read and always exits 0:
# Claude Code drops the whole command when a `!` line fails, and "not due" or "nothing to
# apply" (exit 1) is an answer worth showing. A missing binary is one line saying so.
what=${1:-}
[ $# -gt 0 ] && shift
need() {
    command -v "$1" >/dev/null 2>&1 && return 0
    echo "dreamkit: $1 is not on PATH (install dreamkit: make install)"
    exit 0
}
# A task or session id: letters, digits, - and _ only (it comes from $ARGUMENTS).
valid_id() {
    case $1 in
        *[!A-Za-z0-9_-]*) echo "dreamkit: not a task or session id: $1"; exit 0 ;;
    esac
}
run() {
    "$@"
    rc=$?
    echo "(exit $rc)"
}
case $what in
    status)
        need dream-lock; need dream-gate; need dream-run
        echo "## dream-lock status"
        run dream-lock -q status -n
        echo "## dream-gate (exit 0 due, 1 not due)"
        run dream-gate -q -n --scan-interval 0
        echo "## dream-run tasks"
        run dream-run -q tasks -n
        ;;
    show | apply | undo)
        need dream-run
        id=${1:-}
        valid_id "$id"
        if [ "$what" = show ]; then
            run dream-run -q show -n --diff ${id:+"$id"}
        else
            run dream-run -q "$what" -n ${id:+"$id"}
        fi
        ;;
    recap)
        need recap
        id=${1:-}
        valid_id "$id"
        [ -n "$id" ] || { echo "dreamkit: no session id"; exit 0; }
        config=${CLAUDE_CONFIG_DIR:-${HOME:-/tmp}/.claude}
        for t in "$config"/projects/*/"$id".jsonl; do
            [ -f "$t" ] || continue
            run recap -q -n --transcript "$t"
            exit 0
        done
        echo "dreamkit: no transcript yet for session $id under $config/projects"
        ;;
    *)
        echo "dreamkit: command.sh: unknown command '$what'"
        ;;
esac
exit 0
