# carve's speed, B over A, per shape (median carve_ms over runs) and carve / cuBLAS means: speed.py "A*.json" "B*.json"
import json,statistics as st,math,sys,glob
def load(pat):
    d={}
    for f in sorted(glob.glob(pat)):
        for r in json.load(open(f))['rows']:
            d.setdefault((r['m'],r['n'],r['k'],r.get('transb',False)),[]).append(r)
    return d
a=load(sys.argv[1]); b=load(sys.argv[2]); g=[]
for k in a:
    if k not in b: continue
    ca=st.median(x['carve_ms'] for x in a[k]); cb=st.median(x['carve_ms'] for x in b[k])
    ra=st.mean(x['ratio'] for x in a[k]); rb=st.mean(x['ratio'] for x in b[k])
    g.append(ca/cb)
    print(k, a[k][0]['path'], f"carve/cuBLAS {ra:.3f} -> {rb:.3f}; speed {ca/cb:.3f} ({len(a[k])}+{len(b[k])} runs)")
print('geometric mean speed', round(math.exp(sum(map(math.log,g))/len(g)),4))
