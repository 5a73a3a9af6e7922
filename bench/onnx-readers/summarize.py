"""Turns results/timings.tsv and results/rss.tsv into the Markdown tables of REPORT.md."""
import collections, re
rows = collections.OrderedDict()
for line in open("results/timings.tsv"):
    f = line.rstrip("\n").split("\t")
    kv = dict(x.split("=", 1) for x in f[3:] if "=" in x and not x.startswith("identical"))
    rows[(f[0], f[1], f[2])] = kv
rss = collections.defaultdict(list)
for line in open("results/rss.tsv"):
    f, tv, _, kb = line.split("\t")
    rss[(f, tv)].append(int(kb) * 1024 / 1e6)
def extra(f, task, v):
    base = min(rss[(f, "read prost-bytes" if v == "prost-bytes" else "read borrowed")])
    k = (f, f"{task} {v}")
    return f"{min(rss[k]) - base:.1f}" if k in rss else "–"
print("| file | task | variant | median ms | first-run ms | min ms | heap peak MB | heap allocated MB | extra max RSS MB |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
for (f, t, v), kv in rows.items():
    rt = {"encode-only": None, "decode+encode": "encode"}.get(t, t)
    r = extra(f, rt, v) if rt else "–"
    if t == "decode+encode" and v != "borrowed": pass
    print(f"| {f} | {t} | {v} | {float(kv['median_ms']):.2f} | {float(kv['first_ms']):.2f} | {float(kv['min_ms']):.2f} | {kv['peak_extra_MB']} | {kv['alloc_MB']} | {r} |")
