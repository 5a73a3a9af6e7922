#!/usr/bin/env python3
"""The PyTorch side of bench/gpu (see README.md): random-weight checkpoints at the released sizes
made from a seed, PyTorch demucs `apply_model` and MSST `demix` timed on the same GPU, their GPU
memory, and the SDRs of the numerics comparison. Every subcommand appends one JSON object per
result to --results (results.jsonl), which report.py turns into the table.

It imports models/htdemucs_reference.py and models/roformer_reference.py (the parity scripts,
whose presets are the released hyper-parameters) and MSST's code from $MSST (ccc011a). Runs with
--device cpu too (tiny presets), which is how it is tried without a GPU.
"""
import argparse
import json
import os
import sys
import time
from argparse import Namespace

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models"))
import htdemucs_reference as ht  # noqa: E402
import roformer_reference as rf  # noqa: E402
from reference_common import read_wav_f32, write_wav_f32  # noqa: E402

SAMPLERATE = 44100


def emit(path, **record):
    record["t"] = round(time.time(), 3)
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
    print(json.dumps(record), file=sys.stderr)


def torch_device(name):
    import torch
    return torch.device("cuda" if name.startswith("cuda") else "cpu")


def sync(device):
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize()


def memory_start(device):
    import torch
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def memory_peak_mb(device):
    import torch
    if device.type == "cuda":
        return round(torch.cuda.max_memory_allocated() / 1e6, 1)
    return None


def cmd_checkpoints(args):
    """htdemucs.th and bs_roformer.ckpt (+ .yaml) in --out, from --seed."""
    import torch
    os.makedirs(args.out, exist_ok=True)
    started = time.perf_counter()
    ht_preset, rf_preset = ("htdemucs", "bs_viperx") if args.size == "released" else ("small", "bs_tiny")
    device = "cuda" if args.device.startswith("cuda") and torch.cuda.is_available() else "cpu"
    ht.cmd_checkpoint(Namespace(preset=ht_preset, seed=args.seed, device=device,
                                out=os.path.join(args.out, "htdemucs.th")))
    rf.cmd_checkpoint(Namespace(preset=rf_preset, seed=args.seed,
                                out=os.path.join(args.out, "bs_roformer.ckpt")))
    emit(args.results, part="checkpoints", htdemucs=ht_preset, bs_roformer=rf_preset,
         seconds=round(time.perf_counter() - started, 1))


def cmd_song(args):
    """A deterministic stereo test song as .npy and 32-bit float .wav (and a clip of it)."""
    # Notes cut 4 s after their onset (4.5e-8 from the full song's samples, which take time
    # quadratic in the length: the 120 s song ran past 60 s on an H200 machine).
    x = ht.make_input(args.seconds, 0, args.seed, note_s=4.0)
    np.save(args.out + ".npy", x)
    write_wav_f32(args.out + ".wav", x)


def cmd_demucs(args):
    """apply_model (shifts 0, overlap 0.25, split) on the song, and one model forward of one
    segment (batch 1), timed after a warm-up, with the peak GPU memory."""
    import torch
    device = torch_device(args.device)
    model = ht.load(args.checkpoint).to(device)
    mix = np.load(args.input).astype(np.float32)
    segment = int(model.segment * model.samplerate)
    from demucs.apply import apply_model
    x = torch.from_numpy(mix[:, :segment])[None].to(device)
    with torch.no_grad():
        model(x)  # warm-up (cuDNN picks its algorithms)
        sync(device)
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            model(x)
            sync(device)
            times.append((time.perf_counter() - t) * 1000)
    memory_start(device)
    song = torch.from_numpy(mix)[None]
    with torch.no_grad():
        apply_model(model, song[..., : segment * 2], shifts=0, split=True, overlap=0.25,
                    progress=False, device=device)  # warm-up of the whole path
        sync(device)
        t = time.perf_counter()
        apply_model(model, song, shifts=0, split=True, overlap=0.25, progress=False, device=device)
        sync(device)
        whole_s = time.perf_counter() - t
    emit(args.results, part="torch", name="demucs apply_model", device=args.device,
         segment_ms=round(float(np.median(times)), 2), segment_ms_min=round(min(times), 2),
         song_s=round(whole_s, 3), audio_s=round(mix.shape[1] / SAMPLERATE, 2),
         gpu_peak_mb=memory_peak_mb(device),
         tf32_matmul=torch.backends.cuda.matmul.allow_tf32,
         tf32_cudnn=torch.backends.cudnn.allow_tf32, torch=torch.__version__)


def msst_model(checkpoint, device):
    import torch
    config = rf.load_config(os.path.splitext(checkpoint)[0] + ".yaml")
    model_type = rf.model_type_of(config)
    model = rf.build_model(config, model_type)
    model.load_state_dict(torch.load(checkpoint, map_location="cpu", weights_only=True))
    return config, model_type, model.to(device).eval()


def float32_attention(model):
    """MSST's `Attend` allows only flash attention on CUDA devices of compute capability 8.0 and
    newer (Linux), and flash attention takes no float32: a float32 run there stops with "No
    available kernel". MSST's own set-up for other devices (Windows, older GPUs) allows the
    memory-efficient and math kernels instead; float32 runs use that. Returns how many
    attention modules changed."""
    changed = 0
    for module in model.modules():
        config = getattr(module, "cuda_config", None)
        if config is not None and hasattr(config, "_asdict"):
            module.cuda_config = type(config)(False, True, True)
            changed += 1
    return changed


def cmd_msst(args):
    """MSST's demix on the song: --amp (autocast float16, as MSST ships its configs) or float32,
    batch --batch; timed after a warm-up on one chunk; the output saved with --out."""
    import torch
    from utils.model_utils import demix
    device = torch_device(args.device)
    config, model_type, model = msst_model(args.checkpoint, device)
    config.training.use_amp = bool(args.amp)
    config.inference.batch_size = args.batch
    attention = "MSST's (flash on sm >= 8.0)"
    if not args.amp and device.type == "cuda" and float32_attention(model):
        attention = "memory-efficient or math (flash takes no float32)"
    if not args.tf32 and device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    mix = np.load(args.input).astype(np.float32)
    chunk = config.audio.chunk_size
    demix(config, model, mix[:, : chunk * 2], device, model_type, pbar=False)  # warm-up
    sync(device)
    memory_start(device)
    t = time.perf_counter()
    out = demix(config, model, mix, device, model_type, pbar=False)
    sync(device)
    elapsed = time.perf_counter() - t
    stems = [config.training.target_instrument] if config.training.target_instrument \
        else list(config.training.instruments)
    if args.out:
        np.save(args.out, np.stack([out[s] for s in stems]).astype(np.float32))
    kind = "AMP float16" if args.amp else "float32" + (" TF32" if args.tf32 else "")
    emit(args.results, part="torch", name=f"MSST demix {kind} batch {args.batch}",
         device=args.device, song_s=round(elapsed, 3), audio_s=round(mix.shape[1] / SAMPLERATE, 2),
         gpu_peak_mb=memory_peak_mb(device), amp=bool(args.amp), batch=args.batch,
         tf32=bool(args.tf32), attention=attention, torch=torch.__version__)


def sdr(reference, estimate):
    reference = reference.astype(np.float64)
    error = reference - estimate.astype(np.float64)
    return 10 * np.log10(np.sum(reference ** 2) / max(np.sum(error ** 2), 1e-30))


def cmd_sdr(args):
    """SDR and largest difference of a `stemflow separate --bit-depth 32f` stem (or another .npy)
    against a reference (.npy [S, 2, T] with --index, or a stem .wav), over frames
    [--skip-start, T - --skip-end)."""
    def load(path, index):
        if path.endswith(".wav"):
            return read_wav_f32(path)
        x = np.load(path)
        return x[index] if x.ndim == 3 else x
    reference = load(args.reference, args.index)
    estimate = load(args.estimate, args.index)
    frames = min(reference.shape[1], estimate.shape[1])
    window = slice(args.skip_start, frames - args.skip_end)
    r, e = reference[:, window], estimate[:, window]
    emit(args.results, part="numerics", name=args.name, sdr_db=round(float(sdr(r, e)), 2),
         max_abs_diff=float(np.abs(r - e).max()), frames=int(r.shape[1]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", required=True, help="results.jsonl to append to")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("checkpoints")
    p.add_argument("--out", required=True)
    p.add_argument("--size", choices=["released", "tiny"], default="released")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cuda:0")
    p = sub.add_parser("song")
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", required=True, help="path without extension")
    p = sub.add_parser("demucs")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--repeat", type=int, default=10)
    p = sub.add_parser("msst")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--amp", type=int, default=0)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--tf32", type=int, default=0, help="let PyTorch use TF32 (default: off)")
    p.add_argument("--out")
    p = sub.add_parser("sdr")
    p.add_argument("--name", required=True)
    p.add_argument("--reference", required=True)
    p.add_argument("--estimate", required=True)
    p.add_argument("--index", type=int, default=0)
    p.add_argument("--skip-start", type=int, default=0)
    p.add_argument("--skip-end", type=int, default=0)
    args = parser.parse_args()
    if args.cmd in ("msst", "checkpoints"):
        rf.msst()
    {"checkpoints": cmd_checkpoints, "song": cmd_song, "demucs": cmd_demucs,
     "msst": cmd_msst, "sdr": cmd_sdr}[args.cmd](args)


if __name__ == "__main__":
    main()
