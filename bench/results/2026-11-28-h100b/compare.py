# compare two sets of bench_gemm_sweep JSON runs: cmp.py "a1.json a2.json" "b1.json b2.json"
import json,sys,statistics as st,math
def key(r): return (r['kind'],r['m'],r['n'],r['k'],r.get('transb',0))
def agg(files):
    d={}
    for f in files.split():
        for r in json.load(open(f))["rows"]:
            d.setdefault(key(r),[]).append(r)
    return d
A=agg(sys.argv[1]); B=agg(sys.argv[2])
logs=[];below=[0,0]
print("%-8s %4s %6s %6s %2s %-7s | %5s %5s | %5s %5s | %6s %5s"%("kind","m","n","k","t","path","A/cb","B/cb","A/rf","B/rf","B/A","oneB/A"))
for k in A:
    if k not in B: continue
    a=A[k];b=B[k]
    ca=st.median([x['carve_ms'] for x in a]); cb=st.median([x['carve_ms'] for x in b])
    ra=st.median([x['ratio'] for x in a]); rb=st.median([x['ratio'] for x in b])
    fa=st.median([x['roofline_carve'] for x in a]); fb=st.median([x['roofline_carve'] for x in b])
    oa=st.median([x['one_carve_ms'] for x in a]); ob=st.median([x['one_carve_ms'] for x in b])
    logs.append(math.log(ca/cb))
    below[0]+= ra<0.8; below[1]+= rb<0.8
    print("%-8s %4d %6d %6d %2d %-7s | %5.2f %5.2f | %5.2f %5.2f | %6.3f %5.3f"%(k[0],k[1],k[2],k[3],k[4],a[0]['path'],ra,rb,fa,fb,ca/cb,oa/ob))
print("rows",len(logs),"geo speedup B over A %.3f"%math.exp(sum(logs)/len(logs)), "below 0.8: A",below[0],"B",below[1])
