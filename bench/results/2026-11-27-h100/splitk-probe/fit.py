"""fit.py: the split-K model against this folder's forced-S sweeps.

For each of the 101 decode rows, the time of the S each model picks over
the fastest measured S (1, 2, 3, 4, 6, 8): the model before the wave floor
and the floored one at several floors (r = 1 / floor). Run: python3 fit.py
"""
import json, math, os
HERE = os.path.dirname(os.path.abspath(__file__))
S=[1,2,3,4,6,8]
D={s:{(x['kind'],x['m'],x['n'],x['k']):x for x in json.load(open(os.path.join(HERE, f'sk{s}.json')))['rows']} for s in S}
P={(x['kind'],x['m'],x['n'],x['k']):x for x in json.load(open(os.path.join(HERE, 'plan.json')))['rows']}
sms=132
def tiles(M,N,bn): return math.ceil(M/128)*math.ceil(N/bn)
def choose_bn(M,N):
    best=None
    for bn in (128,192,256):
        c=math.ceil(tiles(M,N,bn)/sms)*(bn+32)
        if best is None or c<best[0] or (c==best[0] and bn>best[1]): best=(c,bn)
    return best[1]
def cur_model(M,N,K,cands):
    bn=choose_bn(M,N); t=tiles(M,N,bn); kt=math.ceil(K/64)
    if t>=sms or kt<8: return 1
    ub=sms*bn*128.0; mn=M*N
    best=1; bc=kt
    for s in range(2,17):
        if kt//s<4: break
        per=math.ceil(kt/s); w=math.ceil(t*s/sms)
        c=w*per+8.0*s*mn/ub+3
        if c<bc: bc=c; best=s
    return best
def new_model(M,N,K,r,red=3,cands=None):
    bn=choose_bn(M,N); t=tiles(M,N,bn); kt=math.ceil(K/64)
    if kt<8: return 1
    ub=sms*bn*128.0; mn=M*N
    def cost(s):
        per=math.ceil(kt/s); blocks=t*s; c=0
        while blocks>0:
            a=min(blocks,sms); c+=per*max(1.0/r, a/sms); blocks-=a
        return c+(8.0*s*mn/ub+red if s>1 else 0)
    best=1; bc=cost(1)
    for s in range(2,17):
        if kt//s<4: break
        c=cost(s)
        if c<bc: bc=c; best=s
    return best
def nearest(s): return min(S,key=lambda x:(abs(x-s),x))
keys=[k for k in D[1] if k[0].startswith('decode')]
def evaluate(fn):
    tot=0; orc=0; worst=0; picks={}
    for k in keys:
        ms={s:D[s][k]['carve_ms'] for s in S}
        s=nearest(fn(k[1],k[2],k[3]))
        best=min(ms.values()); tot+=ms[s]/best; orc+=1; worst=max(worst,ms[s]/best); picks[k]=s
    return tot/orc, worst, picks
base=evaluate(lambda M,N,K: cur_model(M,N,K,None))
print('current model: mean time/oracle %.3f worst %.2f'%base[:2])
for r in (1.25,1.5,1.75,2,2.5,3):
    for red in (3,6):
        e=evaluate(lambda M,N,K: new_model(M,N,K,r,red))
        print('r=%.2f red=%d: mean %.3f worst %.2f'%(r,red,e[0],e[1]))
# actual splits the plan chose vs per-shape best
import collections
print()
for k in keys:
    ms={s:D[s][k]['carve_ms'] for s in S}; b=min(ms,key=ms.get)
    if k[1] in (1,8,32,128):
        print(k, 'plan s%d'%P[k]['splits'], 'best s%d'%b, ' '.join('%d:%.2f'%(s,ms[s]/ms[b]) for s in S), 'cur->%d'%cur_model(*k[1:],None), 'r2->%d'%new_model(*k[1:],2))
print()
e=evaluate(lambda M,N,K: new_model(M,N,K,1.25,3))
for k in keys:
    ms={s:D[s][k]['carve_ms'] for s in S}; b=min(ms,key=ms.get)
    s=e[2][k]; c=nearest(cur_model(*k[1:],None))
    if ms[s]/ms[b]>1.05 or ms[c]/ms[b]>1.05:
        print(k,'new s%d %.2f'%(s,ms[s]/ms[b]),'cur s%d %.2f'%(c,ms[c]/ms[b]),'best s%d'%b, 'raw new s%d'%new_model(*k[1:],1.25,3))
# also r in finer grid
for r in (1.1,1.15,1.2,1.25,1.3,1.35,1.4):
    e2=evaluate(lambda M,N,K: new_model(M,N,K,r,3)); print('r=%.2f mean %.4f worst %.2f'%(r,e2[0],e2[1]))
print()
k=('decode',16,12288,4096)
ms={s:D[s][k]['carve_ms'] for s in S}; b=min(ms,key=ms.get)
print(k, ' '.join('%d:%.3f'%(s,ms[s]/ms[b]) for s in S), 'new', new_model(16,12288,4096,1.25,3), 'cur', cur_model(16,12288,4096,None))
def new_model2(M,N,K,r=1.25,red=3):
    bn=choose_bn(M,N); t=tiles(M,N,bn); kt=math.ceil(K/64)
    if t>=sms or kt<8: return 1
    return new_model(M,N,K,r,red)
e=evaluate(new_model2); print('with early return: mean %.4f worst %.2f'%e[:2])
