# fit.py: the streaming kernel's cluster-size rule, fitted on every decode
# shape timed at each forced cluster size (../../2026-11-27-h100/splitk-probe
# and this folder's cs*.json); prints how close each candidate rule comes
# to the fastest size (geometric mean, worst) and the final rule's worst
# shapes. Run: python3 fit.py
import json,math,sys
import os
here=os.path.dirname(os.path.abspath(__file__))
base=os.path.join(here,'../../2026-11-27-h100/splitk-probe/')
def rows(f):
    return json.load(open(f))['rows']
data={}  # key -> {cs: ratio}
plan={}
for cs in [1,2,3,4,6,8]:
    for r in rows(base+'sk%d.json'%cs):
        if r.get('stream_ratio'):
            k=(r['m'],r['n'],r['k'],r['transb'],0)
            data.setdefault(k,{})[cs]=r['stream_ratio']
for r in rows(base+'plan.json'):
    if r.get('stream_ratio'):
        plan[(r['m'],r['n'],r['k'],r['transb'],0)]=(r['stream_splits'],r['stream_ratio'])
# this session's probe (BU rows: odd n)
b2=here+'/'
for cs in [1,2,4,8]:
    for r in rows(b2+'cs%d.json'%cs):
        bu = (r['n']%8!=0) if not r['transb'] else (r['k']%8!=0)
        k=(r['m'],r['n'],r['k'],r['transb'],1 if bu else 2)
        data.setdefault(k,{})[cs]=r['ratio']
for r in rows(b2+'plan.json'):
    bu = (r['n']%8!=0) if not r['transb'] else (r['k']%8!=0)
    k=(r['m'],r['n'],r['k'],r['transb'],1 if bu else 2)
    if r.get('stream_ratio'): plan[k]=(r.get('stream_splits'),r['stream_ratio'])
SMS=132
def tiles(n): return (n+63)//64
def rule(m,n,k,tb,bu,thr):
    t=tiles(n); units=(k+63)//64
    hi=max(1,min(8,units//4))
    for cs in [1,2,3,4,6,8]:
        if cs>hi: break
        if t*cs>=thr*(1.5 if bu==1 else 1): return cs
    return min(hi,4)
def evaluate(thr):
    tot=0;worst=1;n=0;lst=[]
    for k,v in data.items():
        best=max(v.values()); cs=rule(*k,thr)
        if cs not in v:
            cs=min(v,key=lambda c:abs(c-cs))
        q=v[cs]/best; tot+=math.log(q); n+=1; worst=min(worst,q); lst.append((q,k,cs,max(v,key=v.get)))
    return math.exp(tot/n),worst,sorted(lst)[:8]
for thr in [150,200,250,300,350]:
    g,w,l=evaluate(thr); print(thr,'geo %.3f worst %.3f'%(g,w))
g,w,l=evaluate(int(sys.argv[1]) if len(sys.argv)>1 else 200)
for x in l: print(x)
# plan's current
tot=0;n=0;worst=1
for k,(cs,ratio) in plan.items():
    if k in data:
        best=max(data[k].values()); q=ratio/best; tot+=math.log(q); n+=1; worst=min(worst,q)
print('current plan: geo %.3f worst %.3f over %d'%(math.exp(tot/n),worst,n))
print('--- grid')
def rule2(m,n,k,tb,bu,p):
    thr_a,thr_m2,thr_bu,maxcs=p
    t=tiles(n); units=(k+63)//64
    hi=max(1,min(8,units//4))
    thr=thr_a
    if m>16: thr=thr_m2
    if bu==1: thr=thr_bu
    for cs in [1,2,3,4,6,8]:
        if cs>hi or cs>maxcs: break
        if t*cs>=thr: return cs
    return min(hi,maxcs)
best=None
for ta in [150,175,200,225,250]:
  for tm in [100,125,150,175,200]:
    for tb in [400,500,550,600,700]:
      for mx in [4,6,8]:
        tot=0;n=0;worst=1
        for k,v in data.items():
            b=max(v.values()); cs=rule2(*k,(ta,tm,tb,mx))
            if cs not in v: cs=min(v,key=lambda c:abs(c-cs))
            q=v[cs]/b; tot+=math.log(q); n+=1; worst=min(worst,q)
        g=math.exp(tot/n)
        if best is None or g>best[0]: best=(g,worst,(ta,tm,tb,mx))
print(best)
p=best[2]; lst=[]
for k,v in data.items():
    b=max(v.values()); cs=rule2(*k,p)
    if cs not in v: cs=min(v,key=lambda c:abs(c-cs))
    lst.append((round(v[cs]/b,3),k,cs,max(v,key=v.get)))
for x in sorted(lst)[:10]: print(x)
print('--- grid3')
def rule3(m,n,k,tb,bu,p):
    thr_a,thr_m2,thr_bu,thr_t,smax=p
    t=tiles(n); units=(k+63)//64
    hi=max(1,min(4,units//4))
    thr=thr_a
    if tb: thr=thr_t
    if m>16: thr=thr_m2
    if bu==1: thr=thr_bu
    for cs in [1,2,3,4]:
        if cs>hi: break
        if t*cs>=thr and (units+4*cs-1)//(4*cs)<=smax: return cs
    return hi
best=None
for ta in [175,200,225]:
  for tm in [150,175,200]:
    for tb in [500,550,600]:
      for tt in [200,300,400,500,700,900]:
        for sm in [8,12,16,24,32,48,1000]:
          p=(ta,tm,tb,tt,sm); tot=0;n=0;worst=1
          for k,v in data.items():
            b=max(v.values()); cs=rule3(*k,p)
            if cs not in v: cs=min(v,key=lambda c:abs(c-cs))
            q=v[cs]/b; tot+=math.log(q); n+=1; worst=min(worst,q)
          g=math.exp(tot/n)
          if best is None or g>best[0]: best=(g,worst,p)
print(best)
p=best[2]; lst=[]
for k,v in data.items():
    b=max(v.values()); cs=rule3(*k,p)
    if cs not in v: cs=min(v,key=lambda c:abs(c-cs))
    lst.append((round(v[cs]/b,3),k,cs,max(v,key=v.get)))
for x in sorted(lst)[:10]: print(x)
print('--- rule4 (K-major steps cap)')
def rule4(m,n,k,tb,bu,smax):
    t=tiles(n); units=(k+63)//64
    hi=max(1,min(4,units//4))
    thr = SMS*17//4 if bu==1 else (SMS*4//3 if m>16 else SMS*3//2)
    for cs in [1,2,3,4]:
        if cs>hi: break
        if t*cs>=thr and not (tb and (units+4*cs-1)//(4*cs)>smax): return cs
    return hi
for smax in [8,12,16,24,32,1000]:
    tot=0;n=0;worst=1;lst=[]
    for k,v in data.items():
        b=max(v.values()); cs=rule4(*k,smax)
        if cs not in v: cs=min(v,key=lambda c:abs(c-cs))
        q=v[cs]/b; tot+=math.log(q); n+=1; worst=min(worst,q); lst.append((round(q,3),k,cs,max(v,key=v.get)))
    print(smax,'geo %.3f worst %.3f'%(math.exp(tot/n),worst), sorted(lst)[:3])
print('--- final')
def rulef(m,n,k,tb,bu):
    t=tiles(n); units=(k+63)//64
    hi=max(1,min(4,units//4))
    q = 17 if bu==1 else (5 if m>16 else 6)
    want=(SMS*q+3)//4
    for cs in range(1,hi):
        steps=(units+4*cs-1)//(4*cs)
        if t*cs>=want and not (tb and steps>24): return cs
    return hi
tot=0;n=0;worst=1;lst=[]
for k,v in data.items():
    b=max(v.values()); cs=rulef(*k)
    if cs not in v: cs=min(v,key=lambda c:abs(c-cs))
    q=v[cs]/b; tot+=math.log(q); n+=1; worst=min(worst,q); lst.append((round(q,3),k,cs,max(v,key=v.get)))
print('geo %.3f worst %.3f n %d'%(math.exp(tot/n),worst,n)); print(sorted(lst)[:4])
print('--- final2')
def rulef2(m,n,k,tb,bu,cap=24):
    t=tiles(n); units=(k+63)//64
    hi=max(1,min(4,units//4))
    q = 17 if bu==1 else (5 if m>16 else 6)
    want=(SMS*q+3)//4
    g=hi
    for cs in range(1,hi+1):
        if t*cs>=want: g=cs; break
    if tb:
        for cs in range(g,hi+1):
            if (units+4*cs-1)//(4*cs)<=cap: return cs
    return g
for cap in [16,24,32,1000]:
    tot=0;n=0;worst=1;lst=[]
    for k,v in data.items():
        b=max(v.values()); cs=rulef2(*k,cap=cap)
        if cs not in v: cs=min(v,key=lambda c:abs(c-cs))
        q=v[cs]/b; tot+=math.log(q); n+=1; worst=min(worst,q); lst.append((round(q,3),k,cs,max(v,key=v.get)))
    print(cap,'geo %.3f worst %.3f n %d'%(math.exp(tot/n),worst,n), sorted(lst)[:3])
