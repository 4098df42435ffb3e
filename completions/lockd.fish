# fish completion for lockd. Generated from lockd's command definitions: do not edit.
# Install: copy it to ~/.config/fish/completions/lockd.fish

function __lockd_node --description 'the lockd command being typed'
    set -l words (commandline -opc)
    set -l node lockd
    set -l skip 0
    for w in $words[2..-1]
        if test $skip = 1
            set skip 0
            continue
        end
        switch "$node $w"
            case 'lockd completion'
                set node lockd_completion
            case 'lockd --listen' 'lockd --peers' 'lockd --advertise' 'lockd --heartbeat' 'lockd --failure-timeout' 'lockd --max-keys' 'lockd --max-waiters' 'lockd --max-lease' 'lockd --max-wait' 'lockd --log-level' 'lockd --log-format'
                set skip 1
        end
    end
    echo $node
end

function __lockd_is --description 'is the lockd command being typed $argv[1]?'
    test (__lockd_node) = $argv[1]
end

complete -c lockd -f

complete -c lockd -n '__lockd_is lockd' -a completion -d 'print the shell completion script for bash, zsh or fish'
complete -c lockd -n '__lockd_is lockd' -l listen -x -d 'HOST:PORT to serve clients and peers on'
complete -c lockd -n '__lockd_is lockd' -l peers -x -d 'every node of the cluster as ADDR,ADDR,..'
complete -c lockd -n '__lockd_is lockd' -l advertise -x -d 'this node\'s ADDR as written in --peers, when it differs from --listen'
complete -c lockd -n '__lockd_is lockd' -l heartbeat -x -d 'interval between heartbeats to each peer'
complete -c lockd -n '__lockd_is lockd' -l failure-timeout -x -d 'a peer silent this long is considered down'
complete -c lockd -n '__lockd_is lockd' -l max-keys -x -d 'most keys held or waited on at once'
complete -c lockd -n '__lockd_is lockd' -l max-waiters -x -d 'most clients queued on one key'
complete -c lockd -n '__lockd_is lockd' -l max-lease -x -d 'longest lease a client may ask for'
complete -c lockd -n '__lockd_is lockd' -l max-wait -x -d 'longest finite wait a client may ask for'
complete -c lockd -n '__lockd_is lockd' -l log-level -x -a 'debug info warn error' -d 'LEVEL of logs on stderr: debug, info, warn, error'
complete -c lockd -n '__lockd_is lockd' -l log-format -x -a 'text json' -d 'FORMAT of logs: text or json'
complete -c lockd -n '__lockd_is lockd' -l help -s h -d 'show help'
complete -c lockd -n '__lockd_is lockd' -l version -s v -d 'print the version'

complete -c lockd -n '__lockd_is lockd_completion' -a 'bash zsh fish'
complete -c lockd -n '__lockd_is lockd_completion' -l help -s h -d 'show help'
