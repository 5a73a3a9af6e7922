#!/usr/bin/env python3
"""bench/gpu: Stemflow against PyTorch demucs and MSST on the same GPU, the same random-weight
models (see README.md). Runs every part under a hard time limit inside a total budget, keeps
what each part measured in $OUT/results.jsonl and rewrites $OUT/gpu-bench.md after every part,
so a run cut short still leaves its table.

    python3 bench/gpu/run.py --out $OUT --sf $SF [--device cuda:0] [--size released]
    python3 bench/gpu/run.py --out /tmp/gb --sf target/release/stemflow --device cpu --size tiny \
        --song-s 12 --clip-s 6 --cpu-clip-s 4 --budget-s 1500      # tried here, no GPU
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class Bench:
    def __init__(self, args):
        self.args = args
        self.out = os.path.abspath(args.out)
        os.makedirs(self.out, exist_ok=True)
        # Models and stems stay out of $OUT: what comes back from the machine is a few files.
        self.work = os.path.abspath(args.work)
        os.makedirs(self.work, exist_ok=True)
        self.results = os.path.join(self.out, "results.jsonl")
        self.log = open(os.path.join(self.out, "log.txt"), "a")
        self.started = time.monotonic()
        self.gpu = args.device.startswith("cuda")
        # STEMFLOW_LOG=info: each session's build time and set-up, and every fallback, land in
        # log.txt (stderr), so a slow start can be told from slow runs.
        self.env = dict(os.environ, STEMFLOW_DATA_DIR=os.path.join(self.work, "data"),
                        STEMFLOW_LOG="info")

    # -- bookkeeping -------------------------------------------------------------------------
    def emit(self, **record):
        record["t"] = round(time.time(), 3)
        with open(self.results, "a") as f:
            f.write(json.dumps(record) + "\n")

    def left_s(self):
        return self.args.budget_s - (time.monotonic() - self.started)

    def say(self, text):
        line = f"[{time.monotonic() - self.started:6.1f} s] {text}"
        print(line, flush=True)
        self.log.write(line + "\n")
        self.log.flush()

    def run(self, name, argv, limit_s, env=None, capture=True):
        """Runs `argv` with at most `limit_s` (and what the budget leaves); returns
        (stdout, wall seconds, peak GPU MB over the baseline) or None when it failed."""
        limit = min(limit_s, self.left_s() - 5)
        if limit < 5:
            self.emit(part="skipped", name=name, reason="the time budget is spent")
            self.say(f"skip {name}: budget spent")
            return None
        self.say(f"{name}: {' '.join(argv)} (limit {limit:.0f} s)")
        sampler = GpuSampler() if self.gpu else None
        t = time.monotonic()
        try:
            done = subprocess.run(argv, env={**self.env, **(env or {})}, timeout=limit,
                                  stdout=subprocess.PIPE if capture else None,
                                  stderr=subprocess.PIPE, text=True)
        except subprocess.TimeoutExpired:
            self.emit(part="failed", name=name, reason=f"over its {limit:.0f} s limit")
            self.say(f"{name}: TIMEOUT")
            return None
        finally:
            peak = sampler.stop() if sampler else None
        wall = time.monotonic() - t
        self.log.write(done.stderr[-20000:] + "\n")
        if done.returncode != 0:
            self.emit(part="failed", name=name, reason=(done.stderr or "")[-600:].strip())
            self.say(f"{name}: FAILED ({done.returncode})")
            return None
        return done.stdout, wall, peak

    def report(self):
        subprocess.run([sys.executable, os.path.join(HERE, "report.py"), self.results,
                        os.path.join(self.out, "gpu-bench.md")])


class GpuSampler:
    """nvidia-smi's used memory every 100 ms; `stop` gives the peak over the first sample."""

    def __init__(self):
        self.samples = []
        self.proc = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
             "-lms", "100"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.samples.append(float(line.split()[0]))
            except (ValueError, IndexError):
                pass

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.thread.join(timeout=1)
        if len(self.samples) < 2:
            return None
        return round(max(self.samples) - self.samples[0], 0)


# -- the parts ---------------------------------------------------------------------------------
def part_environment(b):
    sf, a = b.args.sf, b.args
    ran = b.run("stemflow devices", [sf, "devices", "--json"], 60)
    devices = json.loads(ran[0]) if ran else {}
    gpu = None
    if b.gpu and shutil.which("nvidia-smi"):
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"], stdout=subprocess.PIPE, text=True)
        gpu = q.stdout.strip()
    b.emit(part="env", device=a.device, size=a.size, song_s=a.song_s, gpu=gpu,
           onnxruntime=devices.get("runtime", {}).get("version"), auto=devices.get("auto"),
           gpu_setup=devices.get("gpu_setup"), python=sys.version.split()[0])


def torch_side(b, name, argv, limit_s):
    cmd = [b.args.python, os.path.join(HERE, "torch_side.py"), "--results", b.results] + argv
    ran = b.run(name, cmd, limit_s, capture=False)
    return ran


def part_models(b):
    """Checkpoints from a seed (PyTorch), converted by Stemflow, float16 versions, inspected."""
    w, sf = b.work, b.args.sf
    if not torch_side(b, "checkpoints", ["checkpoints", "--out", w, "--size", b.args.size,
                                         "--device", b.args.device], 240):
        return False
    models = os.path.join(w, "models")
    imports = [("htdemucs", [os.path.join(w, "htdemucs.th")]),
               ("bs_roformer", [os.path.join(w, "bs_roformer.ckpt"), "--config",
                                os.path.join(w, "bs_roformer.yaml")])]
    for name, files in imports:
        if not b.run(f"convert {name}", [sf, "models", "import", *files, "--name", name,
                                          "--models-dir", models, "--force"], 180):
            return False
        b.run(f"float16 {name}", [sf, "quantize", "--fp16", os.path.join(models, name + ".onnx")],
              180)
    for name in os.listdir(models):
        if not name.endswith(".onnx"):
            continue
        ran = b.run(f"inspect {name}", [sf, "models", "inspect", os.path.join(models, name),
                                        "--device", "cuda", "--json"], 60)
        if ran:
            report = json.loads(ran[0])
            cuda = report["providers"][0]
            b.emit(part="inspect", model=name[:-5], nodes=report["node_count"],
                   float64_values=report["element_types"].get("double", 0),
                   cuda_unsupported=len(cuda["unsupported"]),
                   cuda_shape_nodes=cuda["shape_nodes_on_cpu"])
    return True


def part_songs(b):
    w = b.work
    for name, seconds in (("song", b.args.song_s), ("clip", b.args.clip_s),
                          ("cpuclip", b.args.cpu_clip_s)):
        # The generator is linear in the length (about 0.14 s a second of song here, on 2
        # cores; it was quadratic, and the 120 s song ran past 60 s on an H200 machine): the
        # limit still grows with the length.
        torch_side(b, f"song {name}", ["song", "--seconds", str(seconds),
                                       "--out", os.path.join(w, name)], 30 + 1.5 * seconds)


def part_torch(b):
    w, d = b.work, b.args.device
    song = os.path.join(w, "song.npy")
    ran = torch_side(b, "PyTorch demucs", ["demucs", "--checkpoint", os.path.join(w, "htdemucs.th"),
                                           "--input", song, "--device", d], 180)
    note_memory(b, "demucs apply_model", ran)
    ckpt = os.path.join(w, "bs_roformer.ckpt")
    for amp, batch, tf32 in ((1, 4, 0), (0, 1, 0), (0, 4, 0)):
        ran = torch_side(b, f"MSST amp={amp} batch={batch}",
                         ["msst", "--checkpoint", ckpt, "--input", song, "--device", d,
                          "--amp", str(amp), "--batch", str(batch), "--tf32", str(tf32)], 240)
        note_memory(b, f"MSST amp={amp} batch={batch}", ran)
    # The numerics reference: MSST float32 (no TF32) on the clip.
    torch_side(b, "MSST float32 on the clip",
               ["msst", "--checkpoint", ckpt, "--input", os.path.join(w, "clip.npy"), "--device", d,
                "--amp", "0", "--batch", "1", "--out", os.path.join(w, "msst_clip.npy")], 180)


def note_memory(b, name, ran):
    if ran and ran[2] is not None:
        b.emit(part="gpu-memory", name=name, gpu_peak_mb=ran[2])


# Set-up variants beside the default and I/O binding (both in `part_stemflow_bench`): (label,
# environment). The default is TF32 on, cuDNN exhaustive search, graph capture off, I/O binding
# off (engine/src/runtime/gpu_tuning.rs).
VARIANTS = [
    ("TF32 off", {"STEMFLOW_CUDA_TF32": "0"}),
    ("CUDA graph on", {"STEMFLOW_GPU_GRAPH": "1"}),
    ("cuDNN heuristic search", {"STEMFLOW_CUDNN_CONV_SEARCH": "heuristic"}),
]


def model_path(b, name):
    return os.path.join(b.work, "models", name + ".onnx")


def stemflow_bench(b, model, label, env, limit_s):
    """`stemflow bench` of one model under one set-up: one model run's time, the whole path."""
    path = model_path(b, model)
    if not os.path.exists(path):
        b.emit(part="skipped", name=f"bench {model} {label}", reason=f"no {model}.onnx")
        return
    ran = b.run(f"bench {model} {label}", [b.args.sf, "bench", "--model", path, "--device",
                                             b.args.device, "--seconds", str(b.args.bench_s),
                                             "--json"], limit_s, env=env)
    if not ran:
        return
    row = json.loads(ran[0])["rows"][0]
    if "error" in row:
        b.emit(part="failed", name=f"bench {model} {label}", reason=row["error"])
        return
    b.emit(part="stemflow-bench", model=model, variant=label, device=row["device"],
           fallback=row.get("fallback_reason"), run_ms=row["run_ms"]["median"],
           run_ms_min=row["run_ms"]["min"], rtf=row["real_time_factor"],
           audio_s=row["audio_s"], model_runs=row["model_runs"], gpu_peak_mb=ran[2],
           peak_rss_mb=(row["peak_rss_bytes"] or 0) / 1e6)


def part_stemflow_bench(b):
    """The default set-up and float16, the goals' rows; the other set-ups come later
    (`variants`), after the song and the numerics."""
    for model in ("htdemucs", "bs_roformer"):
        stemflow_bench(b, model, "default", {}, 150)
        if model == "htdemucs":
            # Early, since it decides whether binding can come back on (docs/models.md).
            stemflow_bench(b, model, "I/O binding on", {"STEMFLOW_IO_BINDING": "1"}, 150)
        # float16 both ways: the GPU graph `models import` writes beside the model (matmuls and
        # convolutions in float16, norms and reductions in float32), and `quantize --fp16` of
        # the CPU graph (the whole graph in float16, as before the GPU graphs).
        stemflow_bench(b, model + ".gpu-f16", "GPU graph float16", {}, 150)
        stemflow_bench(b, model + ".fp16", "float16 model", {}, 150)


def part_variants(b):
    for model in ("htdemucs", "bs_roformer"):
        for label, env in VARIANTS:
            if model == "bs_roformer" and label == "cuDNN heuristic search":
                continue  # a RoFormer has no convolutions
            stemflow_bench(b, model, label, env, 150)


def stemflow_separate(b, model, label, env, song, out_name, limit_s, device=None):
    """`stemflow separate` of `song` twice (the first builds and caches the session); the
    second run's wall time and GPU memory are kept. Returns the stem folder."""
    out = os.path.join(b.work, "stems", out_name)
    argv = [b.args.sf, "separate", song, "--model", model_path(b, model), "--device",
            device or b.args.device, "--strict-device", "-o", out, "--bit-depth", "32f",
            "--quiet"]
    result = None
    for attempt in ("cold", "warm"):
        shutil.rmtree(out, ignore_errors=True)
        result = b.run(f"separate {model} {label} ({attempt})", argv, limit_s, env=env)
        if not result:
            return None
    b.emit(part="stemflow-separate", model=model, variant=label, song=os.path.basename(song),
           wall_s=round(result[1], 3), gpu_peak_mb=result[2], device=device or b.args.device)
    stem_dir = os.path.join(out, os.path.splitext(os.path.basename(song))[0])
    return stem_dir


def part_stemflow_song(b):
    song = os.path.join(b.work, "song.wav")
    stemflow_separate(b, "htdemucs", "default", {}, song, "ht", 180)
    stemflow_separate(b, "bs_roformer", "float32", {}, song, "rf32", 240)
    stemflow_separate(b, "bs_roformer", "float32, TF32 off", {"STEMFLOW_CUDA_TF32": "0"}, song,
                      "rf32notf32", 240)
    stemflow_separate(b, "bs_roformer.gpu-f16", "GPU graph float16", {}, song, "rfg16", 240)
    stemflow_separate(b, "bs_roformer.fp16", "float16", {}, song, "rf16", 240)


def part_numerics(b):
    """The RoFormer's CUDA stems against MSST's float32 CUDA run (TF32 on and off) and against
    Stemflow's own CPU stems; HTDemucs' CUDA stems against its CPU stems."""
    w = b.work
    clip, cpuclip = os.path.join(w, "clip.wav"), os.path.join(w, "cpuclip.wav")
    msst = os.path.join(w, "msst_clip.npy")
    # `demix` reflects the file's end into the chunks that reach past it, a stream sees silence:
    # compare before the last chunk (MSST's chunk_size of the preset).
    skip = 352800 if b.args.size == "released" else 8192
    for label, env in (("TF32 on", {}), ("TF32 off", {"STEMFLOW_CUDA_TF32": "0"})):
        stems = stemflow_separate(b, "bs_roformer", label, env, clip, "num" + label[-2:], 180)
        if stems and os.path.exists(msst):
            sdr(b, f"Stemflow {b.args.device} float32 {label} vs MSST float32 (vocals)",
                msst, os.path.join(stems, "vocals.wav"), skip)
    # The same model on the CPU, on a shorter clip (a released-size RoFormer is slow there).
    on_cpu = stemflow_separate(b, "bs_roformer", "CPU", {}, cpuclip, "cpu", 420, device="cpu")
    for label, env in (("TF32 on", {}), ("TF32 off", {"STEMFLOW_CUDA_TF32": "0"})):
        on_gpu = stemflow_separate(b, "bs_roformer", label, env, cpuclip, "gpu" + label[-2:], 120)
        if on_cpu and on_gpu:
            sdr(b, f"Stemflow {b.args.device} float32 {label} vs Stemflow CPU (vocals)",
                os.path.join(on_cpu, "vocals.wav"), os.path.join(on_gpu, "vocals.wav"), 0)
    ht_cpu = stemflow_separate(b, "htdemucs", "CPU", {}, cpuclip, "htcpu", 240, device="cpu")
    ht_gpu = stemflow_separate(b, "htdemucs", "default", {}, cpuclip, "htgpu", 120)
    if ht_cpu and ht_gpu:
        for stem in ("drums", "vocals"):
            sdr(b, f"HTDemucs {b.args.device} vs CPU ({stem})",
                os.path.join(ht_cpu, stem + ".wav"), os.path.join(ht_gpu, stem + ".wav"), 0)


def sdr(b, name, reference, estimate, skip_end):
    torch_side(b, "sdr " + name, ["sdr", "--name", name, "--reference", reference,
                                  "--estimate", estimate, "--skip-end", str(skip_end)], 60)


def part_instances(b):
    path = model_path(b, "htdemucs")
    ran = b.run("instances", [b.args.sf, "bench", "--instances", "4", "--model", path,
                              "--device", b.args.device, "--seconds", str(b.args.bench_s),
                              "--json"], 240)
    if ran:
        for row in json.loads(ran[0])["rows"]:
            b.emit(part="instances", gpu_peak_mb=ran[2], **row)


PARTS = [part_environment, part_models, part_songs, part_torch, part_stemflow_bench,
         part_stemflow_song, part_numerics, part_variants, part_instances]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="results.jsonl, gpu-bench.md, log.txt")
    ap.add_argument("--work", default="/tmp/stemflow-gpu-bench", help="checkpoints, models, stems")
    ap.add_argument("--sf", required=True, help="the stemflow CLI")
    ap.add_argument("--python", default=sys.executable, help="Python with torch")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--size", choices=["released", "tiny"], default="released")
    ap.add_argument("--song-s", type=float, default=120.0, help="the song the goals are set for")
    ap.add_argument("--clip-s", type=float, default=30.0, help="numerics against MSST")
    ap.add_argument("--cpu-clip-s", type=float, default=10.0, help="numerics against the CPU")
    ap.add_argument("--bench-s", type=float, default=30.0, help="audio per `stemflow bench`")
    ap.add_argument("--budget-s", type=float, default=500.0, help="all parts together")
    ap.add_argument("--parts", default="", help="comma-separated part names to run (default all)")
    args = ap.parse_args()
    b = Bench(args)
    wanted = [p for p in args.parts.split(",") if p]
    for part in PARTS:
        name = part.__name__.removeprefix("part_")
        if wanted and name not in wanted:
            continue
        b.say(f"== {name} ({b.left_s():.0f} s left)")
        try:
            if part(b) is False:
                b.say(f"{name} failed: the parts after it need it")
                b.report()
                break
        except Exception as error:  # a part's bug must not lose the others' results
            b.emit(part="failed", name=name, reason=repr(error)[:600])
            b.say(f"{name}: {error!r}")
        b.report()
    b.say("done")


if __name__ == "__main__":
    main()
