#!/usr/bin/env python3
# walk.py LOCKD_BINARY [-v]: the path of one "A key lease wait" through an
# active lockd with a synchronous standby, from the read of the request to
# the write of its answer, as the functions entered (uprobes on every
# function of cluster/, proto/ and engine/; needs root and tracefs at
# /sys/kernel/tracing): how many files it crosses, how many moves from one
# file to another, and how many of those go back to a file already left.
import os, sys, subprocess, socket, time, re, random
T='/sys/kernel/tracing'
binary=os.path.abspath(sys.argv[1])
nm=subprocess.run(['go','tool','nm','-n',binary],capture_output=True,text=True).stdout.splitlines()
funcs=[]
for l in nm:
    p=l.split()
    if len(p)>=3 and p[1]=='T' and re.match(r'github\.com/lockd-io/lockd/(cluster|proto|engine)',p[2]):
        funcs.append((int(p[0],16),p[2]))
a2l=subprocess.run(['go','tool','addr2line',binary],input='\n'.join(hex(a) for a,_ in funcs)+'\n',capture_output=True,text=True).stdout.splitlines()
files={}
for i,(a,name) in enumerate(funcs):
    files[i]=(name,a2l[2*i+1].rsplit(':',1)[0].split('/lockd/',1)[-1] if 2*i+1<len(a2l) else '?')
def w(path,s,mode='w'):
    with open(os.path.join(T,path),mode) as f: f.write(s)
w('events/enable','0')
try: w('uprobe_events','')
except OSError: pass
fd=os.open(os.path.join(T,'uprobe_events'),os.O_WRONLY|os.O_APPEND)
bad=0
for i,(a,name) in enumerate(funcs):
    try: os.write(fd,f'p:lw/f{i} {binary}:{hex(a-0x400000)}\n'.encode())
    except OSError: bad+=1
os.close(fd)
print('probes',len(funcs),'refused',bad)
port=random.randint(20000,40000); A=f'127.0.0.1:{port}'; B=f'127.0.0.1:{port+1}'
procs=[subprocess.Popen([binary,'--listen',x,'--peers',f'{A},{B}','--log-level','warn','--heartbeat','1s','--failure-timeout','10s'],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL) for x in (A,B)]
def ask(addr,line):
    s=socket.create_connection(addr.split(':') and (addr.split(':')[0],int(addr.split(':')[1])))
    s.sendall(line.encode()); r=s.makefile().readline(); s.close(); return r
try:
    for _ in range(100):
        try:
            if ' role=standby ' in ask(B,'S -\n') and 'seq=' in ask(B,'S -\n'):
                st=ask(A,'S -\n')
                if 'role=active' in st and 'in_sync=' in st or 'role=active' in st: break
        except OSError: pass
        time.sleep(0.1)
    time.sleep(1.0)
    s=socket.create_connection(('127.0.0.1',port)); f=s.makefile()
    for i in range(50):  # warm up
        s.sendall(b'A warm 30 0\n'); tok=f.readline().split()[2]; s.sendall(f'R warm {tok}\n'.encode()); f.readline()
    w('trace','')
    w('events/lw/enable','1')
    s.sendall(b'A walk 30 0\n'); ans=f.readline()
    w('events/lw/enable','0')
    print('answer',ans.strip(), 'st', ask(A,'S -\n').strip()[:120])
    pidA=procs[0].pid
    seq=[]
    for line in open(os.path.join(T,'trace')):
        m=re.search(r'-(\d+)\s+\[\d+\].*? f(\d+): \(',line)
        if not m: continue
        tid=int(m.group(1)); i=int(m.group(2))
        # keep only the active's threads
        if os.path.exists(f'/proc/{pidA}/task/{tid}'):
            seq.append((tid,)+files[i])
    s.close()
finally:
    for p in procs: p.kill()
    w('events/enable','0'); w('uprobe_events','')
# the walk ends with the write of the client's answer: the first socket
# write after the standby's acknowledgement released it
cut=None; acked=False
for i,(t,n,f) in enumerate(seq):
    if n.endswith('(*Core).release') or n.endswith('(*Core).commit') or n.endswith('.releaseHeld'): acked=True
    if acked and ('rawWrite' in n or n.endswith('.writeTo') or 'tryWrite' in n):
        cut=i+1; break
if cut: seq=seq[:cut]
fs=[f for _,_,f in seq]
moves=sum(1 for a,b in zip(fs,fs[1:]) if a!=b)
back=0; seen=set([fs[0]]) if fs else set()
for a,b in zip(fs,fs[1:]):
    if a!=b:
        if b in seen: back+=1
        seen.add(b)
print(f'functions entered {len(seq)}, files {len(set(fs))}, moves {moves}, back to a file left {back}, threads {len(set(t for t,_,_ in seq))}')
if '-v' in sys.argv:
    for t,n,f in seq: print(t,f,n.split('/lockd/')[-1])
