#!/usr/bin/env python3
"""results.jsonl (bench/gpu/run.py) → a markdown report: the issue's goals side by side with the
measurements, the set-up variants, the numerics, 1 vs 4 instances, and what was skipped or
failed. `python3 report.py results.jsonl gpu-bench.md`."""
import json
import os
import sys


def load(path):
    records = []
    if not os.path.exists(path):  # no part has recorded anything yet
        return records
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                records.append(json.loads(line))
    return records


def first(records, **match):
    for r in records:
        if all(r.get(k) == v for k, v in match.items()):
            return r
    return None


def fmt(value, unit="", digits=2):
    if value is None:
        return "—"
    if isinstance(value, float):
        value = f"{value:.{digits}f}"
    return f"{value}{unit}"


def goals(records, song_s):
    torch_demucs = first(records, part="torch", name="demucs apply_model")
    msst_amp = first(records, part="torch", name="MSST demix AMP float16 batch 4")
    msst_f32 = first(records, part="torch", name="MSST demix float32 batch 1")
    msst_f32_4 = first(records, part="torch", name="MSST demix float32 batch 4")
    ht_bench = first(records, part="stemflow-bench", model="htdemucs", variant="default")
    ht_song = first(records, part="stemflow-separate", model="htdemucs", variant="default",
                    song="song.wav")
    rf32 = first(records, part="stemflow-separate", model="bs_roformer", variant="float32",
                 song="song.wav")
    rf16_quantized = first(records, part="stemflow-separate", model="bs_roformer.fp16",
                           variant="float16", song="song.wav")
    rf16_graph = first(records, part="stemflow-separate", model="bs_roformer.gpu-f16",
                       variant="GPU graph float16", song="song.wav")
    rf16 = rf16_graph or rf16_quantized
    mem = {r["name"]: r["gpu_peak_mb"] for r in records if r.get("part") == "gpu-memory"}
    scale = song_s / 120.0
    rows = [
        ("HTDemucs, one model run (7.8 s segment)", fmt(ht_bench and ht_bench["run_ms"], " ms", 1),
         fmt(torch_demucs and torch_demucs["segment_ms"], " ms", 1) + " (PyTorch demucs)",
         "≤ 50 ms"),
        (f"HTDemucs, whole `stemflow separate` ({song_s:.0f} s song)",
         fmt(ht_song and ht_song["wall_s"], " s"),
         fmt(torch_demucs and torch_demucs["song_s"], " s") + " (`apply_model`)",
         f"≤ {1.5 * scale:.2f} s"),
        ("BS-RoFormer float16, the song (GPU graph; `quantize --fp16`: "
         + fmt(rf16_quantized and rf16_quantized["wall_s"], " s") + ")",
         fmt(rf16_graph and rf16_graph["wall_s"], " s"),
         fmt(msst_amp and msst_amp["song_s"], " s") + " (MSST AMP, batch 4)",
         f"≤ {2.0 * scale:.2f} s"),
        (f"BS-RoFormer float32, the song", fmt(rf32 and rf32["wall_s"], " s"),
         fmt(msst_f32 and msst_f32["song_s"], " s") + " (MSST float32, batch 1; batch 4: "
         + fmt(msst_f32_4 and msst_f32_4["song_s"], " s") + ")", f"≤ {7.0 * scale:.2f} s"),
        ("GPU memory, HTDemucs (nvidia-smi, over idle)",
         fmt(ht_song and ht_song["gpu_peak_mb"], " MB", 0),
         fmt(mem.get("demucs apply_model"), " MB", 0), "≤ reference"),
        ("GPU memory, BS-RoFormer float32", fmt(rf32 and rf32["gpu_peak_mb"], " MB", 0),
         fmt(mem.get("MSST amp=0 batch=1"), " MB", 0), "≤ reference"),
        ("GPU memory, BS-RoFormer float16", fmt(rf16 and rf16["gpu_peak_mb"], " MB", 0),
         fmt(mem.get("MSST amp=1 batch=4"), " MB", 0) + " (AMP, batch 4)", "≤ reference"),
    ]
    out = ["| same GPU, same models | Stemflow | reference | goal (issue 44) |", "|---|---|---|---|"]
    out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return out


def variants(records):
    rows = [r for r in records if r.get("part") == "stemflow-bench"]
    out = ["| set-up | model | one run (median, min) | real-time factor | GPU memory | device |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        device = r["device"] + (f" (fell back: {r['fallback']})" if r.get("fallback") else "")
        out.append(f"| {r['variant']} | {r['model']} | {fmt(r['run_ms'], ' ms', 1)}, "
                   f"{fmt(r['run_ms_min'], ' ms', 1)} | {fmt(r['rtf'], '', 4)} | "
                   f"{fmt(r.get('gpu_peak_mb'), ' MB', 0)} | {device} |")
    separates = [r for r in records if r.get("part") == "stemflow-separate"]
    if separates:
        out += ["", "| `stemflow separate` (second run) | model | input | wall | GPU memory |",
                "|---|---|---|---|---|"]
        out += [f"| {r['variant']} | {r['model']} | {r['song']} on {r['device']} | "
                f"{fmt(r['wall_s'], ' s')} | {fmt(r.get('gpu_peak_mb'), ' MB', 0)} |"
                for r in separates]
    return out


def main():
    records = load(sys.argv[1])
    env = first(records, part="env") or {}
    song_s = env.get("song_s") or 120.0
    lines = ["# bench/gpu: Stemflow against PyTorch demucs and MSST on the same GPU", ""]
    lines.append(f"Device `{env.get('device')}` ({env.get('gpu') or 'no GPU'}), ONNX Runtime "
                 f"{env.get('onnxruntime')}, models at the `{env.get('size')}` sizes (random "
                 f"weights from a seed), song {song_s:.0f} s. Stemflow's set-up by default: "
                 f"`{json.dumps(env.get('gpu_setup'))}`.")
    lines += ["", "## Goals", ""] + goals(records, song_s)
    lines += ["", "## Set-up variants (`stemflow bench`)", ""] + variants(records)
    torch_rows = [r for r in records if r.get("part") == "torch"]
    if torch_rows:
        lines += ["", "## References (PyTorch)", "", "| run | song | one segment | GPU memory "
                  "(allocator peak) | notes |", "|---|---|---|---|---|"]
        for r in torch_rows:
            notes = f"torch {r.get('torch')}"
            if "tf32_matmul" in r:
                notes += f", TF32 matmul {r['tf32_matmul']}, cuDNN {r['tf32_cudnn']}"
            if "attention" in r:
                notes += f", attention {r['attention']}"
            lines.append(f"| {r['name']} | {fmt(r.get('song_s'), ' s')} | "
                         f"{fmt(r.get('segment_ms'), ' ms', 1)} | "
                         f"{fmt(r.get('gpu_peak_mb'), ' MB', 0)} | {notes} |")
    numerics = [r for r in records if r.get("part") == "numerics"]
    if numerics:
        lines += ["", "## Numerics", "", "| comparison | SDR | largest difference | frames |",
                  "|---|---|---|---|"]
        lines += [f"| {r['name']} | {fmt(r['sdr_db'], ' dB')} | {r['max_abs_diff']:.2e} | "
                  f"{r['frames']} |" for r in numerics]
    inst = [r for r in records if r.get("part") == "instances"]
    if inst:
        lines += ["", "## Instances sharing one session (HTDemucs)", "",
                  "| instances | sessions | runs/s (all) | runs/s per instance | run ms median "
                  "(wait included) | p95 | GPU memory | peak RSS |", "|---|---|---|---|---|---|---|---|"]
        for r in inst:
            rates = r["instance_runs_per_s"]
            lines.append(f"| {r['instances']} | {r['sessions']} | {r['runs_per_s']:.2f} | "
                         f"{min(rates):.2f}–{max(rates):.2f} | {r['run_ms_median']:.0f} | "
                         f"{r['run_ms_p95']:.0f} | {fmt(r.get('gpu_peak_mb'), ' MB', 0)} | "
                         f"{fmt((r.get('peak_rss_bytes') or 0) / 1e6, ' MB', 0)} |")
    inspect = [r for r in records if r.get("part") == "inspect"]
    if inspect:
        lines += ["", "## Graphs (`stemflow models inspect --device cuda`)", "",
                  "| model | nodes | float64 values | nodes CUDA lacks | shape nodes on the CPU |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['model']} | {r['nodes']} | {r['float64_values']} | "
                  f"{r['cuda_unsupported']} | {r['cuda_shape_nodes']} |" for r in inspect]
    problems = [r for r in records if r.get("part") in ("failed", "skipped")]
    if problems:
        lines += ["", "## Skipped or failed", ""]
        lines += [f"- {r['part']}: {r['name']}: {r['reason']}" for r in problems]
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
