# ncu_table.py: one line a kernel from `ncu --csv --page raw` logs (median duration, DRAM bytes, grid, cluster, registers)
import csv,sys,collections
for f in sys.argv[1:]:
    lines=[l for l in open(f) if l.startswith('"')]
    r=list(csv.reader(lines))
    h=r[0]; rows=r[2:]
    def col(n): return h.index(n)
    agg=collections.OrderedDict()
    for x in rows:
        name=x[col("Kernel Name")][:60]
        F=lambda s: float(s.replace(",",""))
        d=F(x[col("gpu__time_duration.sum")]); rd=F(x[col("dram__bytes_read.sum")]); wr=F(x[col("dram__bytes_write.sum")])
        agg.setdefault(name,[]).append((d,rd,wr,x[col("launch__grid_size")],x[col("launch__cluster_dim_x")],x[col("launch__registers_per_thread")]))
    print("==",f)
    for k,v in agg.items():
        v.sort()
        d,rd,wr,g,c,reg=v[len(v)//2]
        print(f"{k:60s} n={len(v):3d} med {d:9.0f} ns  rd {rd/1e6:7.2f} MB wr {wr/1e6:6.2f} MB grid {g} cl {c} reg {reg}  ({rd/d:.2f} GB/s... )".replace("GB/s... ","B/ns"))
