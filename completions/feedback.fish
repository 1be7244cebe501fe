# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_feedback_global_optspecs
    string join \n q/quiet v/verbose pretty compact n/null-input schema h/help V/version
end

function __fish_feedback_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_feedback_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_feedback_using_subcommand
    set -l cmd (__fish_feedback_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c feedback -n "__fish_feedback_needs_command" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c feedback -n "__fish_feedback_needs_command" -s v -l verbose -d 'Explain decisions on stderr'
complete -c feedback -n "__fish_feedback_needs_command" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c feedback -n "__fish_feedback_needs_command" -l compact -d 'One-line JSON output, even on a terminal'
complete -c feedback -n "__fish_feedback_needs_command" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c feedback -n "__fish_feedback_needs_command" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c feedback -n "__fish_feedback_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c feedback -n "__fish_feedback_needs_command" -s V -l version -d 'Print version'
complete -c feedback -n "__fish_feedback_needs_command" -f -a "queue" -d 'Queue a draft from JSON fields on stdin, or from flags (flags win)'
complete -c feedback -n "__fish_feedback_needs_command" -f -a "list" -d 'List drafts, newest first, after deleting those older than 30 days'
complete -c feedback -n "__fish_feedback_needs_command" -f -a "show" -d 'Print one draft'
complete -c feedback -n "__fish_feedback_needs_command" -f -a "send" -d 'Send a draft to an endpoint or as a GitHub issue, after consent'
complete -c feedback -n "__fish_feedback_needs_command" -f -a "discard" -d 'Delete a draft'
complete -c feedback -n "__fish_feedback_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c feedback -n "__fish_feedback_using_subcommand queue" -l type -d 'The draft\'s type' -r -f -a "bug\t''
idea\t''
missing_capability\t''"
complete -c feedback -n "__fish_feedback_using_subcommand queue" -l title -d 'One line, at most 200 characters' -r
complete -c feedback -n "__fish_feedback_using_subcommand queue" -l details -d 'Facts, the user\'s own words, a minimal reproduction (at most 10,240 characters)' -r
complete -c feedback -n "__fish_feedback_using_subcommand queue" -l area -d 'Part of the product (at most 64 characters)' -r
complete -c feedback -n "__fish_feedback_using_subcommand queue" -l trigger -d 'What prompted the draft' -r -f -a "tool_error\t''
user_frustration\t''
missing_capability\t''
model_judgment\t''
exit_nudge\t''"
complete -c feedback -n "__fish_feedback_using_subcommand queue" -l session -d 'Source session id [default: the hook payload\'s session_id]' -r
complete -c feedback -n "__fish_feedback_using_subcommand queue" -l model -d 'Model in use (at most 64 characters)' -r
complete -c feedback -n "__fish_feedback_using_subcommand queue" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c feedback -n "__fish_feedback_using_subcommand queue" -s v -l verbose -d 'Explain decisions on stderr'
complete -c feedback -n "__fish_feedback_using_subcommand queue" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c feedback -n "__fish_feedback_using_subcommand queue" -l compact -d 'One-line JSON output, even on a terminal'
complete -c feedback -n "__fish_feedback_using_subcommand queue" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c feedback -n "__fish_feedback_using_subcommand queue" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c feedback -n "__fish_feedback_using_subcommand queue" -s h -l help -d 'Print help'
complete -c feedback -n "__fish_feedback_using_subcommand list" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c feedback -n "__fish_feedback_using_subcommand list" -s v -l verbose -d 'Explain decisions on stderr'
complete -c feedback -n "__fish_feedback_using_subcommand list" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c feedback -n "__fish_feedback_using_subcommand list" -l compact -d 'One-line JSON output, even on a terminal'
complete -c feedback -n "__fish_feedback_using_subcommand list" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c feedback -n "__fish_feedback_using_subcommand list" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c feedback -n "__fish_feedback_using_subcommand list" -s h -l help -d 'Print help'
complete -c feedback -n "__fish_feedback_using_subcommand show" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c feedback -n "__fish_feedback_using_subcommand show" -s v -l verbose -d 'Explain decisions on stderr'
complete -c feedback -n "__fish_feedback_using_subcommand show" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c feedback -n "__fish_feedback_using_subcommand show" -l compact -d 'One-line JSON output, even on a terminal'
complete -c feedback -n "__fish_feedback_using_subcommand show" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c feedback -n "__fish_feedback_using_subcommand show" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c feedback -n "__fish_feedback_using_subcommand show" -s h -l help -d 'Print help'
complete -c feedback -n "__fish_feedback_using_subcommand send" -l endpoint -d 'Where to POST the feedback JSON' -r
complete -c feedback -n "__fish_feedback_using_subcommand send" -l to -d 'Create a GitHub issue instead: github:OWNER/REPO (GITHUB_TOKEN; GITHUB_API_URL)' -r
complete -c feedback -n "__fish_feedback_using_subcommand send" -l timeout -d 'Timeout of one request' -r
complete -c feedback -n "__fish_feedback_using_subcommand send" -l retries -d 'Retries after 429, 5xx, resets and timeouts' -r
complete -c feedback -n "__fish_feedback_using_subcommand send" -l transcript -d 'The transcript file [default: the draft\'s transcript_ref]' -r -F
complete -c feedback -n "__fish_feedback_using_subcommand send" -l with-transcript -d 'Attach the draft\'s session transcript (its newest messages)'
complete -c feedback -n "__fish_feedback_using_subcommand send" -l yes -d 'Consent given: send without asking (required when stdin is not a terminal)'
complete -c feedback -n "__fish_feedback_using_subcommand send" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c feedback -n "__fish_feedback_using_subcommand send" -s v -l verbose -d 'Explain decisions on stderr'
complete -c feedback -n "__fish_feedback_using_subcommand send" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c feedback -n "__fish_feedback_using_subcommand send" -l compact -d 'One-line JSON output, even on a terminal'
complete -c feedback -n "__fish_feedback_using_subcommand send" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c feedback -n "__fish_feedback_using_subcommand send" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c feedback -n "__fish_feedback_using_subcommand send" -s h -l help -d 'Print help'
complete -c feedback -n "__fish_feedback_using_subcommand discard" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c feedback -n "__fish_feedback_using_subcommand discard" -s v -l verbose -d 'Explain decisions on stderr'
complete -c feedback -n "__fish_feedback_using_subcommand discard" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c feedback -n "__fish_feedback_using_subcommand discard" -l compact -d 'One-line JSON output, even on a terminal'
complete -c feedback -n "__fish_feedback_using_subcommand discard" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c feedback -n "__fish_feedback_using_subcommand discard" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c feedback -n "__fish_feedback_using_subcommand discard" -s h -l help -d 'Print help'
complete -c feedback -n "__fish_feedback_using_subcommand help; and not __fish_seen_subcommand_from queue list show send discard help" -f -a "queue" -d 'Queue a draft from JSON fields on stdin, or from flags (flags win)'
complete -c feedback -n "__fish_feedback_using_subcommand help; and not __fish_seen_subcommand_from queue list show send discard help" -f -a "list" -d 'List drafts, newest first, after deleting those older than 30 days'
complete -c feedback -n "__fish_feedback_using_subcommand help; and not __fish_seen_subcommand_from queue list show send discard help" -f -a "show" -d 'Print one draft'
complete -c feedback -n "__fish_feedback_using_subcommand help; and not __fish_seen_subcommand_from queue list show send discard help" -f -a "send" -d 'Send a draft to an endpoint or as a GitHub issue, after consent'
complete -c feedback -n "__fish_feedback_using_subcommand help; and not __fish_seen_subcommand_from queue list show send discard help" -f -a "discard" -d 'Delete a draft'
complete -c feedback -n "__fish_feedback_using_subcommand help; and not __fish_seen_subcommand_from queue list show send discard help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
