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
import os
import sys
import time

import numpy as np

from reference_common import command_line, read_wav_f32

SAMPLERATE = 44100

BS_VIPERX_BANDS = [2] * 24 + [4] * 12 + [12] * 8 + [24] * 8 + [48] * 8 + [128, 129]

# The STFT and chunk of the tiny presets (the CI fixtures) and of the released models.
TINY_AUDIO = {"chunk_size": 8192, "n_fft": 256, "hop_length": 64, "sample_rate": SAMPLERATE}
RELEASED_AUDIO = {"chunk_size": 352800, "n_fft": 2048, "hop_length": 441, "sample_rate": SAMPLERATE}


def preset(model_type, audio, layers, bands, dim_head, heads, mask_depth, target, **rest):
    """An MSST config: `layers` (dim, depth, num_stems, freq_transformer_depth,
    linear_transformer_depth); `bands` a BS-RoFormer's `freqs_per_bands` or a Mel-RoFormer's
    `num_bands`; `rest`, the model keys that follow `mask_estimator_depth`. The keys stand in
    MSST's order, which the written YAML keeps."""
    dim, depth, num_stems, freq_depth, linear_depth = layers
    is_mel = model_type == "mel_band_roformer"
    n_fft, hop = audio["n_fft"], audio["hop_length"]
    model = {
        "dim": dim, "depth": depth, "stereo": True, "num_stems": num_stems,
        "time_transformer_depth": 1, "freq_transformer_depth": freq_depth,
        "linear_transformer_depth": linear_depth,
        ("num_bands" if is_mel else "freqs_per_bands"): bands,
        "dim_head": dim_head, "heads": heads, "attn_dropout": 0.1, "ff_dropout": 0.1,
        "flash_attn": True, "dim_freqs_in": n_fft // 2 + 1,
    }
    if is_mel:
        model["sample_rate"] = SAMPLERATE
    model.update({
        "stft_n_fft": n_fft, "stft_hop_length": hop, "stft_win_length": n_fft,
        "stft_normalized": False, "mask_estimator_depth": mask_depth, **rest,
    })
    return {
        "model_type": model_type, "audio": dict(audio), "model": model,
        "instruments": ["vocals", "other"], "target_instrument": target, "num_overlap": 2,
    }


PRESETS = {
    "bs_tiny": preset("bs_roformer", TINY_AUDIO, (16, 2, 2, 2, 0),
                      [4] * 8 + [8] * 4 + [16] * 2 + [33], 8, 2, 2, None,
                      mlp_expansion_factor=1, skip_connection=True),
    "mel_tiny": preset("mel_band_roformer", TINY_AUDIO, (16, 2, 1, 1, 1), 8, 8, 2, 1, "vocals",
                       mlp_expansion_factor=1),
    "bs_viperx": preset("bs_roformer", RELEASED_AUDIO, (512, 12, 1, 1, 0), BS_VIPERX_BANDS,
                        64, 8, 2, "vocals"),
    "mel_viperx": preset("mel_band_roformer", RELEASED_AUDIO, (384, 12, 1, 1, 0), 60, 64, 8, 2,
                         "vocals"),
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


def cmd_compare(args):
    ref = np.load(args.reference)
    names = args.names.split(",")
    frames = ref.shape[-1] - args.skip_end
    for s, name in enumerate(names):
        got = read_wav_f32(os.path.join(args.stems, name + ".wav"))
        difference = got[:, :frames] - ref[s][:, :frames]
        diff = np.abs(difference).max()
        snr = 10 * np.log10((ref[s][:, :frames] ** 2).sum() / max((difference ** 2).sum(), 1e-30))
        print(f"{name}: largest difference {diff:.2e} over {frames} frames, {snr:.1f} dB "
              f"(reference rms {np.sqrt((ref[s] ** 2).mean()):.4f})")


def main():
    parser, sub, _, _ = command_line(__doc__, PRESETS, cmd_checkpoint, cmd_input)
    p = sub.add_parser("reference")
    p.set_defaults(func=cmd_reference)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=0, help="override inference.batch_size")
    p = sub.add_parser("compare")
    p.set_defaults(func=cmd_compare)
    p.add_argument("--stems", required=True, help="a stemflow separate output folder (--bit-depth 32f)")
    p.add_argument("--reference", required=True)
    p.add_argument("--names", required=True, help="the reference's stems in order, comma-separated")
    p.add_argument("--skip-end", type=int, default=0)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
