# fit.py: the streaming kernel's cluster-size rule against every decode
# shape timed at each forced size: B's rows on 16 bytes from
# ../../2026-11-27-h100/splitk-probe (sizes 1-8), rows off 16 bytes from
# this folder (sizes 1-4, the kernel at four blocks an SM). Prints a wave
# model tried and not kept, the threshold for rows off 16 bytes by itself,
# and the final rule (gemm_tc_plan.h) against the earlier cost model.
# Run: python3 fit.py
import json,math,itertools
import os
here=os.path.dirname(os.path.abspath(__file__))
base=os.path.join(here,'../../2026-11-27-h100/')+'/'
def rows(f): return json.load(open(f))['rows']
data={}
for cs in [1,2,3,4,6,8]:
    for r in rows(base+'splitk-probe/sk%d.json'%cs):
        if r.get('stream_ratio'):
            data.setdefault((r['m'],r['n'],r['k'],r['transb'],0),{})[cs]=r['stream_ratio']
for cs in [1,2,3,4]:
    for r in rows(os.path.join(here,'cs%d.json'%cs)):
        if r['path']=='stream':
            data.setdefault((r['m'],r['n'],r['k'],r['transb'],1),{})[cs]=r['ratio']
SMS=132
def bps(m,tb,bu):
    mt=1 if m<=16 else 2
    if mt==1: return 3 if tb else 4
    return 2 if (tb or bu) else 3
def model(m,n,k,tb,bu,c,maxcs=4):
    tiles=(n+63)//64; units=(k+63)//64
    hi=max(1,min(maxcs,units//4)); slots=SMS*bps(m,tb,bu)
    best=None
    for cs in range(1,hi+1):
        cost=math.ceil(tiles*cs/slots)*(math.ceil(units/(4*cs))+c)
        if best is None or cost<best[0]: best=(cost,cs)
    return best[1]
def ev(f,name):
    tot=0;n=0;worst=1;lst=[]
    for k,v in data.items():
        b=max(v.values()); cs=f(*k)
        if cs not in v: cs=min(v,key=lambda c:abs(c-cs))
        q=v[cs]/b; tot+=math.log(q); n+=1; worst=min(worst,q); lst.append((round(q,3),k,cs,max(v,key=v.get)))
    print(name,'geo %.3f worst %.3f n %d'%(math.exp(tot/n),worst,n)); return sorted(lst)
for c in [0,1,2,3,4,6,8]:
    for mx in [4,8]:
        ev(lambda m,n,k,tb,bu: model(m,n,k,tb,bu,c,mx), 'wave c=%d max=%d'%(c,mx))
def cur(m,n,k,tb,bu):
    t=(n+63)//64; units=(k+63)//64
    hi=max(1,min(4,units//4))
    q = 17 if bu==1 else (5 if m>16 else 6)
    want=(SMS*q+3)//4
    g=hi
    for cs in range(1,hi):
        if t*cs>=want: g=cs; break
    if tb:
        for cs in range(g,hi+1):
            if (units+4*cs-1)//(4*cs)<=24: return cs
    return g
l=ev(cur,'current rule')
for x in l[:6]: print(x)
print('--- BU threshold grid (BU rows only)')
bud={k:v for k,v in data.items() if k[4]==1}
def rq(qbu):
    def f(m,n,k,tb,bu):
        t=(n+63)//64; units=(k+63)//64
        hi=max(1,min(4,units//4))
        q = qbu if bu==1 else (5 if m>16 else 6)
        want=(SMS*q+3)//4
        for cs in range(1,hi):
            if t*cs>=want: return cs
        return hi
    return f
for q in range(3,21):
    tot=0;n=0;worst=1;lst=[]
    for k,v in bud.items():
        b=max(v.values()); cs=rq(q)(*k)
        if cs not in v: cs=min(v,key=lambda c:abs(c-cs))
        x=v[cs]/b; tot+=math.log(x); n+=1; worst=min(worst,x); lst.append((round(x,2),'%dx%dx%d'%k[:3],cs))
    print(q,'geo %.3f worst %.3f'%(math.exp(tot/n),worst), sorted(lst)[:3])
print('--- final rule (BU as aligned) over all')
def fin(m,n,k,tb,bu):
    t=(n+63)//64; units=(k+63)//64
    hi=max(1,min(4,units//4))
    want=(SMS*(5 if m>16 else 6)+3)//4
    g=hi
    for cs in range(1,hi):
        if t*cs>=want: g=cs; break
    if tb:
        for cs in range(g,hi+1):
            if (units+4*cs-1)//(4*cs)<=24: return cs
    return g
l=ev(fin,'final'); print(l[:4])
# old model (cost) for comparison on this data
def oldm(m,n,k,tb,bu):
    t=(n+63)//64; units=(k+63)//64
    hi=max(1,min(8,units//4)); lo=max(1,min(hi,(2*SMS+t-1)//t))
    best=None
    for cs in range(lo,hi+1):
        c=math.ceil(t*cs/SMS)*math.ceil(units/(4*cs))
        if best is None or c<best[0]: best=(c,cs)
    return best[1]
ev(oldm,'old model')
