_dream__lock() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="dream__lock"
                ;;
            dream__lock,acquire)
                cmd="dream__lock__subcmd__acquire"
                ;;
            dream__lock,exec)
                cmd="dream__lock__subcmd__exec"
                ;;
            dream__lock,release)
                cmd="dream__lock__subcmd__release"
                ;;
            dream__lock,status)
                cmd="dream__lock__subcmd__status"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        dream__lock)
            opts="-q -v -n -h -V --quiet --verbose --pretty --compact --null-input --help --version acquire release status exec"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dream__subcmd__lock__subcmd__acquire)
            opts="-q -v -n -h --cwd --memory-dir --transcripts-dir --backend --pid --quiet --verbose --pretty --compact --null-input --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --cwd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --memory-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --transcripts-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --backend)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pid)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dream__subcmd__lock__subcmd__exec)
            opts="-q -v -n -h --cwd --memory-dir --transcripts-dir --backend --quiet --verbose --pretty --compact --null-input --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --cwd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --memory-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --transcripts-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --backend)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dream__subcmd__lock__subcmd__release)
            opts="-q -v -n -h --cwd --memory-dir --transcripts-dir --backend --outcome --token --prior-mtime --quiet --verbose --pretty --compact --null-input --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --cwd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --memory-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --transcripts-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --backend)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --outcome)
                    COMPREPLY=($(compgen -W "completed failed aborted" -- "${cur}"))
                    return 0
                    ;;
                --token)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prior-mtime)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dream__subcmd__lock__subcmd__status)
            opts="-q -v -n -h --cwd --memory-dir --transcripts-dir --backend --quiet --verbose --pretty --compact --null-input --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --cwd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --memory-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --transcripts-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --backend)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _dream__lock -o nosort -o bashdefault -o default dream-lock
else
    complete -F _dream__lock -o bashdefault -o default dream-lock
fi
