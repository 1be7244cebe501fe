complete -c dream-gate -l backend -d 'Lock backend: `file` (the default: <memory_dir>/.consolidate-lock) or etcd://host:port[,host:port...][/prefix]' -r
complete -c dream-gate -l session -l current-session -d 'Session to leave out, the one still running [default: the hook payload\'s session_id]' -r
complete -c dream-gate -l min-hours -d 'Time that must pass after the last consolidation: hours, or a duration (24, 24h, 90m)' -r
complete -c dream-gate -l min-sessions -d 'Sessions that must have changed since the last consolidation' -r
complete -c dream-gate -l scan-interval -d 'Least time between two scans of the transcripts dir (0 turns throttling off)' -r
complete -c dream-gate -l cwd -d 'Project directory [default: the hook payload\'s `cwd`, else the current directory]' -r -f -a "(__fish_complete_directories)"
complete -c dream-gate -l memory-dir -d 'Memory directory, overriding every other rule' -r -f -a "(__fish_complete_directories)"
complete -c dream-gate -l transcripts-dir -d 'Directory holding the project\'s `<session-id>.jsonl` transcripts' -r -f -a "(__fish_complete_directories)"
complete -c dream-gate -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c dream-gate -s v -l verbose -d 'Explain decisions on stderr'
complete -c dream-gate -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c dream-gate -l compact -d 'One-line JSON output, even on a terminal'
complete -c dream-gate -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c dream-gate -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c dream-gate -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dream-gate -s V -l version -d 'Print version'
