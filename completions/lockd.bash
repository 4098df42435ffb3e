# bash completion for lockd. Generated from lockd's command definitions: do not edit.
# Install: source it from ~/.bashrc, or copy it to
# ~/.local/share/bash-completion/completions/lockd (bash-completion loads it on demand).

_lockd_complete() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local node=lockd skip= i w flag
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if [[ $w == = ]]; then skip=1; continue; fi
        if [[ -n $skip ]]; then skip=; continue; fi
        if [[ $w == -- ]]; then
            case $node in
            esac
            return 0
        fi
        case "$node $w" in
        "lockd completion") node=lockd_completion ;;
        "lockd --listen"|"lockd --peers"|"lockd --advertise"|"lockd --heartbeat"|"lockd --failure-timeout"|"lockd --max-keys"|"lockd --max-waiters"|"lockd --max-lease"|"lockd --max-wait"|"lockd --log-level"|"lockd --log-format") skip=1 ;;
        esac
    done
    flag=$prev
    if [[ $cur == = ]]; then
        cur=
    elif [[ $prev == = ]]; then
        flag=${COMP_WORDS[COMP_CWORD-2]}
    fi
    case "$node $flag" in
        "lockd --log-level")
            COMPREPLY=($(compgen -W "debug info warn error" -- "$cur"))
            return 0 ;;
        "lockd --log-format")
            COMPREPLY=($(compgen -W "text json" -- "$cur"))
            return 0 ;;
        "lockd --listen"|"lockd --peers"|"lockd --advertise"|"lockd --heartbeat"|"lockd --failure-timeout"|"lockd --max-keys"|"lockd --max-waiters"|"lockd --max-lease"|"lockd --max-wait") return 0 ;;
    esac
    [[ $prev == = ]] && return 0
    local flags= words=
    case $node in
    lockd)
        flags="--listen --peers --advertise --heartbeat --failure-timeout --max-keys --max-waiters --max-lease --max-wait --log-level --log-format --help -h --version -v"
        words="completion" ;;
    lockd_completion)
        flags="--help -h"
        words="bash zsh fish" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    fi
    return 0
}

complete -F _lockd_complete lockd
