complete -c turn-status -l session -d 'Session id for the record [default: the payload\'s session_id, else the transcript\'s]' -r
complete -c turn-status -l surface -d 'Where the status is shown: cli, ccr, bridge, desktop -> summary; bg, watched -> state; repl -> headline' -r -f -a "cli\t''
ccr\t''
bridge\t''
desktop\t''
bg\t''
watched\t''
repl\t''"
complete -c turn-status -l engine -d 'Classifier: the rule table, or the small/fast model' -r -f -a "heuristic\t'The rule table: no model, no network'
llm\t'The small/fast model'"
complete -c turn-status -l fallback -d 'When the LLM engine fails, classify with the rule table instead of exiting 4' -r -f -a "heuristic\t'Classify with the rule table instead (exit 0)'"
complete -c turn-status -l provider -d 'Model API: the Anthropic Messages API, an OpenAI-compatible server, or the user\'s own Claude Code in print mode (its login; no API key needed)' -r -f -a "anthropic\t''
openai\t''
claude\t''"
complete -c turn-status -l model -d 'Model id [default: from ANTHROPIC_* variables, or OPENAI_MODEL with --provider openai]' -r
complete -c turn-status -l timeout -d 'Timeout of one model request (0: none; --deadline still bounds the exchange)' -r
complete -c turn-status -l deadline -d 'Deadline for the whole exchange, retries included' -r
complete -c turn-status -l retries -d 'Retries after 429, 529, 5xx, resets and timeouts' -r
complete -c turn-status -l transcript -d 'Transcript whose last turn to classify [default: the payload\'s last_assistant_message]' -r -F
complete -c turn-status -l previous -d 'The previous output, reused when the turn has no new assistant text' -r -F
complete -c turn-status -l state-file -d 'Also write the clearing line, then the result, to FILE (each write atomic; mode 0600)' -r -F
complete -c turn-status -s q -l quiet -d 'Print no diagnostics on stderr (the JSON on stdout is unchanged)'
complete -c turn-status -s v -l verbose -d 'Explain decisions on stderr'
complete -c turn-status -l pretty -d 'Indent the JSON output (the default when stdout is a terminal)'
complete -c turn-status -l compact -d 'One-line JSON output, even on a terminal'
complete -c turn-status -s n -l null-input -d 'Read no stdin (as jq\'s -n): for loops and scripts whose stdin is not for us'
complete -c turn-status -l schema -d 'Print the JSON Schema of what this command prints on stdout, and run nothing'
complete -c turn-status -l permission-blocked -d 'A permission prompt is pending: blocked at once, nothing classified'
complete -c turn-status -l events -d 'JSON Lines: the clearing line {"post_turn_summary":null} first, then the result'
complete -c turn-status -s h -l help -d 'Print help (see more with \'--help\')'
complete -c turn-status -s V -l version -d 'Print version'
