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
        "lockd tls") node=lockd_tls ;;
        "lockd completion") node=lockd_completion ;;
        "lockd version") node=lockd_version ;;
        "lockd_tls ca") node=lockd_tls_ca ;;
        "lockd_tls cert") node=lockd_tls_cert ;;
        "lockd --listen"|"lockd --peers"|"lockd --advertise"|"lockd --heartbeat"|"lockd --failure-timeout"|"lockd --data-dir"|"lockd --fsync"|"lockd --replication"|"lockd --sync-timeout"|"lockd --max-keys"|"lockd --max-waiters"|"lockd --max-lease"|"lockd --max-wait"|"lockd --max-total-waiters"|"lockd --max-watches"|"lockd --max-total-watches"|"lockd --max-clock-skew"|"lockd --tls-cert"|"lockd --tls-key"|"lockd --tls-ca"|"lockd --secret-file"|"lockd --admin-secret-file"|"lockd --peer-secret-file"|"lockd --advertise-client"|"lockd --max-conns"|"lockd --max-conns-per-ip"|"lockd --auth-timeout"|"lockd --line-timeout"|"lockd --max-conn-output"|"lockd --max-output"|"lockd --log-level"|"lockd --log-format"|"lockd --metrics-listen") skip=1 ;;
        "lockd_tls_ca --dir"|"lockd_tls_ca --name"|"lockd_tls_ca --days") skip=1 ;;
        "lockd_tls_cert --host"|"lockd_tls_cert --role"|"lockd_tls_cert --name"|"lockd_tls_cert --dir"|"lockd_tls_cert --ca"|"lockd_tls_cert --ca-key"|"lockd_tls_cert --days") skip=1 ;;
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
        "lockd_tls_cert --role")
            COMPREPLY=($(compgen -W "node admin client" -- "$cur"))
            return 0 ;;
        "lockd --listen"|"lockd --peers"|"lockd --advertise"|"lockd --heartbeat"|"lockd --failure-timeout"|"lockd --data-dir"|"lockd --fsync"|"lockd --replication"|"lockd --sync-timeout"|"lockd --max-keys"|"lockd --max-waiters"|"lockd --max-lease"|"lockd --max-wait"|"lockd --max-total-waiters"|"lockd --max-watches"|"lockd --max-total-watches"|"lockd --max-clock-skew"|"lockd --tls-cert"|"lockd --tls-key"|"lockd --tls-ca"|"lockd --secret-file"|"lockd --admin-secret-file"|"lockd --peer-secret-file"|"lockd --advertise-client"|"lockd --max-conns"|"lockd --max-conns-per-ip"|"lockd --auth-timeout"|"lockd --line-timeout"|"lockd --max-conn-output"|"lockd --max-output"|"lockd --metrics-listen") return 0 ;;
        "lockd_tls_ca --dir"|"lockd_tls_ca --name"|"lockd_tls_ca --days") return 0 ;;
        "lockd_tls_cert --host"|"lockd_tls_cert --name"|"lockd_tls_cert --dir"|"lockd_tls_cert --ca"|"lockd_tls_cert --ca-key"|"lockd_tls_cert --days") return 0 ;;
    esac
    [[ $prev == = ]] && return 0
    local flags= words=
    case $node in
    lockd)
        flags="--listen --peers --advertise --heartbeat --failure-timeout --data-dir --drop-after-corruption --fsync --replication --sync-timeout --max-keys --max-waiters --max-lease --max-wait --max-total-waiters --max-watches --max-total-watches --max-clock-skew --tls-cert --tls-key --tls-ca --tls-client-auth --secret-file --admin-secret-file --peer-secret-file --advertise-client --insecure --max-conns --max-conns-per-ip --auth-timeout --line-timeout --max-conn-output --max-output --log-level --log-format --metrics-listen --help -h --version -v"
        words="tls completion version" ;;
    lockd_tls)
        flags="--help -h"
        words="ca cert" ;;
    lockd_tls_ca)
        flags="--dir --name --days --force --help -h"
        words="" ;;
    lockd_tls_cert)
        flags="--host --role --name --dir --ca --ca-key --days --force --help -h"
        words="" ;;
    lockd_completion)
        flags="--help -h"
        words="bash zsh fish" ;;
    lockd_version)
        flags="--help -h"
        words="" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    fi
    return 0
}

complete -F _lockd_complete lockd
