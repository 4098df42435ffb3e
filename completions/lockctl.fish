# fish completion for lockctl. Generated from lockctl's command definitions: do not edit.
# Install: copy it to ~/.config/fish/completions/lockctl.fish

function __lockctl_node --description 'the lockctl command being typed'
    set -l words (commandline -opc)
    set -l node lockctl
    set -l skip 0
    for w in $words[2..-1]
        if test $skip = 1
            set skip 0
            continue
        end
        switch "$node $w"
            case 'lockctl acquire'
                set node lockctl_acquire
            case 'lockctl release'
                set node lockctl_release
            case 'lockctl renew'
                set node lockctl_renew
            case 'lockctl hold'
                set node lockctl_hold
            case 'lockctl exec'
                set node lockctl_exec
            case 'lockctl bench'
                set node lockctl_bench
            case 'lockctl status'
                set node lockctl_status
            case 'lockctl queues'
                set node lockctl_queues
            case 'lockctl handoff'
                set node lockctl_handoff
            case 'lockctl drill'
                set node lockctl_drill
            case 'lockctl completion'
                set node lockctl_completion
            case 'lockctl help' 'lockctl h'
                set node lockctl_help
            case 'lockctl --addr' 'lockctl --color' 'lockctl --timeout' 'lockctl --failure-timeout' 'lockctl --tls-ca' 'lockctl --tls-cert' 'lockctl --tls-key' 'lockctl --tls-server-name' 'lockctl --secret-file'
                set skip 1
            case 'lockctl_acquire --key' 'lockctl_acquire --lease' 'lockctl_acquire --wait' 'lockctl_acquire -w' 'lockctl_acquire --addr' 'lockctl_acquire --color' 'lockctl_acquire --timeout' 'lockctl_acquire --failure-timeout' 'lockctl_acquire --tls-ca' 'lockctl_acquire --tls-cert' 'lockctl_acquire --tls-key' 'lockctl_acquire --tls-server-name' 'lockctl_acquire --secret-file'
                set skip 1
            case 'lockctl_release --key' 'lockctl_release --token' 'lockctl_release --addr' 'lockctl_release --color' 'lockctl_release --timeout' 'lockctl_release --failure-timeout' 'lockctl_release --tls-ca' 'lockctl_release --tls-cert' 'lockctl_release --tls-key' 'lockctl_release --tls-server-name' 'lockctl_release --secret-file'
                set skip 1
            case 'lockctl_renew --key' 'lockctl_renew --token' 'lockctl_renew --lease' 'lockctl_renew --addr' 'lockctl_renew --color' 'lockctl_renew --timeout' 'lockctl_renew --failure-timeout' 'lockctl_renew --tls-ca' 'lockctl_renew --tls-cert' 'lockctl_renew --tls-key' 'lockctl_renew --tls-server-name' 'lockctl_renew --secret-file'
                set skip 1
            case 'lockctl_hold --key' 'lockctl_hold --lease' 'lockctl_hold --wait' 'lockctl_hold -w' 'lockctl_hold --addr' 'lockctl_hold --color' 'lockctl_hold --timeout' 'lockctl_hold --failure-timeout' 'lockctl_hold --tls-ca' 'lockctl_hold --tls-cert' 'lockctl_hold --tls-key' 'lockctl_hold --tls-server-name' 'lockctl_hold --secret-file'
                set skip 1
            case 'lockctl_exec --key' 'lockctl_exec --lease' 'lockctl_exec --wait' 'lockctl_exec -w' 'lockctl_exec --grace' 'lockctl_exec --timeout-code' 'lockctl_exec -E' 'lockctl_exec --conflict-exit-code' 'lockctl_exec --addr' 'lockctl_exec --color' 'lockctl_exec --timeout' 'lockctl_exec --failure-timeout' 'lockctl_exec --tls-ca' 'lockctl_exec --tls-cert' 'lockctl_exec --tls-key' 'lockctl_exec --tls-server-name' 'lockctl_exec --secret-file'
                set skip 1
            case 'lockctl_exec --'
                echo lockctl_exec--
                return
            case 'lockctl_bench --workers' 'lockctl_bench --conns' 'lockctl_bench --duration' 'lockctl_bench --keys' 'lockctl_bench --lease' 'lockctl_bench --wait' 'lockctl_bench -w' 'lockctl_bench --mode' 'lockctl_bench --addr' 'lockctl_bench --color' 'lockctl_bench --timeout' 'lockctl_bench --failure-timeout' 'lockctl_bench --tls-ca' 'lockctl_bench --tls-cert' 'lockctl_bench --tls-key' 'lockctl_bench --tls-server-name' 'lockctl_bench --secret-file'
                set skip 1
            case 'lockctl_status --interval' 'lockctl_status --wait-active' 'lockctl_status --addr' 'lockctl_status --color' 'lockctl_status --timeout' 'lockctl_status --failure-timeout' 'lockctl_status --tls-ca' 'lockctl_status --tls-cert' 'lockctl_status --tls-key' 'lockctl_status --tls-server-name' 'lockctl_status --secret-file'
                set skip 1
            case 'lockctl_queues --key' 'lockctl_queues --prefix' 'lockctl_queues --addr' 'lockctl_queues --color' 'lockctl_queues --timeout' 'lockctl_queues --failure-timeout' 'lockctl_queues --tls-ca' 'lockctl_queues --tls-cert' 'lockctl_queues --tls-key' 'lockctl_queues --tls-server-name' 'lockctl_queues --secret-file'
                set skip 1
            case 'lockctl_handoff --to' 'lockctl_handoff --addr' 'lockctl_handoff --color' 'lockctl_handoff --timeout' 'lockctl_handoff --failure-timeout' 'lockctl_handoff --tls-ca' 'lockctl_handoff --tls-cert' 'lockctl_handoff --tls-key' 'lockctl_handoff --tls-server-name' 'lockctl_handoff --secret-file'
                set skip 1
            case 'lockctl_drill --workers' 'lockctl_drill --keys' 'lockctl_drill --lease' 'lockctl_drill --duration' 'lockctl_drill --action' 'lockctl_drill --run' 'lockctl_drill --at' 'lockctl_drill --max-gap' 'lockctl_drill --max-errors' 'lockctl_drill --max-lost' 'lockctl_drill --addr' 'lockctl_drill --color' 'lockctl_drill --timeout' 'lockctl_drill --failure-timeout' 'lockctl_drill --tls-ca' 'lockctl_drill --tls-cert' 'lockctl_drill --tls-key' 'lockctl_drill --tls-server-name' 'lockctl_drill --secret-file'
                set skip 1
            case 'lockctl_completion --addr' 'lockctl_completion --color' 'lockctl_completion --timeout' 'lockctl_completion --failure-timeout' 'lockctl_completion --tls-ca' 'lockctl_completion --tls-cert' 'lockctl_completion --tls-key' 'lockctl_completion --tls-server-name' 'lockctl_completion --secret-file'
                set skip 1
        end
    end
    echo $node
end

function __lockctl_is --description 'is the lockctl command being typed $argv[1]?'
    test (__lockctl_node) = $argv[1]
end

complete -c lockctl -f

complete -c lockctl -n '__lockctl_is lockctl' -a acquire -d 'take a lock and print its fencing token'
complete -c lockctl -n '__lockctl_is lockctl' -a release -d 'free a lock, given the token acquire printed'
complete -c lockctl -n '__lockctl_is lockctl' -a renew -d 'restart a held lock\'s lease from now'
complete -c lockctl -n '__lockctl_is lockctl' -a hold -d 'take a lock and keep it until Ctrl-C or SIGTERM'
complete -c lockctl -n '__lockctl_is lockctl' -a exec -d 'run a command while holding a lock'
complete -c lockctl -n '__lockctl_is lockctl' -a bench -d 'measure acquire+release cycles per second and their latency'
complete -c lockctl -n '__lockctl_is lockctl' -a status -d 'show every node of the cluster, its role and whether it is caught up'
complete -c lockctl -n '__lockctl_is lockctl' -a queues -d 'show every held key with its holder and its waiters in queue order'
complete -c lockctl -n '__lockctl_is lockctl' -a handoff -d 'hand the active role to the next node (or to --to) and wait until it serves'
complete -c lockctl -n '__lockctl_is lockctl' -a drill -d 'run a failover drill: lock traffic, a handoff or your command, and a verdict'
complete -c lockctl -n '__lockctl_is lockctl' -a completion -d 'print the shell completion script for bash, zsh or fish'
complete -c lockctl -n '__lockctl_is lockctl' -a help -d 'show a list of commands or help for one command'
complete -c lockctl -n '__lockctl_is lockctl' -l addr -x -d 'lockd NODES to talk to: HOST:PORT, or several separated by commas'
complete -c lockctl -n '__lockctl_is lockctl' -l json -d 'print machine-readable JSON, one object per line'
complete -c lockctl -n '__lockctl_is lockctl' -l color -x -a 'auto always never' -d 'WHEN to colour output: auto, always or never'
complete -c lockctl -n '__lockctl_is lockctl' -l timeout -x -d 'longest to wait for lockd\'s answer to a request, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl' -l failure-timeout -x -d 'a node silent this long is treated as down and requests move on, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl' -l tls -d 'speak TLS, verifying lockd\'s certificate with the system\'s CAs'
complete -c lockctl -n '__lockctl_is lockctl' -l tls-ca -x -d 'speak TLS, verifying lockd\'s certificate with the CA in FILE'
complete -c lockctl -n '__lockctl_is lockctl' -l tls-cert -x -d 'client certificate FILE to present, for nodes started with --tls-client-auth'
complete -c lockctl -n '__lockctl_is lockctl' -l tls-key -x -d 'private key FILE of --tls-cert'
complete -c lockctl -n '__lockctl_is lockctl' -l tls-server-name -x -d 'NAME to verify in lockd\'s certificate, when it differs from the host in --addr'
complete -c lockctl -n '__lockctl_is lockctl' -l secret-file -x -d 'prove the secret in FILE to lockd'
complete -c lockctl -n '__lockctl_is lockctl' -l help -s h -d 'show help'

complete -c lockctl -n '__lockctl_is lockctl_acquire' -l key -x -d 'the lock\'s name, any KEY of 1 to 255 bytes without spaces or control characters'
complete -c lockctl -n '__lockctl_is lockctl_acquire' -l lease -x -d 'how long lockd keeps the lock unless it is renewed, a DURATION like 30s or 2m'
complete -c lockctl -n '__lockctl_is lockctl_acquire' -l wait -s w -x -d 'longest to wait in the key\'s queue for the lock, a DURATION or seconds, as...'
complete -c lockctl -n '__lockctl_is lockctl_acquire' -l nonblock -s n -d 'fail at once if the lock is held, as flock -n'
complete -c lockctl -n '__lockctl_is lockctl_acquire' -l addr -x -d 'lockd NODES to talk to: HOST:PORT, or several separated by commas'
complete -c lockctl -n '__lockctl_is lockctl_acquire' -l json -d 'print machine-readable JSON, one object per line'
complete -c lockctl -n '__lockctl_is lockctl_acquire' -l color -x -a 'auto always never' -d 'WHEN to colour output: auto, always or never'
complete -c lockctl -n '__lockctl_is lockctl_acquire' -l timeout -x -d 'longest to wait for lockd\'s answer to a request, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_acquire' -l failure-timeout -x -d 'a node silent this long is treated as down and requests move on, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_acquire' -l tls -d 'speak TLS, verifying lockd\'s certificate with the system\'s CAs'
complete -c lockctl -n '__lockctl_is lockctl_acquire' -l tls-ca -x -d 'speak TLS, verifying lockd\'s certificate with the CA in FILE'
complete -c lockctl -n '__lockctl_is lockctl_acquire' -l tls-cert -x -d 'client certificate FILE to present, for nodes started with --tls-client-auth'
complete -c lockctl -n '__lockctl_is lockctl_acquire' -l tls-key -x -d 'private key FILE of --tls-cert'
complete -c lockctl -n '__lockctl_is lockctl_acquire' -l tls-server-name -x -d 'NAME to verify in lockd\'s certificate, when it differs from the host in --addr'
complete -c lockctl -n '__lockctl_is lockctl_acquire' -l secret-file -x -d 'prove the secret in FILE to lockd'
complete -c lockctl -n '__lockctl_is lockctl_acquire' -l help -s h -d 'show help'

complete -c lockctl -n '__lockctl_is lockctl_release' -l key -x -d 'the lock\'s name, any KEY of 1 to 255 bytes without spaces or control characters'
complete -c lockctl -n '__lockctl_is lockctl_release' -l token -x -d 'the fencing TOKEN that acquire printed'
complete -c lockctl -n '__lockctl_is lockctl_release' -l addr -x -d 'lockd NODES to talk to: HOST:PORT, or several separated by commas'
complete -c lockctl -n '__lockctl_is lockctl_release' -l json -d 'print machine-readable JSON, one object per line'
complete -c lockctl -n '__lockctl_is lockctl_release' -l color -x -a 'auto always never' -d 'WHEN to colour output: auto, always or never'
complete -c lockctl -n '__lockctl_is lockctl_release' -l timeout -x -d 'longest to wait for lockd\'s answer to a request, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_release' -l failure-timeout -x -d 'a node silent this long is treated as down and requests move on, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_release' -l tls -d 'speak TLS, verifying lockd\'s certificate with the system\'s CAs'
complete -c lockctl -n '__lockctl_is lockctl_release' -l tls-ca -x -d 'speak TLS, verifying lockd\'s certificate with the CA in FILE'
complete -c lockctl -n '__lockctl_is lockctl_release' -l tls-cert -x -d 'client certificate FILE to present, for nodes started with --tls-client-auth'
complete -c lockctl -n '__lockctl_is lockctl_release' -l tls-key -x -d 'private key FILE of --tls-cert'
complete -c lockctl -n '__lockctl_is lockctl_release' -l tls-server-name -x -d 'NAME to verify in lockd\'s certificate, when it differs from the host in --addr'
complete -c lockctl -n '__lockctl_is lockctl_release' -l secret-file -x -d 'prove the secret in FILE to lockd'
complete -c lockctl -n '__lockctl_is lockctl_release' -l help -s h -d 'show help'

complete -c lockctl -n '__lockctl_is lockctl_renew' -l key -x -d 'the lock\'s name, any KEY of 1 to 255 bytes without spaces or control characters'
complete -c lockctl -n '__lockctl_is lockctl_renew' -l token -x -d 'the fencing TOKEN that acquire printed'
complete -c lockctl -n '__lockctl_is lockctl_renew' -l lease -x -d 'how long lockd keeps the lock unless it is renewed, a DURATION like 30s or 2m'
complete -c lockctl -n '__lockctl_is lockctl_renew' -l addr -x -d 'lockd NODES to talk to: HOST:PORT, or several separated by commas'
complete -c lockctl -n '__lockctl_is lockctl_renew' -l json -d 'print machine-readable JSON, one object per line'
complete -c lockctl -n '__lockctl_is lockctl_renew' -l color -x -a 'auto always never' -d 'WHEN to colour output: auto, always or never'
complete -c lockctl -n '__lockctl_is lockctl_renew' -l timeout -x -d 'longest to wait for lockd\'s answer to a request, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_renew' -l failure-timeout -x -d 'a node silent this long is treated as down and requests move on, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_renew' -l tls -d 'speak TLS, verifying lockd\'s certificate with the system\'s CAs'
complete -c lockctl -n '__lockctl_is lockctl_renew' -l tls-ca -x -d 'speak TLS, verifying lockd\'s certificate with the CA in FILE'
complete -c lockctl -n '__lockctl_is lockctl_renew' -l tls-cert -x -d 'client certificate FILE to present, for nodes started with --tls-client-auth'
complete -c lockctl -n '__lockctl_is lockctl_renew' -l tls-key -x -d 'private key FILE of --tls-cert'
complete -c lockctl -n '__lockctl_is lockctl_renew' -l tls-server-name -x -d 'NAME to verify in lockd\'s certificate, when it differs from the host in --addr'
complete -c lockctl -n '__lockctl_is lockctl_renew' -l secret-file -x -d 'prove the secret in FILE to lockd'
complete -c lockctl -n '__lockctl_is lockctl_renew' -l help -s h -d 'show help'

complete -c lockctl -n '__lockctl_is lockctl_hold' -l key -x -d 'the lock\'s name, any KEY of 1 to 255 bytes without spaces or control characters'
complete -c lockctl -n '__lockctl_is lockctl_hold' -l lease -x -d 'how long lockd keeps the lock unless it is renewed, a DURATION like 30s or 2m'
complete -c lockctl -n '__lockctl_is lockctl_hold' -l wait -s w -x -d 'longest to wait in the key\'s queue for the lock, a DURATION or seconds, as...'
complete -c lockctl -n '__lockctl_is lockctl_hold' -l nonblock -s n -d 'fail at once if the lock is held, as flock -n'
complete -c lockctl -n '__lockctl_is lockctl_hold' -l addr -x -d 'lockd NODES to talk to: HOST:PORT, or several separated by commas'
complete -c lockctl -n '__lockctl_is lockctl_hold' -l json -d 'print machine-readable JSON, one object per line'
complete -c lockctl -n '__lockctl_is lockctl_hold' -l color -x -a 'auto always never' -d 'WHEN to colour output: auto, always or never'
complete -c lockctl -n '__lockctl_is lockctl_hold' -l timeout -x -d 'longest to wait for lockd\'s answer to a request, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_hold' -l failure-timeout -x -d 'a node silent this long is treated as down and requests move on, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_hold' -l tls -d 'speak TLS, verifying lockd\'s certificate with the system\'s CAs'
complete -c lockctl -n '__lockctl_is lockctl_hold' -l tls-ca -x -d 'speak TLS, verifying lockd\'s certificate with the CA in FILE'
complete -c lockctl -n '__lockctl_is lockctl_hold' -l tls-cert -x -d 'client certificate FILE to present, for nodes started with --tls-client-auth'
complete -c lockctl -n '__lockctl_is lockctl_hold' -l tls-key -x -d 'private key FILE of --tls-cert'
complete -c lockctl -n '__lockctl_is lockctl_hold' -l tls-server-name -x -d 'NAME to verify in lockd\'s certificate, when it differs from the host in --addr'
complete -c lockctl -n '__lockctl_is lockctl_hold' -l secret-file -x -d 'prove the secret in FILE to lockd'
complete -c lockctl -n '__lockctl_is lockctl_hold' -l help -s h -d 'show help'

complete -c lockctl -n '__lockctl_is lockctl_exec' -l key -x -d 'the lock\'s name, any KEY of 1 to 255 bytes without spaces or control characters'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l lease -x -d 'how long lockd keeps the lock unless it is renewed, a DURATION like 30s or 2m'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l wait -s w -x -d 'longest to wait in the key\'s queue for the lock, a DURATION or seconds, as...'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l nonblock -s n -d 'fail at once if the lock is held, as flock -n'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l grace -x -d 'after the lock is lost, the DURATION COMMAND has to exit on SIGTERM before...'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l timeout-code -s E -l conflict-exit-code -x -d 'exit CODE when the lock is held or --wait elapses, as flock -E'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l addr -x -d 'lockd NODES to talk to: HOST:PORT, or several separated by commas'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l json -d 'print machine-readable JSON, one object per line'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l color -x -a 'auto always never' -d 'WHEN to colour output: auto, always or never'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l timeout -x -d 'longest to wait for lockd\'s answer to a request, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l failure-timeout -x -d 'a node silent this long is treated as down and requests move on, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l tls -d 'speak TLS, verifying lockd\'s certificate with the system\'s CAs'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l tls-ca -x -d 'speak TLS, verifying lockd\'s certificate with the CA in FILE'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l tls-cert -x -d 'client certificate FILE to present, for nodes started with --tls-client-auth'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l tls-key -x -d 'private key FILE of --tls-cert'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l tls-server-name -x -d 'NAME to verify in lockd\'s certificate, when it differs from the host in --addr'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l secret-file -x -d 'prove the secret in FILE to lockd'
complete -c lockctl -n '__lockctl_is lockctl_exec' -l help -s h -d 'show help'
complete -c lockctl -n '__lockctl_is lockctl_exec--' -F -a '(__fish_complete_command)'

complete -c lockctl -n '__lockctl_is lockctl_bench' -l workers -x -d 'N concurrent workers, each running one cycle at a time'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l conns -x -d 'N connections per node for --mode pipelined'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l duration -x -d 'how long to run, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l keys -x -d 'which KEYS the workers lock: unique, hot, or a number of shared keys'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l lease -x -d 'how long lockd keeps the lock unless it is renewed, a DURATION like 30s or 2m'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l wait -s w -x -d 'longest one acquire waits before it counts as a timeout, a DURATION or seconds'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l mode -x -a 'pipelined per-worker' -d 'MODE: pipelined or per-worker'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l addr -x -d 'lockd NODES to talk to: HOST:PORT, or several separated by commas'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l json -d 'print machine-readable JSON, one object per line'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l color -x -a 'auto always never' -d 'WHEN to colour output: auto, always or never'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l timeout -x -d 'longest to wait for lockd\'s answer to a request, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l failure-timeout -x -d 'a node silent this long is treated as down and requests move on, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l tls -d 'speak TLS, verifying lockd\'s certificate with the system\'s CAs'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l tls-ca -x -d 'speak TLS, verifying lockd\'s certificate with the CA in FILE'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l tls-cert -x -d 'client certificate FILE to present, for nodes started with --tls-client-auth'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l tls-key -x -d 'private key FILE of --tls-cert'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l tls-server-name -x -d 'NAME to verify in lockd\'s certificate, when it differs from the host in --addr'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l secret-file -x -d 'prove the secret in FILE to lockd'
complete -c lockctl -n '__lockctl_is lockctl_bench' -l help -s h -d 'show help'

complete -c lockctl -n '__lockctl_is lockctl_status' -l watch -s w -d 'redraw the view every --interval until Ctrl-C'
complete -c lockctl -n '__lockctl_is lockctl_status' -l interval -x -d 'with --watch: redraw every DURATION'
complete -c lockctl -n '__lockctl_is lockctl_status' -l wait-active -x -d 'wait until the node at ADDR reports itself active, then exit 0'
complete -c lockctl -n '__lockctl_is lockctl_status' -l addr -x -d 'lockd NODES to talk to: HOST:PORT, or several separated by commas'
complete -c lockctl -n '__lockctl_is lockctl_status' -l json -d 'print machine-readable JSON, one object per line'
complete -c lockctl -n '__lockctl_is lockctl_status' -l color -x -a 'auto always never' -d 'WHEN to colour output: auto, always or never'
complete -c lockctl -n '__lockctl_is lockctl_status' -l timeout -x -d 'longest to wait for lockd\'s answer to a request, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_status' -l failure-timeout -x -d 'a node silent this long is treated as down and requests move on, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_status' -l tls -d 'speak TLS, verifying lockd\'s certificate with the system\'s CAs'
complete -c lockctl -n '__lockctl_is lockctl_status' -l tls-ca -x -d 'speak TLS, verifying lockd\'s certificate with the CA in FILE'
complete -c lockctl -n '__lockctl_is lockctl_status' -l tls-cert -x -d 'client certificate FILE to present, for nodes started with --tls-client-auth'
complete -c lockctl -n '__lockctl_is lockctl_status' -l tls-key -x -d 'private key FILE of --tls-cert'
complete -c lockctl -n '__lockctl_is lockctl_status' -l tls-server-name -x -d 'NAME to verify in lockd\'s certificate, when it differs from the host in --addr'
complete -c lockctl -n '__lockctl_is lockctl_status' -l secret-file -x -d 'prove the secret in FILE to lockd'
complete -c lockctl -n '__lockctl_is lockctl_status' -l help -s h -d 'show help'

complete -c lockctl -n '__lockctl_is lockctl_queues' -l key -x -d 'show this KEY only'
complete -c lockctl -n '__lockctl_is lockctl_queues' -l prefix -x -d 'show the keys starting with PREFIX only'
complete -c lockctl -n '__lockctl_is lockctl_queues' -l addr -x -d 'lockd NODES to talk to: HOST:PORT, or several separated by commas'
complete -c lockctl -n '__lockctl_is lockctl_queues' -l json -d 'print machine-readable JSON, one object per line'
complete -c lockctl -n '__lockctl_is lockctl_queues' -l color -x -a 'auto always never' -d 'WHEN to colour output: auto, always or never'
complete -c lockctl -n '__lockctl_is lockctl_queues' -l timeout -x -d 'longest to wait for lockd\'s answer to a request, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_queues' -l failure-timeout -x -d 'a node silent this long is treated as down and requests move on, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_queues' -l tls -d 'speak TLS, verifying lockd\'s certificate with the system\'s CAs'
complete -c lockctl -n '__lockctl_is lockctl_queues' -l tls-ca -x -d 'speak TLS, verifying lockd\'s certificate with the CA in FILE'
complete -c lockctl -n '__lockctl_is lockctl_queues' -l tls-cert -x -d 'client certificate FILE to present, for nodes started with --tls-client-auth'
complete -c lockctl -n '__lockctl_is lockctl_queues' -l tls-key -x -d 'private key FILE of --tls-cert'
complete -c lockctl -n '__lockctl_is lockctl_queues' -l tls-server-name -x -d 'NAME to verify in lockd\'s certificate, when it differs from the host in --addr'
complete -c lockctl -n '__lockctl_is lockctl_queues' -l secret-file -x -d 'prove the secret in FILE to lockd'
complete -c lockctl -n '__lockctl_is lockctl_queues' -l help -s h -d 'show help'

complete -c lockctl -n '__lockctl_is lockctl_handoff' -l to -x -d 'hand the role to the node at ADDR instead of the successor'
complete -c lockctl -n '__lockctl_is lockctl_handoff' -l addr -x -d 'lockd NODES to talk to: HOST:PORT, or several separated by commas'
complete -c lockctl -n '__lockctl_is lockctl_handoff' -l json -d 'print machine-readable JSON, one object per line'
complete -c lockctl -n '__lockctl_is lockctl_handoff' -l color -x -a 'auto always never' -d 'WHEN to colour output: auto, always or never'
complete -c lockctl -n '__lockctl_is lockctl_handoff' -l timeout -x -d 'longest to wait for lockd\'s answer to a request, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_handoff' -l failure-timeout -x -d 'a node silent this long is treated as down and requests move on, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_handoff' -l tls -d 'speak TLS, verifying lockd\'s certificate with the system\'s CAs'
complete -c lockctl -n '__lockctl_is lockctl_handoff' -l tls-ca -x -d 'speak TLS, verifying lockd\'s certificate with the CA in FILE'
complete -c lockctl -n '__lockctl_is lockctl_handoff' -l tls-cert -x -d 'client certificate FILE to present, for nodes started with --tls-client-auth'
complete -c lockctl -n '__lockctl_is lockctl_handoff' -l tls-key -x -d 'private key FILE of --tls-cert'
complete -c lockctl -n '__lockctl_is lockctl_handoff' -l tls-server-name -x -d 'NAME to verify in lockd\'s certificate, when it differs from the host in --addr'
complete -c lockctl -n '__lockctl_is lockctl_handoff' -l secret-file -x -d 'prove the secret in FILE to lockd'
complete -c lockctl -n '__lockctl_is lockctl_handoff' -l help -s h -d 'show help'

complete -c lockctl -n '__lockctl_is lockctl_drill' -l workers -x -d 'run N acquire/release loops at once'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l keys -x -d 'pick keys at random among N distinct ones'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l lease -x -d 'how long lockd keeps the lock unless it is renewed, a DURATION like 30s or 2m'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l duration -x -d 'run the workload for DURATION'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l action -x -a 'handoff none' -d 'ACTION to take at --at: handoff or none'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l run -x -d 'run CMD with sh -c at --at instead of a handoff, e.g'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l at -x -d 'start the action DURATION after the workload starts'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l max-gap -x -d 'fail when the longest time without a grant exceeds DURATION'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l max-errors -x -d 'fail when the client saw more than N errors'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l max-lost -x -d 'fail when more than N grants were lost in the failover'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l addr -x -d 'lockd NODES to talk to: HOST:PORT, or several separated by commas'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l json -d 'print machine-readable JSON, one object per line'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l color -x -a 'auto always never' -d 'WHEN to colour output: auto, always or never'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l timeout -x -d 'longest to wait for lockd\'s answer to a request, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l failure-timeout -x -d 'a node silent this long is treated as down and requests move on, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l tls -d 'speak TLS, verifying lockd\'s certificate with the system\'s CAs'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l tls-ca -x -d 'speak TLS, verifying lockd\'s certificate with the CA in FILE'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l tls-cert -x -d 'client certificate FILE to present, for nodes started with --tls-client-auth'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l tls-key -x -d 'private key FILE of --tls-cert'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l tls-server-name -x -d 'NAME to verify in lockd\'s certificate, when it differs from the host in --addr'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l secret-file -x -d 'prove the secret in FILE to lockd'
complete -c lockctl -n '__lockctl_is lockctl_drill' -l help -s h -d 'show help'

complete -c lockctl -n '__lockctl_is lockctl_completion' -a 'bash zsh fish'
complete -c lockctl -n '__lockctl_is lockctl_completion' -l addr -x -d 'lockd NODES to talk to: HOST:PORT, or several separated by commas'
complete -c lockctl -n '__lockctl_is lockctl_completion' -l json -d 'print machine-readable JSON, one object per line'
complete -c lockctl -n '__lockctl_is lockctl_completion' -l color -x -a 'auto always never' -d 'WHEN to colour output: auto, always or never'
complete -c lockctl -n '__lockctl_is lockctl_completion' -l timeout -x -d 'longest to wait for lockd\'s answer to a request, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_completion' -l failure-timeout -x -d 'a node silent this long is treated as down and requests move on, a DURATION'
complete -c lockctl -n '__lockctl_is lockctl_completion' -l tls -d 'speak TLS, verifying lockd\'s certificate with the system\'s CAs'
complete -c lockctl -n '__lockctl_is lockctl_completion' -l tls-ca -x -d 'speak TLS, verifying lockd\'s certificate with the CA in FILE'
complete -c lockctl -n '__lockctl_is lockctl_completion' -l tls-cert -x -d 'client certificate FILE to present, for nodes started with --tls-client-auth'
complete -c lockctl -n '__lockctl_is lockctl_completion' -l tls-key -x -d 'private key FILE of --tls-cert'
complete -c lockctl -n '__lockctl_is lockctl_completion' -l tls-server-name -x -d 'NAME to verify in lockd\'s certificate, when it differs from the host in --addr'
complete -c lockctl -n '__lockctl_is lockctl_completion' -l secret-file -x -d 'prove the secret in FILE to lockd'
complete -c lockctl -n '__lockctl_is lockctl_completion' -l help -s h -d 'show help'

complete -c lockctl -n '__lockctl_is lockctl_help' -a 'acquire release renew hold exec bench status queues handoff drill completion'
