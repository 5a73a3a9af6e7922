#!/usr/bin/env python3
"""MSST reference data for Stemflow's RoFormer converter (random weights, MSST's own code).

The released RoFormer weights cannot be fetched where Stemflow is built and tested, so the
converter's parity tests use checkpoints with RANDOM weights, built by MSST's own model classes
(`models/bs_roformer/bs_roformer.py` `BSRoformer`, `mel_band_roformer.py` `MelBandRoformer`) and
saved as MSST saves them (`torch.save(model.state_dict())`), and the output of MSST's own
`utils/model_utils.py` `demix` on them. This script makes those files. It is never run by CI or
by `cargo xtask test`: the fixtures it wrote are committed (convert/tests/fixtures/roformer/, see
the README.md there for the exact commands and versions).

Run it by hand in a throwaway virtual environment with a checkout of MSST (the `models/` and
`utils/` folders of commit ccc011a are enough):

    python3 -m venv /tmp/torchvenv
    /tmp/torchvenv/bin/pip install torch numpy einops rotary_embedding_torch beartype librosa \
        ml_collections pyyaml tqdm
    export MSST=/path/to/Music-Source-Separation-Training
    P="/tmp/torchvenv/bin/python models/roformer_reference.py"
    $P checkpoint --preset bs_tiny --seed 1 --out bs_tiny.ckpt      # also writes bs_tiny.yaml
    $P input --seconds 0.45 --seed 7 --out input.npy
    $P reference --checkpoint bs_tiny.ckpt --input input.npy --out bs_tiny_reference.npy

Subcommands:
- `checkpoint --preset P --seed N --out FILE.ckpt`: the preset's MSST config written next to it
  as FILE.yaml (MSST's layout, `!!python/tuple` tags), the model built from it by MSST's class,
  every parameter randomised (norm gains 1 ± 0.25, biases N(0, 0.05), linear weights at their
  init scale, linear-attention temperatures N(0, 0.3)), `torch.save(model.state_dict())`.
  Presets: `bs_tiny` and `mel_tiny` (the CI fixtures: every layer kind at a tiny size),
  `bs_viperx` (model_bs_roformer_ep_317_sdr_12.9755's config) and `mel_viperx`
  (model_mel_band_roformer_ep_3005_sdr_11.4360's).
- `input --seconds S --seed N --out IN.npy`: a deterministic stereo float32 test signal `[2, T]`.
- `reference --checkpoint FILE.ckpt --input IN.npy --out OUT.npy [--threads N]
  [--batch-size B]`: MSST's `demix(config, model, mix, 'cpu', model_type)` (the config's
  `inference.batch_size`, 1 in the presets, or B), float32 `[S, 2, T]` in the config's stem
  order, printing the wall time.
- `wav --input IN.npy --out IN.wav`: the signal as a 32-bit float WAV for `stemflow separate`.
- `compare --stems DIR --reference OUT.npy --names vocals,other [--skip-end N]`: stems written by
  `stemflow separate --bit-depth 32f` against the reference (largest absolute difference).
"""
import argparse
import os
import struct
import sys
import time

import numpy as np

SAMPLERATE = 44100

BS_VIPERX_BANDS = [2] * 24 + [4] * 12 + [12] * 8 + [24] * 8 + [48] * 8 + [128, 129]

PRESETS = {
    "bs_tiny": {
        "model_type": "bs_roformer",
        "audio": {"chunk_size": 8192, "n_fft": 256, "hop_length": 64, "sample_rate": SAMPLERATE},
        "model": {
            "dim": 16, "depth": 2, "stereo": True, "num_stems": 2,
            "time_transformer_depth": 1, "freq_transformer_depth": 2,
            "linear_transformer_depth": 0,
            "freqs_per_bands": [4] * 8 + [8] * 4 + [16] * 2 + [33],
            "dim_head": 8, "heads": 2, "attn_dropout": 0.1, "ff_dropout": 0.1,
            "flash_attn": True, "dim_freqs_in": 129, "stft_n_fft": 256, "stft_hop_length": 64,
            "stft_win_length": 256, "stft_normalized": False, "mask_estimator_depth": 2,
            "mlp_expansion_factor": 1, "skip_connection": True,
        },
        "instruments": ["vocals", "other"], "target_instrument": None, "num_overlap": 2,
    },
    "mel_tiny": {
        "model_type": "mel_band_roformer",
        "audio": {"chunk_size": 8192, "n_fft": 256, "hop_length": 64, "sample_rate": SAMPLERATE},
        "model": {
            "dim": 16, "depth": 2, "stereo": True, "num_stems": 1,
            "time_transformer_depth": 1, "freq_transformer_depth": 1,
            "linear_transformer_depth": 1, "num_bands": 8,
            "dim_head": 8, "heads": 2, "attn_dropout": 0.1, "ff_dropout": 0.1,
            "flash_attn": True, "dim_freqs_in": 129, "sample_rate": SAMPLERATE,
            "stft_n_fft": 256, "stft_hop_length": 64, "stft_win_length": 256,
            "stft_normalized": False, "mask_estimator_depth": 1, "mlp_expansion_factor": 1,
        },
        "instruments": ["vocals", "other"], "target_instrument": "vocals", "num_overlap": 2,
    },
    "bs_viperx": {
        "model_type": "bs_roformer",
        "audio": {"chunk_size": 352800, "n_fft": 2048, "hop_length": 441, "sample_rate": SAMPLERATE},
        "model": {
            "dim": 512, "depth": 12, "stereo": True, "num_stems": 1,
            "time_transformer_depth": 1, "freq_transformer_depth": 1,
            "linear_transformer_depth": 0, "freqs_per_bands": BS_VIPERX_BANDS,
            "dim_head": 64, "heads": 8, "attn_dropout": 0.1, "ff_dropout": 0.1,
            "flash_attn": True, "dim_freqs_in": 1025, "stft_n_fft": 2048, "stft_hop_length": 441,
            "stft_win_length": 2048, "stft_normalized": False, "mask_estimator_depth": 2,
        },
        "instruments": ["vocals", "other"], "target_instrument": "vocals", "num_overlap": 2,
    },
    "mel_viperx": {
        "model_type": "mel_band_roformer",
        "audio": {"chunk_size": 352800, "n_fft": 2048, "hop_length": 441, "sample_rate": SAMPLERATE},
        "model": {
            "dim": 384, "depth": 12, "stereo": True, "num_stems": 1,
            "time_transformer_depth": 1, "freq_transformer_depth": 1,
            "linear_transformer_depth": 0, "num_bands": 60,
            "dim_head": 64, "heads": 8, "attn_dropout": 0.1, "ff_dropout": 0.1,
            "flash_attn": True, "dim_freqs_in": 1025, "sample_rate": SAMPLERATE,
            "stft_n_fft": 2048, "stft_hop_length": 441, "stft_win_length": 2048,
            "stft_normalized": False, "mask_estimator_depth": 2,
        },
        "instruments": ["vocals", "other"], "target_instrument": "vocals", "num_overlap": 2,
    },
}


def msst():
    root = os.environ.get("MSST")
    if not root:
        sys.exit("set MSST to a checkout of Music-Source-Separation-Training (models/, utils/)")
    sys.path.insert(0, root)


def yaml_text(preset):
    """The preset as an MSST YAML config (block lists, tuples tagged as MSST's are)."""
    def scalar(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if v is None:
            return "null"
        return str(v)

    lines = ["audio:"]
    lines += [f"  {k}: {scalar(v)}" for k, v in preset["audio"].items()]
    lines += ["", "model:"]
    for k, v in preset["model"].items():
        if isinstance(v, list):
            lines.append(f"  {k}: !!python/tuple")
            lines += [f"  - {x}" for x in v]
        else:
            lines.append(f"  {k}: {scalar(v)}")
    lines += ["", "training:", "  instruments:"]
    lines += [f"  - {x}" for x in preset["instruments"]]
    lines.append(f"  target_instrument: {scalar(preset['target_instrument'])}")
    lines.append("  use_amp: true")
    lines += ["", "inference:", "  batch_size: 1", f"  num_overlap: {preset['num_overlap']}", ""]
    return "\n".join(lines)


def load_config(path):
    import yaml
    from ml_collections import ConfigDict
    with open(path) as f:
        return ConfigDict(yaml.load(f, Loader=yaml.FullLoader))


def build_model(config, model_type):
    msst()
    if model_type == "bs_roformer":
        from models.bs_roformer.bs_roformer import BSRoformer as cls
    else:
        from models.bs_roformer.mel_band_roformer import MelBandRoformer as cls
    return cls(**dict(config.model))


def model_type_of(config):
    return "mel_band_roformer" if "num_bands" in config.model else "bs_roformer"


def randomize(model, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            shape = p.shape
            if name.endswith("gamma"):
                p.copy_(1 + 0.25 * torch.randn(shape, generator=g))
            elif name.endswith("temperature"):
                p.copy_(0.3 * torch.randn(shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn(shape, generator=g))
            elif name.endswith("freqs"):
                continue
            elif p.ndim == 2:
                p.copy_(torch.randn(shape, generator=g) / np.sqrt(shape[1]))


def cmd_checkpoint(args):
    import torch
    torch.manual_seed(args.seed)
    preset = PRESETS[args.preset]
    yaml_path = os.path.splitext(args.out)[0] + ".yaml"
    with open(yaml_path, "w") as f:
        f.write(yaml_text(preset))
    config = load_config(yaml_path)
    model = build_model(config, preset["model_type"])
    randomize(model, args.seed)
    torch.save(model.state_dict(), args.out)
    count = sum(p.numel() for p in model.parameters())
    print(f"{args.out}: {preset['model_type']}, {count:,} parameters; config {yaml_path}")


def cmd_input(args):
    rng = np.random.default_rng(args.seed)
    n = int(args.seconds * SAMPLERATE)
    t = np.arange(n) / SAMPLERATE
    x = np.zeros((2, n))
    for _ in range(6):
        f0 = rng.uniform(80, 2000)
        start = rng.uniform(0, t[-1])
        env = np.exp(-3 * np.maximum(t - start, 0)) * (t >= start)
        pan = rng.uniform(0.2, 0.8)
        tone = np.sin(2 * np.pi * f0 * t) + 0.3 * np.sin(2 * np.pi * 2 * f0 * t)
        x[0] += pan * env * tone
        x[1] += (1 - pan) * env * tone
    x += 0.05 * rng.standard_normal((2, n))
    x *= 0.5 / np.abs(x).max()
    np.save(args.out, x.astype(np.float32))


def cmd_reference(args):
    import torch
    torch.set_num_threads(args.threads)
    msst()
    from utils.model_utils import demix
    yaml_path = os.path.splitext(args.checkpoint)[0] + ".yaml"
    config = load_config(yaml_path)
    if args.batch_size:
        config.inference.batch_size = args.batch_size
    model_type = model_type_of(config)
    model = build_model(config, model_type)
    model.load_state_dict(torch.load(args.checkpoint, map_location="cpu", weights_only=True))
    model.eval()
    mix = np.load(args.input)
    started = time.perf_counter()
    out = demix(config, model, mix, torch.device("cpu"), model_type, pbar=False)
    elapsed = time.perf_counter() - started
    stems = [config.training.target_instrument] if config.training.target_instrument else list(config.training.instruments)
    result = np.stack([out[s] for s in stems]).astype(np.float32)
    np.save(args.out, result)
    print(f"{args.out}: stems {stems}, shape {result.shape}, demix {elapsed:.1f} s, "
          f"rms {np.sqrt((result ** 2).mean()):.4f}")


def cmd_wav(args):
    x = np.load(args.input).astype(np.float32)
    frames = x.shape[1]
    data = x.T.reshape(-1).tobytes()
    with open(args.out, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE")
        f.write(b"fmt " + struct.pack("<IHHIIHH", 16, 3, 2, SAMPLERATE, SAMPLERATE * 8, 8, 32))
        f.write(b"data" + struct.pack("<I", len(data)) + data)
    print(f"{args.out}: {frames} frames")


def read_wav(path):
    import wave  # noqa: F401  (float WAVs are read by hand)
    data = open(path, "rb").read()
    pos = 12
    fmt = None
    while pos < len(data):
        tag, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        body = data[pos + 8:pos + 8 + size]
        if tag == b"fmt ":
            fmt = struct.unpack("<HHIIHH", body[:16])
        elif tag == b"data":
            assert fmt[0] in (3, 0xFFFE) and fmt[5] == 32, fmt
            return np.frombuffer(body, dtype="<f4").reshape(-1, fmt[1]).T
        pos += 8 + size + (size & 1)
    raise ValueError(path)


def cmd_compare(args):
    ref = np.load(args.reference)
    names = args.names.split(",")
    frames = ref.shape[-1] - args.skip_end
    for s, name in enumerate(names):
        got = read_wav(os.path.join(args.stems, name + ".wav"))
        difference = got[:, :frames] - ref[s][:, :frames]
        diff = np.abs(difference).max()
        snr = 10 * np.log10((ref[s][:, :frames] ** 2).sum() / max((difference ** 2).sum(), 1e-30))
        print(f"{name}: largest difference {diff:.2e} over {frames} frames, {snr:.1f} dB "
              f"(reference rms {np.sqrt((ref[s] ** 2).mean()):.4f})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("checkpoint")
    p.add_argument("--preset", choices=sorted(PRESETS), required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True)
    p = sub.add_parser("input")
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", required=True)
    p = sub.add_parser("reference")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=0, help="override inference.batch_size")
    p = sub.add_parser("wav")
    p.add_argument("--input", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("compare")
    p.add_argument("--stems", required=True)
    p.add_argument("--reference", required=True)
    p.add_argument("--names", required=True)
    p.add_argument("--skip-end", type=int, default=0)
    args = parser.parse_args()
    {"checkpoint": cmd_checkpoint, "input": cmd_input, "reference": cmd_reference,
     "wav": cmd_wav, "compare": cmd_compare}[args.command](args)


if __name__ == "__main__":
    main()
