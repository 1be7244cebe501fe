# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_suggest_global_optspecs
    string join \n q/quiet v/verbose pretty compact n/null-input schema session= pending-permission elicitation plan-mode rate-limited events provider= model= timeout= deadline= retries= transcript= cwd= memory-dir= transcripts-dir= h/help V/version
end

function __fish_suggest_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_suggest_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_suggest_using_subcommand
    set -l cmd (__fish_suggest_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c suggest -n "__fish_suggest_needs_command" -l session -d 'Session id for --events [default: the hook payload\'s session_id, else the transcript\'s]' -r
complete -c suggest -n "__fish_suggest_needs_command" -l provider -d 'Model API: the Anthropic Messages API, an OpenAI-compatible server, or the user\'s own Claude Code in print mode (its login; no API key needed)' -r -f -a "anthropic\t''
openai\t''
claude\t''"
complete -c suggest -n "__fish_suggest_needs_command" -l model -d 'Model id [default: from ANTHROPIC_* variables, or OPENAI_MODEL with --provider openai]' -r
complete -c suggest -n "__fish_suggest_needs_command" -l timeout -d 'Timeout of one model request (0: none; --deadline still bounds the exchange)' -r
complete -c suggest -n "__fish_suggest_needs_command" -l deadline -d 'Deadline for the whole exchange, retries included' -r
complete -c suggest -n "__fish_suggest_needs_command" -l retries -d 'Retries after 429, 529, 5xx, resets and timeouts' -r
complete -c suggest -n "__fish_suggest_needs_command" -l transcript -d 'Transcript of the session [default: the hook payload\'s transcript_path]' -r -F
complete -c suggest -n "__fish_suggest_needs_command" -l cwd -d 'Project directory [default: the hook payload\'s `cwd`, else the current directory]' -r -f -a "(__fish_complete_directories)"
complete -c suggest -n "__fish_suggest_needs_command" -l memory-dir -d 'Memory directory, overriding every other rule' -r -f -a "(__fish_complete_directories)"
complete -c suggest -n "__fish_suggest_needs_command" -l transcripts-dir -d 'Directory holding the project\'s `<session-id>.jsonl` transcripts' -r -f -a "(__fish_complete_directories)"
complete -c suggest -n "__fish_suggest_needs_command" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c suggest -n "__fish_suggest_needs_command" -s v -l verbose -d 'Explain decisions on stderr'
complete -c suggest -n "__fish_suggest_needs_command" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c suggest -n "__fish_suggest_needs_command" -l compact -d 'One-line JSON output, even on a terminal'
complete -c suggest -n "__fish_suggest_needs_command" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c suggest -n "__fish_suggest_needs_command" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c suggest -n "__fish_suggest_needs_command" -l pending-permission -d 'A permission prompt is waiting: suppress (pending_permission; also from a Notification payload)'
complete -c suggest -n "__fish_suggest_needs_command" -l elicitation -d 'An MCP elicitation (a question to the user) is waiting: suppress (elicitation_active; also from a Notification payload)'
complete -c suggest -n "__fish_suggest_needs_command" -l plan-mode -d 'The session is in plan mode: suppress (plan_mode; also from the payload\'s permission_mode)'
complete -c suggest -n "__fish_suggest_needs_command" -l rate-limited -d 'The account is rate-limited: suppress (rate_limit)'
complete -c suggest -n "__fish_suggest_needs_command" -l events -d 'Print the suggestion as Claude Code\'s event {type:"prompt_suggestion", suggestion, uuid, session_id}'
complete -c suggest -n "__fish_suggest_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c suggest -n "__fish_suggest_needs_command" -s V -l version -d 'Print version'
complete -c suggest -n "__fish_suggest_needs_command" -f -a "check" -d 'Clean and filter TEXT (else plain text on stdin) as a suggestion; no network'
complete -c suggest -n "__fish_suggest_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c suggest -n "__fish_suggest_using_subcommand check" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c suggest -n "__fish_suggest_using_subcommand check" -s v -l verbose -d 'Explain decisions on stderr'
complete -c suggest -n "__fish_suggest_using_subcommand check" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c suggest -n "__fish_suggest_using_subcommand check" -l compact -d 'One-line JSON output, even on a terminal'
complete -c suggest -n "__fish_suggest_using_subcommand check" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c suggest -n "__fish_suggest_using_subcommand check" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c suggest -n "__fish_suggest_using_subcommand check" -s h -l help -d 'Print help'
complete -c suggest -n "__fish_suggest_using_subcommand help; and not __fish_seen_subcommand_from check help" -f -a "check" -d 'Clean and filter TEXT (else plain text on stdin) as a suggestion; no network'
complete -c suggest -n "__fish_suggest_using_subcommand help; and not __fish_seen_subcommand_from check help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
