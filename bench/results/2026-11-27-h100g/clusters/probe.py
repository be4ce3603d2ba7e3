# the cluster probe table: run in clusters/ (au*, c{1,2,4,8}_*, pau*, pdc* JSON from run.sh): carve / cuBLAS per forced cluster size beside the plan
import json,statistics as st,sys
def load(n):
    rs={}
    for i in (1,2):
        f=f'{n}_{i}.json' if n.startswith('c') else f'{n}{i}.json'
        for r in json.load(open(f))['rows']:
            key=(r['m'],r['n'],r['k'],r['transb'])
            rs.setdefault(key,[]).append(r)
    return rs
A=load('pau'); C={cs:load(f'c{cs}') for cs in (1,2,4,8)}; D=load('pdc')
def rat(rows): return st.mean(r['ratio'] for r in rows)
print("  m      n      k t | auto  path  | cs1     cs2     cs4     cs8    | plan(cs)        | roofline auto/dc/cublas")
for key in sorted(A, key=lambda k:(k[3],k[1],k[2],k[0])):
    a=A[key]; line=f"{key[0]:3d} {key[1]:6d} {key[2]:6d} {int(key[3])} | {rat(a):.2f} {a[0]['path']:6s}|"
    for cs in (1,2,4,8): line+=f" {rat(C[cs][key]):.2f}({C[cs][key][0]['splits']})"
    d=D[key]; line+=f" | {rat(d):.2f}({d[0]['splits']},{d[0]['path']}) | {st.mean(r['roofline_carve'] for r in a):.2f}/{st.mean(r['roofline_carve'] for r in d):.2f}/{st.mean(r['roofline_cublas'] for r in a):.2f}"
    print(line)
