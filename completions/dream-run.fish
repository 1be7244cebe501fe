# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_dream_run_global_optspecs
    string join \n q/quiet v/verbose pretty compact n/null-input schema backend= provider= model= timeout= retries= engine= max-turns= max-tokens= max-answer-tokens= max-calls-per-turn= max-files= no-read-project read-project unlocked propose dry-run keep-partial events allow-team-delete shell-timeout= deadline= cwd= memory-dir= transcripts-dir= notify-transcript= h/help V/version
end

function __fish_dream_run_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_dream_run_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_dream_run_using_subcommand
    set -l cmd (__fish_dream_run_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c dream-run -n "__fish_dream_run_needs_command" -l backend -d 'Lock backend: `file` (the default: <memory_dir>/.consolidate-lock) or etcd://host:port[,host:port...][/prefix]' -r
complete -c dream-run -n "__fish_dream_run_needs_command" -l provider -d 'Model API: the Anthropic Messages API, an OpenAI-compatible server, or the user\'s own Claude Code in print mode (its login; no API key needed)' -r -f -a "anthropic\t''
openai\t''
claude\t''"
complete -c dream-run -n "__fish_dream_run_needs_command" -l model -d 'Model id [default: from ANTHROPIC_* variables, or OPENAI_MODEL with --provider openai]' -r
complete -c dream-run -n "__fish_dream_run_needs_command" -l timeout -d 'Timeout of one model request (0: none; --deadline still bounds the exchange)' -r
complete -c dream-run -n "__fish_dream_run_needs_command" -l retries -d 'Retries after 429, 529, 5xx, resets and timeouts' -r
complete -c dream-run -n "__fish_dream_run_needs_command" -l engine -d 'Who consolidates: `model` (the agent), or `rules` (the fixes that need no judgement; no model request, no credential, and it runs with no session to review)' -r -f -a "model\t'The agent: a model with the five sandboxed tools'
rules\t'The fixes that need no judgement (duplicates, orphans, dangling links, long entries, an index over the load limit, anchored relative dates, secrets): no model, no credential, no session needed'"
complete -c dream-run -n "__fish_dream_run_needs_command" -l max-turns -d 'Most assistant turns before the run is stopped as failed' -r
complete -c dream-run -n "__fish_dream_run_needs_command" -l max-tokens -d 'Most tokens (input, output and cache writes) the run may use' -r
complete -c dream-run -n "__fish_dream_run_needs_command" -l max-answer-tokens -d 'Most output tokens of one model answer (the request\'s max_tokens); a reply cut there is asked to continue once, then the run fails as truncated' -r
complete -c dream-run -n "__fish_dream_run_needs_command" -l max-calls-per-turn -d 'Most tool calls run per assistant turn; the rest get a tool error saying why' -r
complete -c dream-run -n "__fish_dream_run_needs_command" -l max-files -d 'Most memory files one run may change; writes to further files get a tool error' -r
complete -c dream-run -n "__fish_dream_run_needs_command" -l shell-timeout -d 'Per-command timeout of the agent\'s shell tool' -r
complete -c dream-run -n "__fish_dream_run_needs_command" -l deadline -d 'Deadline for the whole run (at most 50m with the file lock)' -r
complete -c dream-run -n "__fish_dream_run_needs_command" -l cwd -d 'Project directory [default: the hook payload\'s `cwd`, else the current directory]' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_needs_command" -l memory-dir -d 'Memory directory, overriding every other rule' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_needs_command" -l transcripts-dir -d 'Directory holding the project\'s `<session-id>.jsonl` transcripts' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_needs_command" -l notify-transcript -d 'Append a memory_saved record to this Claude Code transcript when files changed' -r -F
complete -c dream-run -n "__fish_dream_run_needs_command" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-run -n "__fish_dream_run_needs_command" -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-run -n "__fish_dream_run_needs_command" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-run -n "__fish_dream_run_needs_command" -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-run -n "__fish_dream_run_needs_command" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-run -n "__fish_dream_run_needs_command" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-run -n "__fish_dream_run_needs_command" -l no-read-project -d 'Keep the project directory out of the agent\'s reach (by default it may read the project, read-only, to check memory against the current code; files that may hold secrets are refused either way)'
complete -c dream-run -n "__fish_dream_run_needs_command" -l read-project -d 'The default; kept so that scripts written for earlier versions still run'
complete -c dream-run -n "__fish_dream_run_needs_command" -l unlocked -d 'Run without holding the consolidation lock (no fencing)'
complete -c dream-run -n "__fish_dream_run_needs_command" -l propose -d 'Stage every write in a copy under the state dir and record a proposal instead of changing the memory dir (also DREAMKIT_DREAM_MODE=propose)'
complete -c dream-run -n "__fish_dream_run_needs_command" -l dry-run -d 'Print {prompt, tools, sessions} and stop: no model request, no credentials needed'
complete -c dream-run -n "__fish_dream_run_needs_command" -l keep-partial -d 'Keep what a failed or aborted run wrote instead of restoring the snapshot'
complete -c dream-run -n "__fish_dream_run_needs_command" -l events -d 'Progress as JSON Lines events on stderr (turn, tool, file_touched, done)'
complete -c dream-run -n "__fish_dream_run_needs_command" -l allow-team-delete -d 'Let the agent delete files under the memory dir\'s team/ folder: team memory is shared, so by default the agent may only edit it'
complete -c dream-run -n "__fish_dream_run_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dream-run -n "__fish_dream_run_needs_command" -s V -l version -d 'Print version'
complete -c dream-run -n "__fish_dream_run_needs_command" -f -a "tasks" -d 'List task records, newest first (a running record whose process is gone is orphaned)'
complete -c dream-run -n "__fish_dream_run_needs_command" -f -a "pending" -d 'Memory updates not yet announced to a session (`--clear` empties the list)'
complete -c dream-run -n "__fish_dream_run_needs_command" -f -a "undo" -d 'Put the memory dir back as it was before a run that changed it (completed, or one whose snapshot was kept)'
complete -c dream-run -n "__fish_dream_run_needs_command" -f -a "show" -d 'A proposal\'s changes as JSON, or with --diff as a unified diff [default: the latest]'
complete -c dream-run -n "__fish_dream_run_needs_command" -f -a "apply" -d 'Write a proposal into the memory dir under the lock, if nothing it touches changed since'
complete -c dream-run -n "__fish_dream_run_needs_command" -f -a "discard" -d 'Drop a proposal (its staged copy); the task becomes discarded'
complete -c dream-run -n "__fish_dream_run_needs_command" -f -a "recover" -d 'Put back what killed commands left: an apply or undo midway, a run that died, their temporary files (every state-changing command does this first by itself)'
complete -c dream-run -n "__fish_dream_run_needs_command" -f -a "check" -d 'The memory\'s health without a model: the index as Claude Code cuts it, dangling links, orphans, duplicates, relative dates, vanished paths, secrets (reads only)'
complete -c dream-run -n "__fish_dream_run_needs_command" -f -a "eval" -d 'How good is a consolidation: run a suite of scenarios (memory before, sessions, project, expectations) each in a temporary home through the real pipeline, and say which expectations the memory after misses'
complete -c dream-run -n "__fish_dream_run_needs_command" -f -a "tool-relay" -d 'The MCP server of a `--provider claude` run: started by the Claude Code client that dream-run spawns, never by hand. It serves the run\'s five sandboxed tools as MCP (JSON-RPC on stdin and stdout) and forwards each call to the running dream-run over the socket it names; exit 0 at stdin\'s end, 3 when the socket cannot be reached'
complete -c dream-run -n "__fish_dream_run_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dream-run -n "__fish_dream_run_using_subcommand tasks" -l cwd -d 'Project directory [default: the hook payload\'s `cwd`, else the current directory]' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand tasks" -l memory-dir -d 'Memory directory, overriding every other rule' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand tasks" -l transcripts-dir -d 'Directory holding the project\'s `<session-id>.jsonl` transcripts' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand tasks" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-run -n "__fish_dream_run_using_subcommand tasks" -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-run -n "__fish_dream_run_using_subcommand tasks" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-run -n "__fish_dream_run_using_subcommand tasks" -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-run -n "__fish_dream_run_using_subcommand tasks" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-run -n "__fish_dream_run_using_subcommand tasks" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-run -n "__fish_dream_run_using_subcommand tasks" -s h -l help -d 'Print help'
complete -c dream-run -n "__fish_dream_run_using_subcommand pending" -l cwd -d 'Project directory [default: the hook payload\'s `cwd`, else the current directory]' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand pending" -l memory-dir -d 'Memory directory, overriding every other rule' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand pending" -l transcripts-dir -d 'Directory holding the project\'s `<session-id>.jsonl` transcripts' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand pending" -l clear -d 'Empty the list after printing it (a SessionStart hook does this)'
complete -c dream-run -n "__fish_dream_run_using_subcommand pending" -l dry-run -d 'With --clear: print the list and what would be cleared, clear nothing'
complete -c dream-run -n "__fish_dream_run_using_subcommand pending" -l hook -d 'Answer as a Claude Code SessionStart hook: the updates as additionalContext (announced once: the list is cleared), nothing at all when there is none; always exit 0'
complete -c dream-run -n "__fish_dream_run_using_subcommand pending" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-run -n "__fish_dream_run_using_subcommand pending" -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-run -n "__fish_dream_run_using_subcommand pending" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-run -n "__fish_dream_run_using_subcommand pending" -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-run -n "__fish_dream_run_using_subcommand pending" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-run -n "__fish_dream_run_using_subcommand pending" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-run -n "__fish_dream_run_using_subcommand pending" -s h -l help -d 'Print help'
complete -c dream-run -n "__fish_dream_run_using_subcommand undo" -l backend -d 'Lock backend: `file` (the default: <memory_dir>/.consolidate-lock) or etcd://host:port[,host:port...][/prefix]' -r
complete -c dream-run -n "__fish_dream_run_using_subcommand undo" -l cwd -d 'Project directory [default: the hook payload\'s `cwd`, else the current directory]' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand undo" -l memory-dir -d 'Memory directory, overriding every other rule' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand undo" -l transcripts-dir -d 'Directory holding the project\'s `<session-id>.jsonl` transcripts' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand undo" -l dry-run -d 'Print which files would be put back, change nothing'
complete -c dream-run -n "__fish_dream_run_using_subcommand undo" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-run -n "__fish_dream_run_using_subcommand undo" -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-run -n "__fish_dream_run_using_subcommand undo" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-run -n "__fish_dream_run_using_subcommand undo" -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-run -n "__fish_dream_run_using_subcommand undo" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-run -n "__fish_dream_run_using_subcommand undo" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-run -n "__fish_dream_run_using_subcommand undo" -s h -l help -d 'Print help'
complete -c dream-run -n "__fish_dream_run_using_subcommand show" -l cwd -d 'Project directory [default: the hook payload\'s `cwd`, else the current directory]' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand show" -l memory-dir -d 'Memory directory, overriding every other rule' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand show" -l transcripts-dir -d 'Directory holding the project\'s `<session-id>.jsonl` transcripts' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand show" -l diff -d 'Print the unified diff as text (coloured on a terminal unless NO_COLOR) instead of JSON'
complete -c dream-run -n "__fish_dream_run_using_subcommand show" -l why -d 'Print each change with where it came from, as text: a model\'s sources (session, quote, verified or not), a rule\'s name'
complete -c dream-run -n "__fish_dream_run_using_subcommand show" -l hook -d 'Answer as a Claude Code SessionStart hook: a waiting proposal as additionalContext, nothing at all when there is none; always exit 0'
complete -c dream-run -n "__fish_dream_run_using_subcommand show" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-run -n "__fish_dream_run_using_subcommand show" -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-run -n "__fish_dream_run_using_subcommand show" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-run -n "__fish_dream_run_using_subcommand show" -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-run -n "__fish_dream_run_using_subcommand show" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-run -n "__fish_dream_run_using_subcommand show" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-run -n "__fish_dream_run_using_subcommand show" -s h -l help -d 'Print help'
complete -c dream-run -n "__fish_dream_run_using_subcommand apply" -l backend -d 'Lock backend: `file` (the default: <memory_dir>/.consolidate-lock) or etcd://host:port[,host:port...][/prefix]' -r
complete -c dream-run -n "__fish_dream_run_using_subcommand apply" -l cwd -d 'Project directory [default: the hook payload\'s `cwd`, else the current directory]' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand apply" -l memory-dir -d 'Memory directory, overriding every other rule' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand apply" -l transcripts-dir -d 'Directory holding the project\'s `<session-id>.jsonl` transcripts' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand apply" -l dry-run -d 'Print which files would be written, change nothing (no lock taken)'
complete -c dream-run -n "__fish_dream_run_using_subcommand apply" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-run -n "__fish_dream_run_using_subcommand apply" -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-run -n "__fish_dream_run_using_subcommand apply" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-run -n "__fish_dream_run_using_subcommand apply" -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-run -n "__fish_dream_run_using_subcommand apply" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-run -n "__fish_dream_run_using_subcommand apply" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-run -n "__fish_dream_run_using_subcommand apply" -s h -l help -d 'Print help'
complete -c dream-run -n "__fish_dream_run_using_subcommand discard" -l backend -d 'Lock backend: `file` (the default: <memory_dir>/.consolidate-lock) or etcd://host:port[,host:port...][/prefix]' -r
complete -c dream-run -n "__fish_dream_run_using_subcommand discard" -l cwd -d 'Project directory [default: the hook payload\'s `cwd`, else the current directory]' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand discard" -l memory-dir -d 'Memory directory, overriding every other rule' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand discard" -l transcripts-dir -d 'Directory holding the project\'s `<session-id>.jsonl` transcripts' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand discard" -l dry-run -d 'Print what would be dropped, change nothing'
complete -c dream-run -n "__fish_dream_run_using_subcommand discard" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-run -n "__fish_dream_run_using_subcommand discard" -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-run -n "__fish_dream_run_using_subcommand discard" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-run -n "__fish_dream_run_using_subcommand discard" -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-run -n "__fish_dream_run_using_subcommand discard" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-run -n "__fish_dream_run_using_subcommand discard" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-run -n "__fish_dream_run_using_subcommand discard" -s h -l help -d 'Print help'
complete -c dream-run -n "__fish_dream_run_using_subcommand recover" -l backend -d 'Lock backend: `file` (the default: <memory_dir>/.consolidate-lock) or etcd://host:port[,host:port...][/prefix]' -r
complete -c dream-run -n "__fish_dream_run_using_subcommand recover" -l cwd -d 'Project directory [default: the hook payload\'s `cwd`, else the current directory]' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand recover" -l memory-dir -d 'Memory directory, overriding every other rule' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand recover" -l transcripts-dir -d 'Directory holding the project\'s `<session-id>.jsonl` transcripts' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand recover" -l dry-run -d 'Report the interrupted command or killed run (on stderr), roll nothing back'
complete -c dream-run -n "__fish_dream_run_using_subcommand recover" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-run -n "__fish_dream_run_using_subcommand recover" -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-run -n "__fish_dream_run_using_subcommand recover" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-run -n "__fish_dream_run_using_subcommand recover" -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-run -n "__fish_dream_run_using_subcommand recover" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-run -n "__fish_dream_run_using_subcommand recover" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-run -n "__fish_dream_run_using_subcommand recover" -s h -l help -d 'Print help'
complete -c dream-run -n "__fish_dream_run_using_subcommand check" -l min-hours -d 'How much older than the project\'s newest session the index may be (stale_index): hours, or a duration (24, 24h, 90m)' -r
complete -c dream-run -n "__fish_dream_run_using_subcommand check" -l cwd -d 'Project directory [default: the hook payload\'s `cwd`, else the current directory]' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand check" -l memory-dir -d 'Memory directory, overriding every other rule' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand check" -l transcripts-dir -d 'Directory holding the project\'s `<session-id>.jsonl` transcripts' -r -f -a "(__fish_complete_directories)"
complete -c dream-run -n "__fish_dream_run_using_subcommand check" -l hook -d 'Answer as a Claude Code SessionStart hook: the problems as additionalContext, nothing at all when the memory is healthy; always exit 0'
complete -c dream-run -n "__fish_dream_run_using_subcommand check" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-run -n "__fish_dream_run_using_subcommand check" -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-run -n "__fish_dream_run_using_subcommand check" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-run -n "__fish_dream_run_using_subcommand check" -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-run -n "__fish_dream_run_using_subcommand check" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-run -n "__fish_dream_run_using_subcommand check" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-run -n "__fish_dream_run_using_subcommand check" -s h -l help -d 'Print help'
complete -c dream-run -n "__fish_dream_run_using_subcommand eval" -l engine -d 'Who consolidates in every scenario: `model`, or `rules` (no model request; a scenario with needs_model true is skipped)' -r -f -a "model\t'The agent: a model with the five sandboxed tools'
rules\t'The fixes that need no judgement (duplicates, orphans, dangling links, long entries, an index over the load limit, anchored relative dates, secrets): no model, no credential, no session needed'"
complete -c dream-run -n "__fish_dream_run_using_subcommand eval" -l provider -d 'The model API, passed to each run [default: the environment\'s, else anthropic]' -r -f -a "anthropic\t''
openai\t''
claude\t''"
complete -c dream-run -n "__fish_dream_run_using_subcommand eval" -l model -d 'The model id, passed to each run' -r
complete -c dream-run -n "__fish_dream_run_using_subcommand eval" -l only -d 'Run only this scenario (its folder name; may be repeated)' -r
complete -c dream-run -n "__fish_dream_run_using_subcommand eval" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-run -n "__fish_dream_run_using_subcommand eval" -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-run -n "__fish_dream_run_using_subcommand eval" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-run -n "__fish_dream_run_using_subcommand eval" -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-run -n "__fish_dream_run_using_subcommand eval" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-run -n "__fish_dream_run_using_subcommand eval" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-run -n "__fish_dream_run_using_subcommand eval" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dream-run -n "__fish_dream_run_using_subcommand tool-relay" -l socket -d 'The socket of the running dream-run (relay.sock in its private directory)' -r -F
complete -c dream-run -n "__fish_dream_run_using_subcommand tool-relay" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-run -n "__fish_dream_run_using_subcommand tool-relay" -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-run -n "__fish_dream_run_using_subcommand tool-relay" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-run -n "__fish_dream_run_using_subcommand tool-relay" -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-run -n "__fish_dream_run_using_subcommand tool-relay" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-run -n "__fish_dream_run_using_subcommand tool-relay" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-run -n "__fish_dream_run_using_subcommand tool-relay" -s h -l help -d 'Print help'
complete -c dream-run -n "__fish_dream_run_using_subcommand help; and not __fish_seen_subcommand_from tasks pending undo show apply discard recover check eval tool-relay help" -f -a "tasks" -d 'List task records, newest first (a running record whose process is gone is orphaned)'
complete -c dream-run -n "__fish_dream_run_using_subcommand help; and not __fish_seen_subcommand_from tasks pending undo show apply discard recover check eval tool-relay help" -f -a "pending" -d 'Memory updates not yet announced to a session (`--clear` empties the list)'
complete -c dream-run -n "__fish_dream_run_using_subcommand help; and not __fish_seen_subcommand_from tasks pending undo show apply discard recover check eval tool-relay help" -f -a "undo" -d 'Put the memory dir back as it was before a run that changed it (completed, or one whose snapshot was kept)'
complete -c dream-run -n "__fish_dream_run_using_subcommand help; and not __fish_seen_subcommand_from tasks pending undo show apply discard recover check eval tool-relay help" -f -a "show" -d 'A proposal\'s changes as JSON, or with --diff as a unified diff [default: the latest]'
complete -c dream-run -n "__fish_dream_run_using_subcommand help; and not __fish_seen_subcommand_from tasks pending undo show apply discard recover check eval tool-relay help" -f -a "apply" -d 'Write a proposal into the memory dir under the lock, if nothing it touches changed since'
complete -c dream-run -n "__fish_dream_run_using_subcommand help; and not __fish_seen_subcommand_from tasks pending undo show apply discard recover check eval tool-relay help" -f -a "discard" -d 'Drop a proposal (its staged copy); the task becomes discarded'
complete -c dream-run -n "__fish_dream_run_using_subcommand help; and not __fish_seen_subcommand_from tasks pending undo show apply discard recover check eval tool-relay help" -f -a "recover" -d 'Put back what killed commands left: an apply or undo midway, a run that died, their temporary files (every state-changing command does this first by itself)'
complete -c dream-run -n "__fish_dream_run_using_subcommand help; and not __fish_seen_subcommand_from tasks pending undo show apply discard recover check eval tool-relay help" -f -a "check" -d 'The memory\'s health without a model: the index as Claude Code cuts it, dangling links, orphans, duplicates, relative dates, vanished paths, secrets (reads only)'
complete -c dream-run -n "__fish_dream_run_using_subcommand help; and not __fish_seen_subcommand_from tasks pending undo show apply discard recover check eval tool-relay help" -f -a "eval" -d 'How good is a consolidation: run a suite of scenarios (memory before, sessions, project, expectations) each in a temporary home through the real pipeline, and say which expectations the memory after misses'
complete -c dream-run -n "__fish_dream_run_using_subcommand help; and not __fish_seen_subcommand_from tasks pending undo show apply discard recover check eval tool-relay help" -f -a "tool-relay" -d 'The MCP server of a `--provider claude` run: started by the Claude Code client that dream-run spawns, never by hand. It serves the run\'s five sandboxed tools as MCP (JSON-RPC on stdin and stdout) and forwards each call to the running dream-run over the socket it names; exit 0 at stdin\'s end, 3 when the socket cannot be reached'
complete -c dream-run -n "__fish_dream_run_using_subcommand help; and not __fish_seen_subcommand_from tasks pending undo show apply discard recover check eval tool-relay help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
