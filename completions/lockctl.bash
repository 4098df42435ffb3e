# bash completion for lockctl. Generated from lockctl's command definitions: do not edit.
# Install: source it from ~/.bashrc, or copy it to
# ~/.local/share/bash-completion/completions/lockctl (bash-completion loads it on demand).

_lockctl_complete() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local node=lockctl skip= i w flag
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if [[ $w == = ]]; then skip=1; continue; fi
        if [[ -n $skip ]]; then skip=; continue; fi
        if [[ $w == -- ]]; then
            case $node in
            lockctl_exec)
                if ((COMP_CWORD == i + 1)); then
                    COMPREPLY=($(compgen -c -- "$cur"))
                else
                    compopt -o default 2>/dev/null
                fi ;;
            esac
            return 0
        fi
        case "$node $w" in
        "lockctl acquire") node=lockctl_acquire ;;
        "lockctl release") node=lockctl_release ;;
        "lockctl renew") node=lockctl_renew ;;
        "lockctl hold") node=lockctl_hold ;;
        "lockctl exec") node=lockctl_exec ;;
        "lockctl bench") node=lockctl_bench ;;
        "lockctl status") node=lockctl_status ;;
        "lockctl queues") node=lockctl_queues ;;
        "lockctl watch") node=lockctl_watch ;;
        "lockctl handoff") node=lockctl_handoff ;;
        "lockctl drill") node=lockctl_drill ;;
        "lockctl completion") node=lockctl_completion ;;
        "lockctl version") node=lockctl_version ;;
        "lockctl help"|"lockctl h") node=lockctl_help ;;
        "lockctl --addr"|"lockctl --output"|"lockctl -o"|"lockctl --color"|"lockctl --timeout"|"lockctl --failure-timeout"|"lockctl --name"|"lockctl --tls-ca"|"lockctl --tls-cert"|"lockctl --tls-key"|"lockctl --tls-server-name"|"lockctl --secret-file") skip=1 ;;
        "lockctl_acquire --key"|"lockctl_acquire --lease"|"lockctl_acquire --wait"|"lockctl_acquire -w"|"lockctl_acquire --limit"|"lockctl_acquire --addr"|"lockctl_acquire --output"|"lockctl_acquire -o"|"lockctl_acquire --color"|"lockctl_acquire --timeout"|"lockctl_acquire --failure-timeout"|"lockctl_acquire --name"|"lockctl_acquire --tls-ca"|"lockctl_acquire --tls-cert"|"lockctl_acquire --tls-key"|"lockctl_acquire --tls-server-name"|"lockctl_acquire --secret-file") skip=1 ;;
        "lockctl_release --key"|"lockctl_release --token"|"lockctl_release --addr"|"lockctl_release --output"|"lockctl_release -o"|"lockctl_release --color"|"lockctl_release --timeout"|"lockctl_release --failure-timeout"|"lockctl_release --name"|"lockctl_release --tls-ca"|"lockctl_release --tls-cert"|"lockctl_release --tls-key"|"lockctl_release --tls-server-name"|"lockctl_release --secret-file") skip=1 ;;
        "lockctl_renew --key"|"lockctl_renew --token"|"lockctl_renew --lease"|"lockctl_renew --addr"|"lockctl_renew --output"|"lockctl_renew -o"|"lockctl_renew --color"|"lockctl_renew --timeout"|"lockctl_renew --failure-timeout"|"lockctl_renew --name"|"lockctl_renew --tls-ca"|"lockctl_renew --tls-cert"|"lockctl_renew --tls-key"|"lockctl_renew --tls-server-name"|"lockctl_renew --secret-file") skip=1 ;;
        "lockctl_hold --key"|"lockctl_hold --lease"|"lockctl_hold --wait"|"lockctl_hold -w"|"lockctl_hold --limit"|"lockctl_hold --addr"|"lockctl_hold --output"|"lockctl_hold -o"|"lockctl_hold --color"|"lockctl_hold --timeout"|"lockctl_hold --failure-timeout"|"lockctl_hold --name"|"lockctl_hold --tls-ca"|"lockctl_hold --tls-cert"|"lockctl_hold --tls-key"|"lockctl_hold --tls-server-name"|"lockctl_hold --secret-file") skip=1 ;;
        "lockctl_exec --key"|"lockctl_exec --lease"|"lockctl_exec --wait"|"lockctl_exec -w"|"lockctl_exec --limit"|"lockctl_exec --grace"|"lockctl_exec --timeout-code"|"lockctl_exec -E"|"lockctl_exec --addr"|"lockctl_exec --output"|"lockctl_exec -o"|"lockctl_exec --color"|"lockctl_exec --timeout"|"lockctl_exec --failure-timeout"|"lockctl_exec --name"|"lockctl_exec --tls-ca"|"lockctl_exec --tls-cert"|"lockctl_exec --tls-key"|"lockctl_exec --tls-server-name"|"lockctl_exec --secret-file") skip=1 ;;
        "lockctl_bench --workers"|"lockctl_bench --conns"|"lockctl_bench --duration"|"lockctl_bench --keys"|"lockctl_bench --lease"|"lockctl_bench --wait"|"lockctl_bench -w"|"lockctl_bench --mode"|"lockctl_bench --limit"|"lockctl_bench --addr"|"lockctl_bench --output"|"lockctl_bench -o"|"lockctl_bench --color"|"lockctl_bench --timeout"|"lockctl_bench --failure-timeout"|"lockctl_bench --name"|"lockctl_bench --tls-ca"|"lockctl_bench --tls-cert"|"lockctl_bench --tls-key"|"lockctl_bench --tls-server-name"|"lockctl_bench --secret-file") skip=1 ;;
        "lockctl_status --max-lag"|"lockctl_status --interval"|"lockctl_status --wait-active"|"lockctl_status --addr"|"lockctl_status --output"|"lockctl_status -o"|"lockctl_status --color"|"lockctl_status --timeout"|"lockctl_status --failure-timeout"|"lockctl_status --name"|"lockctl_status --tls-ca"|"lockctl_status --tls-cert"|"lockctl_status --tls-key"|"lockctl_status --tls-server-name"|"lockctl_status --secret-file") skip=1 ;;
        "lockctl_queues --key"|"lockctl_queues --prefix"|"lockctl_queues --addr"|"lockctl_queues --output"|"lockctl_queues -o"|"lockctl_queues --color"|"lockctl_queues --timeout"|"lockctl_queues --failure-timeout"|"lockctl_queues --name"|"lockctl_queues --tls-ca"|"lockctl_queues --tls-cert"|"lockctl_queues --tls-key"|"lockctl_queues --tls-server-name"|"lockctl_queues --secret-file") skip=1 ;;
        "lockctl_watch --key"|"lockctl_watch --addr"|"lockctl_watch --output"|"lockctl_watch -o"|"lockctl_watch --color"|"lockctl_watch --timeout"|"lockctl_watch --failure-timeout"|"lockctl_watch --name"|"lockctl_watch --tls-ca"|"lockctl_watch --tls-cert"|"lockctl_watch --tls-key"|"lockctl_watch --tls-server-name"|"lockctl_watch --secret-file") skip=1 ;;
        "lockctl_handoff --to"|"lockctl_handoff --addr"|"lockctl_handoff --output"|"lockctl_handoff -o"|"lockctl_handoff --color"|"lockctl_handoff --timeout"|"lockctl_handoff --failure-timeout"|"lockctl_handoff --name"|"lockctl_handoff --tls-ca"|"lockctl_handoff --tls-cert"|"lockctl_handoff --tls-key"|"lockctl_handoff --tls-server-name"|"lockctl_handoff --secret-file") skip=1 ;;
        "lockctl_drill --workers"|"lockctl_drill --keys"|"lockctl_drill --lease"|"lockctl_drill --duration"|"lockctl_drill --action"|"lockctl_drill --run"|"lockctl_drill --at"|"lockctl_drill --max-gap"|"lockctl_drill --max-errors"|"lockctl_drill --max-lost"|"lockctl_drill --report"|"lockctl_drill --addr"|"lockctl_drill --output"|"lockctl_drill -o"|"lockctl_drill --color"|"lockctl_drill --timeout"|"lockctl_drill --failure-timeout"|"lockctl_drill --name"|"lockctl_drill --tls-ca"|"lockctl_drill --tls-cert"|"lockctl_drill --tls-key"|"lockctl_drill --tls-server-name"|"lockctl_drill --secret-file") skip=1 ;;
        "lockctl_completion --addr"|"lockctl_completion --output"|"lockctl_completion -o"|"lockctl_completion --color"|"lockctl_completion --timeout"|"lockctl_completion --failure-timeout"|"lockctl_completion --name"|"lockctl_completion --tls-ca"|"lockctl_completion --tls-cert"|"lockctl_completion --tls-key"|"lockctl_completion --tls-server-name"|"lockctl_completion --secret-file") skip=1 ;;
        "lockctl_version --addr"|"lockctl_version --output"|"lockctl_version -o"|"lockctl_version --color"|"lockctl_version --timeout"|"lockctl_version --failure-timeout"|"lockctl_version --name"|"lockctl_version --tls-ca"|"lockctl_version --tls-cert"|"lockctl_version --tls-key"|"lockctl_version --tls-server-name"|"lockctl_version --secret-file") skip=1 ;;
        esac
    done
    flag=$prev
    if [[ $cur == = ]]; then
        cur=
    elif [[ $prev == = ]]; then
        flag=${COMP_WORDS[COMP_CWORD-2]}
    fi
    case "$node $flag" in
        "lockctl --output"|"lockctl -o"|"lockctl_acquire --output"|"lockctl_acquire -o"|"lockctl_release --output"|"lockctl_release -o"|"lockctl_renew --output"|"lockctl_renew -o"|"lockctl_hold --output"|"lockctl_hold -o"|"lockctl_exec --output"|"lockctl_exec -o"|"lockctl_bench --output"|"lockctl_bench -o"|"lockctl_status --output"|"lockctl_status -o"|"lockctl_queues --output"|"lockctl_queues -o"|"lockctl_watch --output"|"lockctl_watch -o"|"lockctl_handoff --output"|"lockctl_handoff -o"|"lockctl_drill --output"|"lockctl_drill -o"|"lockctl_completion --output"|"lockctl_completion -o"|"lockctl_version --output"|"lockctl_version -o")
            COMPREPLY=($(compgen -W "text table wide json" -- "$cur"))
            return 0 ;;
        "lockctl --color"|"lockctl_acquire --color"|"lockctl_release --color"|"lockctl_renew --color"|"lockctl_hold --color"|"lockctl_exec --color"|"lockctl_bench --color"|"lockctl_status --color"|"lockctl_queues --color"|"lockctl_watch --color"|"lockctl_handoff --color"|"lockctl_drill --color"|"lockctl_completion --color"|"lockctl_version --color")
            COMPREPLY=($(compgen -W "auto always never" -- "$cur"))
            return 0 ;;
        "lockctl_bench --mode")
            COMPREPLY=($(compgen -W "pipelined per-worker" -- "$cur"))
            return 0 ;;
        "lockctl_drill --action")
            COMPREPLY=($(compgen -W "handoff none" -- "$cur"))
            return 0 ;;
        "lockctl --addr"|"lockctl --timeout"|"lockctl --failure-timeout"|"lockctl --name"|"lockctl --tls-ca"|"lockctl --tls-cert"|"lockctl --tls-key"|"lockctl --tls-server-name"|"lockctl --secret-file") return 0 ;;
        "lockctl_acquire --key"|"lockctl_acquire --lease"|"lockctl_acquire --wait"|"lockctl_acquire -w"|"lockctl_acquire --limit"|"lockctl_acquire --addr"|"lockctl_acquire --timeout"|"lockctl_acquire --failure-timeout"|"lockctl_acquire --name"|"lockctl_acquire --tls-ca"|"lockctl_acquire --tls-cert"|"lockctl_acquire --tls-key"|"lockctl_acquire --tls-server-name"|"lockctl_acquire --secret-file") return 0 ;;
        "lockctl_release --key"|"lockctl_release --token"|"lockctl_release --addr"|"lockctl_release --timeout"|"lockctl_release --failure-timeout"|"lockctl_release --name"|"lockctl_release --tls-ca"|"lockctl_release --tls-cert"|"lockctl_release --tls-key"|"lockctl_release --tls-server-name"|"lockctl_release --secret-file") return 0 ;;
        "lockctl_renew --key"|"lockctl_renew --token"|"lockctl_renew --lease"|"lockctl_renew --addr"|"lockctl_renew --timeout"|"lockctl_renew --failure-timeout"|"lockctl_renew --name"|"lockctl_renew --tls-ca"|"lockctl_renew --tls-cert"|"lockctl_renew --tls-key"|"lockctl_renew --tls-server-name"|"lockctl_renew --secret-file") return 0 ;;
        "lockctl_hold --key"|"lockctl_hold --lease"|"lockctl_hold --wait"|"lockctl_hold -w"|"lockctl_hold --limit"|"lockctl_hold --addr"|"lockctl_hold --timeout"|"lockctl_hold --failure-timeout"|"lockctl_hold --name"|"lockctl_hold --tls-ca"|"lockctl_hold --tls-cert"|"lockctl_hold --tls-key"|"lockctl_hold --tls-server-name"|"lockctl_hold --secret-file") return 0 ;;
        "lockctl_exec --key"|"lockctl_exec --lease"|"lockctl_exec --wait"|"lockctl_exec -w"|"lockctl_exec --limit"|"lockctl_exec --grace"|"lockctl_exec --timeout-code"|"lockctl_exec -E"|"lockctl_exec --addr"|"lockctl_exec --timeout"|"lockctl_exec --failure-timeout"|"lockctl_exec --name"|"lockctl_exec --tls-ca"|"lockctl_exec --tls-cert"|"lockctl_exec --tls-key"|"lockctl_exec --tls-server-name"|"lockctl_exec --secret-file") return 0 ;;
        "lockctl_bench --workers"|"lockctl_bench --conns"|"lockctl_bench --duration"|"lockctl_bench --keys"|"lockctl_bench --lease"|"lockctl_bench --wait"|"lockctl_bench -w"|"lockctl_bench --limit"|"lockctl_bench --addr"|"lockctl_bench --timeout"|"lockctl_bench --failure-timeout"|"lockctl_bench --name"|"lockctl_bench --tls-ca"|"lockctl_bench --tls-cert"|"lockctl_bench --tls-key"|"lockctl_bench --tls-server-name"|"lockctl_bench --secret-file") return 0 ;;
        "lockctl_status --max-lag"|"lockctl_status --interval"|"lockctl_status --wait-active"|"lockctl_status --addr"|"lockctl_status --timeout"|"lockctl_status --failure-timeout"|"lockctl_status --name"|"lockctl_status --tls-ca"|"lockctl_status --tls-cert"|"lockctl_status --tls-key"|"lockctl_status --tls-server-name"|"lockctl_status --secret-file") return 0 ;;
        "lockctl_queues --key"|"lockctl_queues --prefix"|"lockctl_queues --addr"|"lockctl_queues --timeout"|"lockctl_queues --failure-timeout"|"lockctl_queues --name"|"lockctl_queues --tls-ca"|"lockctl_queues --tls-cert"|"lockctl_queues --tls-key"|"lockctl_queues --tls-server-name"|"lockctl_queues --secret-file") return 0 ;;
        "lockctl_watch --key"|"lockctl_watch --addr"|"lockctl_watch --timeout"|"lockctl_watch --failure-timeout"|"lockctl_watch --name"|"lockctl_watch --tls-ca"|"lockctl_watch --tls-cert"|"lockctl_watch --tls-key"|"lockctl_watch --tls-server-name"|"lockctl_watch --secret-file") return 0 ;;
        "lockctl_handoff --to"|"lockctl_handoff --addr"|"lockctl_handoff --timeout"|"lockctl_handoff --failure-timeout"|"lockctl_handoff --name"|"lockctl_handoff --tls-ca"|"lockctl_handoff --tls-cert"|"lockctl_handoff --tls-key"|"lockctl_handoff --tls-server-name"|"lockctl_handoff --secret-file") return 0 ;;
        "lockctl_drill --workers"|"lockctl_drill --keys"|"lockctl_drill --lease"|"lockctl_drill --duration"|"lockctl_drill --run"|"lockctl_drill --at"|"lockctl_drill --max-gap"|"lockctl_drill --max-errors"|"lockctl_drill --max-lost"|"lockctl_drill --report"|"lockctl_drill --addr"|"lockctl_drill --timeout"|"lockctl_drill --failure-timeout"|"lockctl_drill --name"|"lockctl_drill --tls-ca"|"lockctl_drill --tls-cert"|"lockctl_drill --tls-key"|"lockctl_drill --tls-server-name"|"lockctl_drill --secret-file") return 0 ;;
        "lockctl_completion --addr"|"lockctl_completion --timeout"|"lockctl_completion --failure-timeout"|"lockctl_completion --name"|"lockctl_completion --tls-ca"|"lockctl_completion --tls-cert"|"lockctl_completion --tls-key"|"lockctl_completion --tls-server-name"|"lockctl_completion --secret-file") return 0 ;;
        "lockctl_version --addr"|"lockctl_version --timeout"|"lockctl_version --failure-timeout"|"lockctl_version --name"|"lockctl_version --tls-ca"|"lockctl_version --tls-cert"|"lockctl_version --tls-key"|"lockctl_version --tls-server-name"|"lockctl_version --secret-file") return 0 ;;
    esac
    [[ $prev == = ]] && return 0
    local flags= words=
    case $node in
    lockctl)
        flags="--addr --output -o --json --no-headers --color --timeout --failure-timeout --name --tls --tls-ca --tls-cert --tls-key --tls-server-name --secret-file --help -h --version -v"
        words="acquire release renew hold exec bench status queues watch handoff drill completion version help" ;;
    lockctl_acquire)
        flags="--key --shared --lease --wait -w --nonblock -n --limit --addr --output -o --json --no-headers --color --timeout --failure-timeout --name --tls --tls-ca --tls-cert --tls-key --tls-server-name --secret-file --help -h"
        words="" ;;
    lockctl_release)
        flags="--key --token --addr --output -o --json --no-headers --color --timeout --failure-timeout --name --tls --tls-ca --tls-cert --tls-key --tls-server-name --secret-file --help -h"
        words="" ;;
    lockctl_renew)
        flags="--key --token --lease --addr --output -o --json --no-headers --color --timeout --failure-timeout --name --tls --tls-ca --tls-cert --tls-key --tls-server-name --secret-file --help -h"
        words="" ;;
    lockctl_hold)
        flags="--key --shared --lease --wait -w --nonblock -n --limit --addr --output -o --json --no-headers --color --timeout --failure-timeout --name --tls --tls-ca --tls-cert --tls-key --tls-server-name --secret-file --help -h"
        words="" ;;
    lockctl_exec)
        flags="--key --shared --lease --wait -w --nonblock -n --limit --grace --timeout-code -E --addr --output -o --json --no-headers --color --timeout --failure-timeout --name --tls --tls-ca --tls-cert --tls-key --tls-server-name --secret-file --help -h"
        words="" ;;
    lockctl_bench)
        flags="--workers --conns --duration --keys --lease --wait -w --mode --limit --addr --output -o --json --no-headers --color --timeout --failure-timeout --name --tls --tls-ca --tls-cert --tls-key --tls-server-name --secret-file --help -h"
        words="" ;;
    lockctl_status)
        flags="--check --max-lag --watch --interval --wait-active --addr --output -o --json --no-headers --color --timeout --failure-timeout --name --tls --tls-ca --tls-cert --tls-key --tls-server-name --secret-file --help -h"
        words="" ;;
    lockctl_queues)
        flags="--key --prefix --addr --output -o --json --no-headers --color --timeout --failure-timeout --name --tls --tls-ca --tls-cert --tls-key --tls-server-name --secret-file --help -h"
        words="" ;;
    lockctl_watch)
        flags="--key --addr --output -o --json --no-headers --color --timeout --failure-timeout --name --tls --tls-ca --tls-cert --tls-key --tls-server-name --secret-file --help -h"
        words="" ;;
    lockctl_handoff)
        flags="--to --addr --output -o --json --no-headers --color --timeout --failure-timeout --name --tls --tls-ca --tls-cert --tls-key --tls-server-name --secret-file --help -h"
        words="" ;;
    lockctl_drill)
        flags="--workers --keys --lease --duration --action --run --at --max-gap --max-errors --max-lost --expect-failover --report --addr --output -o --json --no-headers --color --timeout --failure-timeout --name --tls --tls-ca --tls-cert --tls-key --tls-server-name --secret-file --help -h"
        words="" ;;
    lockctl_completion)
        flags="--addr --output -o --json --no-headers --color --timeout --failure-timeout --name --tls --tls-ca --tls-cert --tls-key --tls-server-name --secret-file --help -h"
        words="bash zsh fish" ;;
    lockctl_version)
        flags="--addr --output -o --json --no-headers --color --timeout --failure-timeout --name --tls --tls-ca --tls-cert --tls-key --tls-server-name --secret-file --help -h"
        words="" ;;
    lockctl_help)
        flags=""
        words="acquire release renew hold exec bench status queues watch handoff drill completion version" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    fi
    return 0
}

complete -F _lockctl_complete lockctl
