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
            case 'lockd tls'
                set node lockd_tls
            case 'lockd completion'
                set node lockd_completion
            case 'lockd version'
                set node lockd_version
            case 'lockd --listen' 'lockd --peers' 'lockd --advertise' 'lockd --heartbeat' 'lockd --failure-timeout' 'lockd --data-dir' 'lockd --fsync' 'lockd --replication' 'lockd --sync-timeout' 'lockd --max-keys' 'lockd --max-waiters' 'lockd --max-lease' 'lockd --max-wait' 'lockd --max-total-waiters' 'lockd --max-watches' 'lockd --max-total-watches' 'lockd --max-clock-skew' 'lockd --tls-cert' 'lockd --tls-key' 'lockd --tls-ca' 'lockd --secret-file' 'lockd --admin-secret-file' 'lockd --peer-secret-file' 'lockd --advertise-client' 'lockd --max-conns' 'lockd --max-conns-per-ip' 'lockd --auth-timeout' 'lockd --line-timeout' 'lockd --max-conn-output' 'lockd --max-output' 'lockd --log-level' 'lockd --log-format' 'lockd --metrics-listen'
                set skip 1
            case 'lockd_tls ca'
                set node lockd_tls_ca
            case 'lockd_tls cert'
                set node lockd_tls_cert
            case 'lockd_tls_ca --dir' 'lockd_tls_ca --name' 'lockd_tls_ca --days'
                set skip 1
            case 'lockd_tls_cert --host' 'lockd_tls_cert --role' 'lockd_tls_cert --name' 'lockd_tls_cert --dir' 'lockd_tls_cert --ca' 'lockd_tls_cert --ca-key' 'lockd_tls_cert --days'
                set skip 1
        end
    end
    echo $node
end

function __lockd_is --description 'is the lockd command being typed $argv[1]?'
    test (__lockd_node) = $argv[1]
end

complete -c lockd -f

complete -c lockd -n '__lockd_is lockd' -a tls -d 'create a CA and certificates for TLS between lockd nodes and clients (no openssl needed)'
complete -c lockd -n '__lockd_is lockd' -a completion -d 'print the shell completion script for bash, zsh or fish'
complete -c lockd -n '__lockd_is lockd' -a version -d 'print lockd\'s version (also: lockd --version)'
complete -c lockd -n '__lockd_is lockd' -l listen -x -d 'HOST:PORT to serve clients and peers on'
complete -c lockd -n '__lockd_is lockd' -l peers -x -d 'every node of the cluster as ADDR,ADDR,..'
complete -c lockd -n '__lockd_is lockd' -l advertise -x -d 'this node\'s ADDR as written in --peers, when it differs from --listen'
complete -c lockd -n '__lockd_is lockd' -l heartbeat -x -d 'DURATION between heartbeats to each peer'
complete -c lockd -n '__lockd_is lockd' -l failure-timeout -x -d 'a peer silent this DURATION is considered down'
complete -c lockd -n '__lockd_is lockd' -l data-dir -x -d 'keep the lock state across restarts in a write-ahead log in DIR'
complete -c lockd -n '__lockd_is lockd' -l drop-after-corruption -d 'with --data-dir: where the log holds a damaged record that valid records...'
complete -c lockd -n '__lockd_is lockd' -l fsync -x -d 'MODE with --data-dir: batch, always, never'
complete -c lockd -n '__lockd_is lockd' -l replication -x -d 'MODE sync: the active answers a grant, release or renewal once the standbys...'
complete -c lockd -n '__lockd_is lockd' -l sync-timeout -x -d 'in sync mode, a standby that has not acknowledged an answer within this...'
complete -c lockd -n '__lockd_is lockd' -l max-keys -x -d 'most keys held or waited on at once, a number N'
complete -c lockd -n '__lockd_is lockd' -l max-waiters -x -d 'most clients queued on one key, a number N'
complete -c lockd -n '__lockd_is lockd' -l max-lease -x -d 'longest lease a client may ask for, a DURATION'
complete -c lockd -n '__lockd_is lockd' -l max-wait -x -d 'longest finite wait a client may ask for, a DURATION'
complete -c lockd -n '__lockd_is lockd' -l max-total-waiters -x -d 'most clients queued over all keys together, a number N'
complete -c lockd -n '__lockd_is lockd' -l max-watches -x -d 'most keys one connection may watch, a number N'
complete -c lockd -n '__lockd_is lockd' -l max-total-watches -x -d 'most watches over all connections together, a number N'
complete -c lockd -n '__lockd_is lockd' -l max-clock-skew -x -d 'largest clock difference between the cluster\'s machines, a DURATION'
complete -c lockd -n '__lockd_is lockd' -l tls-cert -x -d 'serve TLS with this node\'s certificate FILE'
complete -c lockd -n '__lockd_is lockd' -l tls-key -x -d 'private key FILE of --tls-cert'
complete -c lockd -n '__lockd_is lockd' -l tls-ca -x -d 'CA FILE that signs the peers\' certificates'
complete -c lockd -n '__lockd_is lockd' -l tls-client-auth -d 'require every client to present a certificate signed by --tls-ca'
complete -c lockd -n '__lockd_is lockd' -l secret-file -x -d 'clients must prove the secret in FILE before any request'
complete -c lockd -n '__lockd_is lockd' -l admin-secret-file -x -d 'only the secret in FILE may move the active role'
complete -c lockd -n '__lockd_is lockd' -l peer-secret-file -x -d 'nodes prove to each other the secret in FILE, unless their TLS certificates do'
complete -c lockd -n '__lockd_is lockd' -l advertise-client -x -d 'other ADDR,ADDR,..'
complete -c lockd -n '__lockd_is lockd' -l insecure -d 'serve clients without authentication on an address other than loopback'
complete -c lockd -n '__lockd_is lockd' -l max-conns -x -d 'most connections open at once, a number N'
complete -c lockd -n '__lockd_is lockd' -l max-conns-per-ip -x -d 'most connections from one IP address, a number N'
complete -c lockd -n '__lockd_is lockd' -l auth-timeout -x -d 'a connection that has not authenticated within this DURATION is closed'
complete -c lockd -n '__lockd_is lockd' -l line-timeout -x -d 'a request line that has begun must end within this DURATION, or the...'
complete -c lockd -n '__lockd_is lockd' -l max-conn-output -x -d 'SIZE of answers one client may leave unread before it is disconnected'
complete -c lockd -n '__lockd_is lockd' -l max-output -x -d 'SIZE of unread answers of all clients together'
complete -c lockd -n '__lockd_is lockd' -l log-level -x -a 'debug info warn error' -d 'LEVEL of logs on stderr: debug, info, warn, error'
complete -c lockd -n '__lockd_is lockd' -l log-format -x -a 'text json' -d 'FORMAT of logs: text or json'
complete -c lockd -n '__lockd_is lockd' -l metrics-listen -x -d 'serve /metrics, /healthz and /readyz over plain HTTP on HOST:PORT'
complete -c lockd -n '__lockd_is lockd' -l help -s h -d 'show help'
complete -c lockd -n '__lockd_is lockd' -l version -s v -d 'print the version'

complete -c lockd -n '__lockd_is lockd_tls' -a ca -d 'create the CA that signs every node and client certificate'
complete -c lockd -n '__lockd_is lockd_tls' -a cert -d 'create a node, admin or client certificate signed by the CA'
complete -c lockd -n '__lockd_is lockd_tls' -l help -s h -d 'show help'

complete -c lockd -n '__lockd_is lockd_tls_ca' -l dir -x -d 'DIR to write the files in'
complete -c lockd -n '__lockd_is lockd_tls_ca' -l name -x -d 'common NAME of the CA, shown by tools that inspect certificates'
complete -c lockd -n '__lockd_is lockd_tls_ca' -l days -x -d 'N days the certificate is valid'
complete -c lockd -n '__lockd_is lockd_tls_ca' -l force -d 'overwrite files that exist already'
complete -c lockd -n '__lockd_is lockd_tls_ca' -l help -s h -d 'show help'

complete -c lockd -n '__lockd_is lockd_tls_cert' -l host -x -d 'HOST the node is reached at'
complete -c lockd -n '__lockd_is lockd_tls_cert' -l role -x -a 'node admin client' -d 'ROLE the certificate grants: node, admin or client'
complete -c lockd -n '__lockd_is lockd_tls_cert' -l name -x -d 'NAME in the certificate and its file names'
complete -c lockd -n '__lockd_is lockd_tls_cert' -l dir -x -d 'DIR to write the files in'
complete -c lockd -n '__lockd_is lockd_tls_cert' -l ca -x -d 'CA certificate FILE'
complete -c lockd -n '__lockd_is lockd_tls_cert' -l ca-key -x -d 'CA key FILE'
complete -c lockd -n '__lockd_is lockd_tls_cert' -l days -x -d 'N days the certificate is valid'
complete -c lockd -n '__lockd_is lockd_tls_cert' -l force -d 'overwrite files that exist already'
complete -c lockd -n '__lockd_is lockd_tls_cert' -l help -s h -d 'show help'

complete -c lockd -n '__lockd_is lockd_completion' -a 'bash zsh fish'
complete -c lockd -n '__lockd_is lockd_completion' -l help -s h -d 'show help'

complete -c lockd -n '__lockd_is lockd_version' -l help -s h -d 'show help'
