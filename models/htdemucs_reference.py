#!/usr/bin/env python3
"""PyTorch-demucs reference data for Stemflow's HTDemucs converter (random weights, demucs' code).

Meta's HTDemucs weights cannot be fetched where Stemflow is built and tested, so the converter's
parity tests use checkpoints with RANDOM weights, built and saved by demucs itself, and the output
of demucs' own `apply_model` on them. This script makes those files. It is never run by CI or by
`cargo xtask test`: the fixtures it wrote are committed (convert/tests/fixtures/htdemucs/, see the
README.md there for the exact commands and versions).

Run it by hand in a throwaway virtual environment (PyPI's torch for Linux pulls several GB of
CUDA wheels; only the CPU is used):

    python3 -m venv /tmp/torchvenv
    /tmp/torchvenv/bin/pip install torch demucs numpy omegaconf
    /tmp/torchvenv/bin/python models/htdemucs_reference.py checkpoint --preset small --seed 1 --out small.th
    /tmp/torchvenv/bin/python models/htdemucs_reference.py input --seconds 0.9 --extra 123 --seed 7 --out input.npy
    /tmp/torchvenv/bin/python models/htdemucs_reference.py reference --checkpoint small.th --input input.npy --out small_reference.npy

(omegaconf is needed by `demucs.states.serialize_model` and is not a dependency of the demucs
wheel.) Written against demucs 4.1.0 and torch 2.15.0.

Subcommands:
- `checkpoint --preset P --seed N --out FILE.th`: `demucs.htdemucs.HTDemucs(**kwargs)` with the
  preset's keyword arguments, every parameter then randomised so that each branch (DConv and
  transformer LayerScales, frequency embedding, attention biases, norms) changes the output
  measurably, saved exactly as demucs' `tools/export.py` saves a release: `serialize_model(model,
  training_args, half=True)` (float16 state), `kwargs['segment']` set to a `fractions.Fraction`,
  `pkg['metrics'] = (valid, test)`, `torch.save`.
  Presets: `htdemucs` (the released 955717e8's hyper-parameters, 41,984,456 parameters),
  `htdemucs_ft_drums` (same architecture: the four htdemucs_ft sub-models differ from htdemucs only
  in their training), `htdemucs_6s` (5c90dfd2's, 27,414,996 parameters), and `small`, `small6`,
  `small_xfirst`: tiny models with the released structure (nfft 4096, depth 4, so eight frequency
  rows reach the transformer and the branches never merge) that still use every layer kind.
- `reference --checkpoint FILE.th --input IN.npy --out OUT.npy [--overlap 0.25]`: loads the file
  with `demucs.states.load_model` (the path `demucs.pretrained`/`repo` take), and writes
  `apply_model(model, mix[None], shifts=0, split=True, overlap, progress=False)[0]`, float32
  `[S, 2, T]`, on the CPU, single-threaded, WITHOUT demucs.separate's whole-file normalisation.
- `input --seconds S [--extra N] --seed N --out IN.npy`: a deterministic stereo float32 test signal
  `[2, T]` at 44.1 kHz (notes with envelopes, a bass line, noise bursts, peak 0.5).
- `wav --input IN.npy --out IN.wav`: the signal as a 32-bit float WAV for `stemflow separate`.
- `compare --stems DIR --reference OUT.npy --input IN.npy [--sources drums,bass,other,vocals]
  [--whole] [--other residual|model]`: the stems `stemflow separate --bit-depth 32f
  --guitar-piano own` wrote into DIR against the reference, over every frame with `--whole`
  (`stemflow separate`'s default whole-file mode), else away from the last chunk (what a stream,
  `--mode stream`, matches); the largest difference, the SNR in dB, and both halves apart.
- `time --checkpoint FILE.th --input IN.npy [--threads N]`: apply_model as above with torch's
  default threads, printing the wall time and the number of model forward calls; run it under
  `/usr/bin/time -v` for the peak memory.
"""
import os
import copy
import sys
import time
import warnings
from fractions import Fraction

import numpy as np

from reference_common import command_line, read_wav_f32

SOURCES_4 = ["drums", "bass", "other", "vocals"]
SOURCES_6 = ["drums", "bass", "other", "vocals", "guitar", "piano"]
SAMPLERATE = 44100

# demucs conf/config.yaml, section `htdemucs:` (the keys train.get_model passes, in that order).
CONFIG_HTDEMUCS = {
    "channels": 48,
    "channels_time": None,
    "growth": 2,
    "nfft": 4096,
    "wiener_iters": 0,
    "end_iters": 0,
    "wiener_residual": False,
    "cac": True,
    "depth": 4,
    "rewrite": True,
    "multi_freqs": [],
    "multi_freqs_depth": 3,
    "freq_emb": 0.2,
    "emb_scale": 10,
    "emb_smooth": True,
    "kernel_size": 8,
    "stride": 4,
    "time_stride": 2,
    "context": 1,
    "context_enc": 0,
    "norm_starts": 4,
    "norm_groups": 4,
    "dconv_mode": 1,
    "dconv_depth": 2,
    "dconv_comp": 8,
    "dconv_init": 1e-3,
    "bottom_channels": 0,
    "t_layers": 5,
    "t_hidden_scale": 4.0,
    "t_heads": 8,
    "t_dropout": 0.0,
    "t_layer_scale": True,
    "t_gelu": True,
    "t_emb": "sin",
    "t_max_positions": 10000,
    "t_max_period": 10000.0,
    "t_weight_pos_embed": 1.0,
    "t_cape_mean_normalize": True,
    "t_cape_augment": True,
    "t_cape_glob_loc_scale": [5000.0, 1.0, 1.4],
    "t_sin_random_shift": 0,
    "t_norm_in": True,
    "t_norm_in_group": False,
    "t_group_norm": False,
    "t_norm_first": True,
    "t_norm_out": True,
    "t_weight_decay": 0.0,
    "t_lr": None,
    "t_sparse_self_attn": False,
    "t_sparse_cross_attn": False,
    "t_mask_type": "diag",
    "t_mask_random_seed": 42,
    "t_sparse_attn_window": 400,
    "t_global_window": 100,
    "t_sparsity": 0.95,
    "t_auto_sparsity": False,
    "t_cross_first": False,
    "rescale": 0.1,
}

# Overrides per preset. The released ones: demucs/grids/mmi.py (dconv_mode 3, depth 4, t_layers 5,
# t_dropout 0.02, bottom_channels 0 or 512) and MSST's configs/config_musdb18_htdemucs.yaml
# (bottom_channels 512) / config_htdemucs_6stems.yaml (bottom_channels 0), confirmed by the
# released files' sizes (2 bytes a parameter: 41,984,456 and 27,414,996 parameters). The segment
# of all three releases is 39/5 s (tools/export.py sets it from the training batch length).
PRESETS = {
    "htdemucs": dict(sources=SOURCES_4, segment=Fraction(39, 5),
                     kw=dict(dconv_mode=3, t_dropout=0.02, bottom_channels=512)),
    "htdemucs_ft_drums": dict(sources=SOURCES_4, segment=Fraction(39, 5),
                              kw=dict(dconv_mode=3, t_dropout=0.02, bottom_channels=512),
                              weights=[1, 0, 0, 0]),
    "htdemucs_6s": dict(sources=SOURCES_6, segment=Fraction(39, 5),
                        kw=dict(dconv_mode=3, bottom_channels=0)),
    # Tiny, same structure: nfft 4096 and depth 4 (2048 -> 512 -> 128 -> 32 -> 8 frequency rows,
    # four time layers, no merge), DConv in encoder and decoder, frequency embedding, CaC, a
    # GroupNorm from layer 3 on (norm_starts 3), bottom channels (32 -> 40, as 384 -> 512), three
    # transformer layers (self, cross, self). Segment 2/5 s = 17640 samples, not a multiple of 4**4, so the
    # time branch pads.
    "small": dict(sources=SOURCES_4, segment=Fraction(2, 5),
                  kw=dict(channels=4, dconv_mode=3, dconv_comp=2, norm_starts=3,
                          bottom_channels=40, t_layers=3, t_heads=4)),
    # Six sources without bottom channels (like htdemucs_6s): transformer width 32.
    "small6": dict(sources=SOURCES_6, segment=Fraction(2, 5),
                   kw=dict(channels=4, dconv_mode=3, dconv_comp=2, norm_starts=3,
                           bottom_channels=0, t_layers=3, t_heads=4)),
    # Cross attention first (t_cross_first), four layers (cross, self, cross, self).
    "small_xfirst": dict(sources=SOURCES_4, segment=Fraction(2, 5),
                         kw=dict(channels=4, dconv_mode=3, dconv_comp=2, norm_starts=3,
                                 bottom_channels=0, t_layers=4, t_heads=4, t_cross_first=True)),
}


def preset_kwargs(name):
    preset = PRESETS[name]
    kwargs = {"sources": list(preset["sources"]), "audio_channels": 2,
              "samplerate": SAMPLERATE, "segment": preset["segment"]}
    config = copy.deepcopy(CONFIG_HTDEMUCS)
    config.update(preset["kw"])
    kwargs.update(config)
    return kwargs, config


def training_args(name, config, preset):
    """A small stand-in for the OmegaConf training config the releases carry (never read back)."""
    from omegaconf import OmegaConf
    return OmegaConf.create({
        "dset": {"musdb": "/nonexistent/musdbhq", "wav": None, "segment": 10,
                 "samplerate": SAMPLERATE, "channels": 2, "sources": list(preset["sources"]),
                 "normalize": True},
        "model": "htdemucs",
        "htdemucs": config,
        "weights": preset.get("weights", [1.0] * len(preset["sources"])),
        "optim": {"lr": 3e-4, "momentum": 0.9, "beta2": 0.999, "optim": "adam"},
        "epochs": 360,
        "seed": 42,
        "stemflow_note": f"random weights, preset {name}, models/htdemucs_reference.py",
    })


def randomize(model, seed):
    """Perturbs every parameter so that no branch is near-inert (defaults give LayerScales of 1e-3
    and 1e-4 and zero attention biases)."""
    import torch
    from torch import nn
    from demucs.transformer import LayerScale
    from demucs.hdemucs import ScaledEmbedding

    gen = torch.Generator().manual_seed(seed + 1000)

    def randn(p):
        return torch.randn(p.shape, generator=gen, dtype=p.dtype)

    def rand(p):
        return torch.rand(p.shape, generator=gen, dtype=p.dtype)

    with torch.no_grad():
        for module in model.modules():
            own = list(module.named_parameters(recurse=False))
            if not own:
                continue
            if isinstance(module, LayerScale):
                # Transformer layers: 0.5 to 1.5; DConv branches: 0.05 to 0.25 (they would
                # otherwise drown what comes up from the transformer).
                low, span = (0.5, 1.0) if module.channel_last else (0.05, 0.2)
                module.scale.copy_(low + span * rand(module.scale))
            elif isinstance(module, ScaledEmbedding):
                pass  # its nn.Embedding child is handled below
            elif isinstance(module, nn.Embedding):
                # stored / 10, used * 10 * freq_emb (0.2): 0.2 * N(0, 1) on each (row, channel)
                module.weight.copy_(0.1 * randn(module.weight))
            elif isinstance(module, (nn.GroupNorm, nn.LayerNorm)):
                module.weight.copy_(1.0 + 0.25 * randn(module.weight))
                module.bias.copy_(0.1 * randn(module.bias))
            else:
                for _name, p in own:
                    if p.dim() <= 1:  # biases (attention ones start at zero)
                        p.add_(0.05 * randn(p))
                    else:
                        p.add_(0.3 * p.std() * randn(p))


def calibrate(model, seed, device="cpu"):
    """Rescales each decoder layer's transposed convolution weight (or the GroupNorm after it) so
    that what comes up from below is 3 times as loud as the skip connection it meets (with random
    weights it is several times quieter, and the transformer would hardly show in the output), and
    the last layers' so that both branches' outputs have an RMS near 1 before the denormalisation.
    One forward pass per decoder layer on a test signal of one segment."""
    import torch
    length = int(model.segment * model.samplerate)
    mix = torch.from_numpy(make_input(length / SAMPLERATE, 0, seed + 2000)[:, :length])[None]
    mix = mix.to(device)
    model.eval()

    def rms(t):
        return t.pow(2).mean().sqrt().item()

    for layers in (model.decoder, model.tdecoder):
        for index, layer in enumerate(layers):
            seen = {}
            following = layers[index + 1] if index + 1 < len(layers) else None

            def out_hook(_mod, _inp, out):
                seen["out"] = rms(out[0])
            hooks = [layer.register_forward_hook(out_hook)]
            if following is not None:
                def skip_hook(_mod, inp):
                    seen["skip"] = rms(inp[1])
                hooks.append(following.register_forward_pre_hook(skip_hook))
            with torch.no_grad():
                model(mix)
            for hook in hooks:
                hook.remove()
            gain = 3.0 * seen["skip"] / seen["out"] if "skip" in seen else 1.0 / seen["out"]
            # A GroupNorm after the transposed convolution would undo a gain put before it. The
            # bias is left as it is (scaled, it would drown the signal in a constant).
            scaled = layer.norm2 if isinstance(layer.norm2, torch.nn.GroupNorm) else layer.conv_tr
            with torch.no_grad():
                scaled.weight.mul_(gain)


def build(name, seed, device="cpu"):
    """The preset's model with random weights, calibrated (on `device`: the GPU bench passes
    "cuda", which only runs the calibration passes faster), returned on the CPU."""
    import torch
    from demucs.htdemucs import HTDemucs
    kwargs, config = preset_kwargs(name)
    torch.manual_seed(seed)
    model = HTDemucs(**copy.deepcopy(kwargs))
    randomize(model, seed)
    calibrate(model.to(device), seed, device)
    return model.to("cpu"), kwargs, config


def cmd_checkpoint(args):
    import torch
    from demucs.states import serialize_model
    model, kwargs, config = build(args.preset, args.seed, getattr(args, "device", "cpu"))
    preset = PRESETS[args.preset]
    # As demucs' tools/export.py: serialize_model(half=True), segment override, metrics.
    pkg = serialize_model(model, training_args(args.preset, config, preset), None, half=True)
    pkg["kwargs"]["segment"] = Fraction(preset["segment"])
    names = preset["sources"]
    valid = {"loss": 0.125, "reco": 0.125, "nsdr": 0.0, **{f"nsdr_{s}": 0.0 for s in names}}
    pkg["metrics"] = (valid, None)
    torch.save(pkg, args.out)
    count = sum(p.numel() for p in model.parameters())
    print(f"{args.out}: preset {args.preset}, {count} parameters, "
          f"{len(pkg['state'])} state entries", file=sys.stderr)


def load(path):
    from demucs.states import load_model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = load_model(path)
    model.eval()
    return model


def run_apply(model, mix, overlap):
    """apply_model on a [2, T] float32 array; returns ([S, 2, T] float32, forward calls)."""
    import torch
    from demucs.apply import apply_model
    calls = []
    original = model.forward

    def counted(x):
        calls.append(tuple(x.shape))
        return original(x)

    model.forward = counted
    try:
        with torch.no_grad():
            out = apply_model(model, torch.from_numpy(mix)[None], shifts=0, split=True,
                              overlap=overlap, progress=False)
    finally:
        del model.forward
    return out[0].numpy().astype(np.float32), calls


def cmd_reference(args):
    import torch
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    model = load(args.checkpoint)
    mix = np.load(args.input).astype(np.float32)
    assert mix.ndim == 2 and mix.shape[0] == 2, mix.shape
    out, calls = run_apply(model, mix, args.overlap)
    np.save(args.out, out)
    print(f"{args.out}: {out.shape} float32, {len(calls)} forward calls of {calls[0]}, "
          f"max |y| {np.abs(out).max():.4f}, rms {np.sqrt(np.mean(out ** 2)):.4f}",
          file=sys.stderr)


def cmd_time(args):
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model = load(args.checkpoint)
    mix = np.load(args.input).astype(np.float32)
    t1 = time.perf_counter()
    out, calls = run_apply(model, mix, args.overlap)
    t2 = time.perf_counter()
    if args.out:
        np.save(args.out, out)
    print(f"threads {torch.get_num_threads()}, load {t1 - t0:.2f} s, apply_model {t2 - t1:.2f} s "
          f"for {mix.shape[1] / SAMPLERATE:.2f} s of audio, {len(calls)} forward calls of "
          f"{calls[0]}", file=sys.stderr)


def make_input(seconds, extra, seed, note_s=None):
    """A test song. Each note rings to the end of the song (as the committed fixtures were made)
    or, with `note_s`, for that many seconds: the same song but for the tails below
    exp(-note_s / 0.25) of a note's peak, and linear rather than quadratic in the length (the
    120 s song of bench/gpu: seconds instead of minutes)."""
    rng = np.random.default_rng(seed)
    n = int(round(seconds * SAMPLERATE)) + extra
    t = np.arange(n) / SAMPLERATE
    out = np.zeros((2, n))
    # Notes: A minor pentatonic, 4 harmonics, attack/decay envelopes, random pan.
    notes = [220.0 * 2 ** (k / 12) for k in (0, 3, 5, 7, 10, 12, 15)]
    step = 0.15
    for start in np.arange(0.0, seconds + extra / SAMPLERATE, step):
        f0 = notes[rng.integers(len(notes))] * (2 if rng.random() < 0.3 else 1)
        pan = rng.uniform(0.15, 0.85)
        amp = rng.uniform(0.2, 0.6)
        # Before its onset a note's envelope is exactly 0, so leaving those samples out
        # changes nothing; with `note_s` its tail is cut.
        span = slice(0, n) if note_s is None else slice(
            int(start * SAMPLERATE), min(n, int((start + note_s) * SAMPLERATE)))
        rel = np.maximum(t[span] - start, 0.0)  # 0 before the onset: the envelope is 0 there
        env = (1 - np.exp(-rel / 0.005)) * np.exp(-rel / 0.25)
        tone = sum(np.sin(2 * np.pi * f0 * h * t[span] + rng.uniform(0, 2 * np.pi)) / h ** 1.5
                   for h in range(1, 5))
        out[0, span] += amp * (1 - pan) * env * tone
        out[1, span] += amp * pan * env * tone
    # Bass: a slow line with a little detune between channels.
    bass = 55.0 * np.where((t // 0.3) % 2 == 0, 1.0, 1.5)
    phase = 2 * np.pi * np.cumsum(bass) / SAMPLERATE
    out[0] += 0.5 * np.sin(phase)
    out[1] += 0.5 * np.sin(phase * 1.002 + 0.3)
    # Noise bursts (hi-hat like) every 0.075 s, and a little background noise.
    burst = np.exp(-((t % 0.075) / 0.004))
    noise = rng.standard_normal((2, n))
    hp = noise - np.concatenate([noise[:, :1], noise[:, :-1]], axis=1)
    out += 0.15 * burst * hp + 0.01 * noise
    out *= 0.5 / np.abs(out).max()
    return out.astype(np.float32)


def cmd_input(args):
    x = make_input(args.seconds, args.extra, args.seed)
    np.save(args.out, x)
    print(f"{args.out}: {x.shape} float32, peak {np.abs(x).max():.3f}", file=sys.stderr)


def cmd_compare(args):
    """Stemflow's stems (a `stemflow separate` output folder) against an apply_model reference,
    frame by frame: over every frame (`--whole`: `stemflow separate`'s whole-file mode, which
    chunks the file's end as apply_model does), else before the first chunk that reaches past the
    file's end (apply_model gives such a chunk audio from before it, a stream the silence after
    the end). `--other model`: other.wav is the model's own `other`, not the residual."""
    reference = np.load(args.reference)
    mix = np.load(args.input)
    sources = args.sources.split(",")
    frames = mix.shape[1]
    stride = int((1 - args.overlap) * args.segment)
    valid = ((frames - args.segment) // stride + 1) * stride if frames >= args.segment else 0
    compared = frames if args.whole else valid
    routed = {"vocals", "drums", "bass", "guitar", "piano"}
    worst = 0.0
    for stem in ["vocals", "drums", "bass", "guitar", "piano", "other"]:
        path = os.path.join(args.stems, stem + ".wav")
        if not os.path.exists(path):
            continue
        got = read_wav_f32(path)
        if stem == "other" and args.other == "residual":
            expected = mix - sum(reference[i] for i, s in enumerate(sources) if s in routed)
        else:
            expected = reference[sources.index(stem)]
        difference = got[:, :compared] - expected[:, :compared]
        error = np.abs(difference).max()
        worst = max(worst, error)
        snr = 10 * np.log10((expected[:, :compared] ** 2).sum() / max((difference ** 2).sum(), 1e-30))
        tail = np.abs(got[:, valid:] - expected[:, valid:]).max() if valid < frames else 0.0
        print(f"{stem:7s} max |difference| {error:.2e} over {compared} of {frames} frames "
              f"({snr:.1f} dB; before frame {valid}: "
              f"{np.abs(got[:, :valid] - expected[:, :valid]).max():.2e}, after: {tail:.2e}; "
              f"reference peak {np.abs(expected).max():.3f})")
    print(f"largest difference {worst:.2e}")


def main():
    parser, sub, checkpoint, signal = command_line(__doc__, PRESETS, cmd_checkpoint, cmd_input)
    checkpoint.add_argument("--device", default="cpu", help="where the calibration passes run (cuda: faster)")
    signal.add_argument("--extra", type=int, default=0, help="extra samples after the seconds")
    p = sub.add_parser("reference")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--overlap", type=float, default=0.25)
    p.set_defaults(func=cmd_reference)
    p = sub.add_parser("time")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--overlap", type=float, default=0.25)
    p.add_argument("--threads", type=int, default=0, help="0: torch's default")
    p.add_argument("--out")
    p.set_defaults(func=cmd_time)
    p = sub.add_parser("compare")
    p.add_argument("--stems", required=True, help="a stemflow separate output folder (--bit-depth 32f)")
    p.add_argument("--reference", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--sources", default="drums,bass,other,vocals")
    p.add_argument("--whole", action="store_true", help="compare every frame")
    p.add_argument("--other", choices=["residual", "model"], default="residual")
    p.add_argument("--segment", type=int, default=343980)
    p.add_argument("--overlap", type=float, default=0.25)
    p.set_defaults(func=cmd_compare)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
