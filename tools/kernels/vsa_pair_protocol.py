#!/usr/bin/env python3
"""A model check of the pair block-sparse kernel's load protocol (src/ops/cuda/vsa_attention_hopper.cu,
bsa_pair_sm90): one producer walking two key-tile lists position by position into three stage rings (shared,
A's, B's), mbarriers with phase-parity waits, TMA loads landing after random delays, two consumers stepping
as the kernel does (K of step j with V of step j−1, K released after S, V after P·V) at random speeds. Checks
that every consumer step reads the tile it expects and that nothing deadlocks, over random lists (exempt and
compete, shared positions, out-of-range entries, a tile alone, prefix pairs) and ring depths 1, 2 and 4.
Needs no GPU. A single shared ring (the first design) fails it: a consumer can take a stage whose previous
load, another consumer's, has not landed for the phase before.

    python3 tools/kernels/vsa_pair_protocol.py [cases]   (default 3000)"""
import random, sys

class Bar:
    def __init__(s, count): s.count=count; s.pending=count; s.phase=0; s.tx=0
    def arrive(s, n=1):
        s.pending-=n
        assert s.pending>=0
        s._maybe()
    def _maybe(s):
        if s.pending==0 and s.tx==0:
            s.phase+=1; s.pending=s.count
    def done(s, parity):  # try_wait.parity: true when the phase with this parity has completed
        return (s.phase & 1) != parity

def run(ca_list, cb_list, dense, R, seed):
    rnd=random.Random(seed)
    slots=3*R
    kf=[Bar(1) for _ in range(slots)]; vf=[Bar(1) for _ in range(slots)]
    ke=[Bar(8 if s<R else 4) for s in range(slots)]; ve=[Bar(8 if s<R else 4) for s in range(slots)]
    kdata=[None]*slots; vdata=[None]*slots
    la, lb = ca_list, cb_list
    ca=len(la); cb=len(lb) if lb is not None else 0
    def shared_at(j): return j<ca and j<cb and (dense or la[j]==lb[j])
    # producer as a generator of actions
    inflight=[]  # (time_left, kind, slot, tile)
    def producer():
        loads=[0,0,0]
        n=max(ca,cb)
        for j in range(n):
            evs=[]
            if shared_at(j): evs.append((0, la[j]))
            else:
                if j<ca: evs.append((1, la[j]))
                if j<cb: evs.append((2, lb[j]))
            for ring,kt in evs:
                e=loads[ring]; loads[ring]+=1
                st=ring*R+e%R; ph=(e//R)&1
                if e>=R:
                    while not ke[st].done(ph^1): yield
                kf[st].pending-=1; kf[st].tx+=1  # arrive.expect_tx
                inflight.append([rnd.randint(0,6),'k',st,kt])
                yield
                if e>=R:
                    while not ve[st].done(ph^1): yield
                vf[st].pending-=1; vf[st].tx+=1
                inflight.append([rnd.randint(0,6),'v',st,kt])
                yield
    def consumer(b):
        lst = lb if b else la
        count = cb if b else ca
        ring = 2 if b else 1
        ns=0; no=0; j=0
        def take():
            nonlocal ns,no,j
            sh=shared_at(j)
            if sh: e=ns; ns+=1
            else: e=no; no+=1
            slot=(0 if sh else ring)*R+e%R; par=(e//R)&1
            r=(slot,par,sh,lst[j]); j+=1; return r
        def rel(bar, sh):
            for w in range(4): bar.arrive(1)
        cur=take(); prev=None
        while not kf[cur[0]].done(cur[1]): yield
        assert kdata[cur[0]]==cur[3], ('K', b, cur, kdata[cur[0]])
        for _ in range(rnd.randint(0,3)): yield
        rel(ke[cur[0]], cur[2])
        prev=cur
        for jj in range(1,count):
            cur=take()
            while not kf[cur[0]].done(cur[1]): yield
            while not vf[prev[0]].done(prev[1]): yield
            assert kdata[cur[0]]==cur[3], ('K', b, jj, cur, kdata[cur[0]])
            assert vdata[prev[0]]==prev[3], ('V', b, jj, prev, vdata[prev[0]])
            for _ in range(rnd.randint(0,3)): yield
            rel(ke[cur[0]], cur[2])
            for _ in range(rnd.randint(0,3)): yield
            assert vdata[prev[0]]==prev[3], ('V late', b, jj)
            rel(ve[prev[0]], prev[2])
            prev=cur
        while not vf[prev[0]].done(prev[1]): yield
        assert vdata[prev[0]]==prev[3]
        rel(ve[prev[0]], prev[2])
    procs=[producer(), consumer(False)] + ([consumer(True)] if cb else [])
    alive=[True]*len(procs)
    idle=0
    while any(alive) or inflight:
        progressed=False
        # TMA completions
        for x in list(inflight):
            if x[0]<=0:
                inflight.remove(x)
                st=x[2]
                if x[1]=='k': kdata[st]=x[3]; kf[st].tx-=1; kf[st]._maybe()
                else: vdata[st]=x[3]; vf[st].tx-=1; vf[st]._maybe()
                progressed=True
            else: x[0]-=1; progressed=True
        order=list(range(len(procs))); rnd.shuffle(order)
        for i in order:
            if alive[i] and rnd.random()<0.7:
                try: next(procs[i])
                except StopIteration: alive[i]=False
        idle+=1
        if idle>200000: raise RuntimeError('deadlock? %s'%alive)
    return True

def lists(n, P, width, exempt, share, rnd):
    pool=list(range(P if exempt else 0, n)); rnd.shuffle(pool)
    a=sorted((list(range(P)) if exempt else [])+pool[:width-(P if exempt else 0)])
    pick=[t for t in a if (exempt and t<P) or rnd.random()<share]
    rest=[t for t in range(P if exempt else 0,n) if t not in pick]; rnd.shuffle(rest)
    b=sorted(pick+rest[:width-len(pick)])
    return a,b

rnd=random.Random(1)
cnt=0
for it in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3000):
    n=rnd.randint(2,30); P=rnd.randint(0,n-1); exempt=rnd.random()<0.6
    width = P+rnd.randint(1,n-P) if exempt else rnd.randint(1,n)
    share=rnd.choice([0,0.3,0.7,1.0])
    a,b=lists(n,P,width,exempt,share,rnd)
    # out-of-range entries
    if rnd.random()<0.3: a[rnd.randrange(width)]=-1
    if rnd.random()<0.3: b[rnd.randrange(width)]=n+5
    R=rnd.choice([1,2,4])
    mode=rnd.random()
    if mode<0.15: run(list(range(n)), list(range(n)), True, R, it)
    elif mode<0.25: run(a, None, False, R, it)
    else: run(a, b, False, R, it)
    cnt+=1
print('ok', cnt)
