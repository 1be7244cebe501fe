complete -c recap -l away -d 'How long the user has been away [default: since the transcript\'s last record]' -r
complete -c recap -l away-ms -d '--away in milliseconds' -r
complete -c recap -l delay -d 'Least time away before a summary (raised to at least 30s) [default: 3m]' -r
complete -c recap -l delay-ms -d '--delay in milliseconds [default: 180000]' -r
complete -c recap -l cache-ttl -d 'Prompt-cache lifetime: the delay is at most 0.8 of it [default: 1h]' -r
complete -c recap -l cache-ttl-ms -d '--cache-ttl in milliseconds [default: 3600000]' -r
complete -c recap -l cache-age -d 'Age of the prompt cache [default: since the last assistant record]' -r
complete -c recap -l cache-age-ms -d '--cache-age in milliseconds' -r
complete -c recap -l draft -d 'Text the user has typed but not sent; a non-empty draft skips the summary' -r
complete -c recap -l provider -d 'Model API: the Anthropic Messages API, an OpenAI-compatible server, or the user\'s own Claude Code in print mode (its login; no API key needed)' -r -f -a "anthropic\t''
openai\t''
claude\t''"
complete -c recap -l model -d 'Model id [default: from ANTHROPIC_* variables, or OPENAI_MODEL with --provider openai]' -r
complete -c recap -l timeout -d 'Timeout of one model request (0: none; --deadline still bounds the exchange)' -r
complete -c recap -l deadline -d 'Deadline for the whole exchange, retries included' -r
complete -c recap -l retries -d 'Retries after 429, 529, 5xx, resets and timeouts' -r
complete -c recap -l transcript -d 'Transcript to summarise [default: the hook payload\'s transcript_path]' -r -F
complete -c recap -l cwd -d 'Project directory [default: the hook payload\'s `cwd`, else the current directory]' -r -f -a "(__fish_complete_directories)"
complete -c recap -l memory-dir -d 'Memory directory, overriding every other rule' -r -f -a "(__fish_complete_directories)"
complete -c recap -l transcripts-dir -d 'Directory holding the project\'s `<session-id>.jsonl` transcripts' -r -f -a "(__fish_complete_directories)"
complete -c recap -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c recap -s v -l verbose -d 'Explain decisions on stderr'
complete -c recap -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c recap -l compact -d 'One-line JSON output, even on a terminal'
complete -c recap -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c recap -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c recap -l auto -d 'Away-summary mode: apply the gates, then append the summary to the transcript'
complete -c recap -l dry-run -d 'Apply the gates (with --auto) and say what would be asked and written: no request, no credential needed, nothing written (status dry-run, exit 0)'
complete -c recap -l pending-work -d 'Work is still running (tools, background tasks): skip'
complete -c recap -l rate-limited -d 'The account is rate-limited: skip'
complete -c recap -s h -l help -d 'Print help (see more with \'--help\')'
complete -c recap -s V -l version -d 'Print version'
