# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_dream_lock_global_optspecs
    string join \n q/quiet v/verbose pretty compact n/null-input schema h/help V/version
end

function __fish_dream_lock_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_dream_lock_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_dream_lock_using_subcommand
    set -l cmd (__fish_dream_lock_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c dream-lock -n "__fish_dream_lock_needs_command" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-lock -n "__fish_dream_lock_needs_command" -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-lock -n "__fish_dream_lock_needs_command" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-lock -n "__fish_dream_lock_needs_command" -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-lock -n "__fish_dream_lock_needs_command" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-lock -n "__fish_dream_lock_needs_command" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-lock -n "__fish_dream_lock_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dream-lock -n "__fish_dream_lock_needs_command" -s V -l version -d 'Print version'
complete -c dream-lock -n "__fish_dream_lock_needs_command" -f -a "acquire" -d 'Take the lock (exit 0) or report its holder (exit 1)'
complete -c dream-lock -n "__fish_dream_lock_needs_command" -f -a "release" -d 'Free the lock after a run, or roll it back to the prior time'
complete -c dream-lock -n "__fish_dream_lock_needs_command" -f -a "status" -d 'Who holds the lock (exit 0 free, 1 held)'
complete -c dream-lock -n "__fish_dream_lock_needs_command" -f -a "exec" -d 'Take the lock, run CMD with the envelope on stdin, release by how CMD ended'
complete -c dream-lock -n "__fish_dream_lock_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand acquire" -l backend -d 'Lock backend: `file` (the default: <memory_dir>/.consolidate-lock) or etcd://host:port[,host:port...][/prefix]' -r
complete -c dream-lock -n "__fish_dream_lock_using_subcommand acquire" -l pid -d 'PID to record as the holder [default: the parent process, e.g. the hook\'s shell]' -r
complete -c dream-lock -n "__fish_dream_lock_using_subcommand acquire" -l cwd -d 'Project directory [default: the hook payload\'s `cwd`, else the current directory]' -r -f -a "(__fish_complete_directories)"
complete -c dream-lock -n "__fish_dream_lock_using_subcommand acquire" -l memory-dir -d 'Memory directory, overriding every other rule' -r -f -a "(__fish_complete_directories)"
complete -c dream-lock -n "__fish_dream_lock_using_subcommand acquire" -l transcripts-dir -d 'Directory holding the project\'s `<session-id>.jsonl` transcripts' -r -f -a "(__fish_complete_directories)"
complete -c dream-lock -n "__fish_dream_lock_using_subcommand acquire" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand acquire" -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand acquire" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand acquire" -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand acquire" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand acquire" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand acquire" -s h -l help -d 'Print help'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand release" -l backend -d 'Lock backend: `file` (the default: <memory_dir>/.consolidate-lock) or etcd://host:port[,host:port...][/prefix]' -r
complete -c dream-lock -n "__fish_dream_lock_using_subcommand release" -l outcome -d 'How the run ended [default: the envelope\'s run.status, else failed (roll back)]' -r -f -a "completed\t'Free the lock; now is the new last-consolidated time'
failed\t'Roll back to the prior last-consolidated time, so the next gate can retry'
aborted\t'Like `failed`: roll back'"
complete -c dream-lock -n "__fish_dream_lock_using_subcommand release" -l token -d 'Fencing token from acquire or status [default: the envelope\'s lock.token, or the token of `dream-lock status` output on stdin]' -r
complete -c dream-lock -n "__fish_dream_lock_using_subcommand release" -l prior-mtime -d 'Prior last-consolidated time in epoch ms, 0 for none [default: lock.prior_mtime, else 0]' -r
complete -c dream-lock -n "__fish_dream_lock_using_subcommand release" -l cwd -d 'Project directory [default: the hook payload\'s `cwd`, else the current directory]' -r -f -a "(__fish_complete_directories)"
complete -c dream-lock -n "__fish_dream_lock_using_subcommand release" -l memory-dir -d 'Memory directory, overriding every other rule' -r -f -a "(__fish_complete_directories)"
complete -c dream-lock -n "__fish_dream_lock_using_subcommand release" -l transcripts-dir -d 'Directory holding the project\'s `<session-id>.jsonl` transcripts' -r -f -a "(__fish_complete_directories)"
complete -c dream-lock -n "__fish_dream_lock_using_subcommand release" -l force -d 'Release even though the holder is alive and is not this shell or one of its parents'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand release" -l dry-run -d 'Print what the release would do (lock.dry_run, lock.would_set_last_consolidated_at), change nothing; exit 0 when it would release, 1 when it would not'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand release" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand release" -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand release" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand release" -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand release" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand release" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand release" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand status" -l backend -d 'Lock backend: `file` (the default: <memory_dir>/.consolidate-lock) or etcd://host:port[,host:port...][/prefix]' -r
complete -c dream-lock -n "__fish_dream_lock_using_subcommand status" -l cwd -d 'Project directory [default: the hook payload\'s `cwd`, else the current directory]' -r -f -a "(__fish_complete_directories)"
complete -c dream-lock -n "__fish_dream_lock_using_subcommand status" -l memory-dir -d 'Memory directory, overriding every other rule' -r -f -a "(__fish_complete_directories)"
complete -c dream-lock -n "__fish_dream_lock_using_subcommand status" -l transcripts-dir -d 'Directory holding the project\'s `<session-id>.jsonl` transcripts' -r -f -a "(__fish_complete_directories)"
complete -c dream-lock -n "__fish_dream_lock_using_subcommand status" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand status" -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand status" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand status" -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand status" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand status" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand status" -s h -l help -d 'Print help'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand exec" -l backend -d 'Lock backend: `file` (the default: <memory_dir>/.consolidate-lock) or etcd://host:port[,host:port...][/prefix]' -r
complete -c dream-lock -n "__fish_dream_lock_using_subcommand exec" -l cwd -d 'Project directory [default: the hook payload\'s `cwd`, else the current directory]' -r -f -a "(__fish_complete_directories)"
complete -c dream-lock -n "__fish_dream_lock_using_subcommand exec" -l memory-dir -d 'Memory directory, overriding every other rule' -r -f -a "(__fish_complete_directories)"
complete -c dream-lock -n "__fish_dream_lock_using_subcommand exec" -l transcripts-dir -d 'Directory holding the project\'s `<session-id>.jsonl` transcripts' -r -f -a "(__fish_complete_directories)"
complete -c dream-lock -n "__fish_dream_lock_using_subcommand exec" -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand exec" -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand exec" -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand exec" -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand exec" -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand exec" -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand exec" -s h -l help -d 'Print help'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand help; and not __fish_seen_subcommand_from acquire release status exec help" -f -a "acquire" -d 'Take the lock (exit 0) or report its holder (exit 1)'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand help; and not __fish_seen_subcommand_from acquire release status exec help" -f -a "release" -d 'Free the lock after a run, or roll it back to the prior time'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand help; and not __fish_seen_subcommand_from acquire release status exec help" -f -a "status" -d 'Who holds the lock (exit 0 free, 1 held)'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand help; and not __fish_seen_subcommand_from acquire release status exec help" -f -a "exec" -d 'Take the lock, run CMD with the envelope on stdin, release by how CMD ended'
complete -c dream-lock -n "__fish_dream_lock_using_subcommand help; and not __fish_seen_subcommand_from acquire release status exec help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
