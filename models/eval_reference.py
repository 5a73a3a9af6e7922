#!/usr/bin/env python3
"""museval's numbers for `stemflow eval`, on small synthetic tracks generated from integers.

`stemflow eval` reports each stem's SDR as museval computes it for MUSDB18 (BSSEval v4 as
`museval.eval_mus_track` runs it: 1 s windows and hops, the median over the windows) and the
MDX challenge's uSDR. This script makes tracks and "estimates" from a 32-bit integer generator
that Stemflow's test (`cli/tests/eval.rs`) repeats sample for sample (so no audio is committed),
runs museval's own `eval_mus_track` on them and writes its scores to a small JSON file (NaN
as null). It is
never run by CI or `cargo xtask test`: the JSON is committed (cli/tests/fixtures/eval/, whose
README.md gives the command and versions).

    python models/eval_reference.py --out cli/tests/fixtures/eval/museval.json

The generator (mirrored in cli/tests/eval.rs, `Track::generate`):
- `lcg(seed)`: x ← (1664525·x + 1013904223) mod 2³², the value `x >> 16`;
- `noise(seed, n, a)`: n values `(x >> 16) % (2a + 1) − a` of one lcg;
- a reference stem (vocals, drums, bass, other: k = 0..3) of a track with seed s: left =
  noise(s·16 + k, n, AMPLITUDE[k]), right = (left + noise(s·16 + k + 8, n, AMPLITUDE[k])) >> 1
  (an arithmetic shift); then the track's silences set spans to 0;
- its estimate: ref_k + (ref_{k+1 mod 4} >> 3) + noise(s·16 + k + 4, n, 600) (both channels,
  the noise the same on both), clipped to int16, then 0 over the track's muted spans; the
  mixture is the sum of the references;
- samples are int16 values; audio is value / 32768 (what soundfile reads from a 16-bit WAV).
"""
import argparse
import collections
import json

import numpy as np

STEMS = ["vocals", "drums", "bass", "other"]
AMPLITUDE = [6000, 5000, 4000, 3000]

# name, rate, frames, seed, silences (stem, start, end), muted estimates (stem, start, end)
TRACKS = [
    ("Alpha", 44100, 198_450, 1, [("vocals", 44_100, 88_200)], [("drums", 88_200, 132_300)]),
    ("Beta", 22050, 49_613, 2, [("bass", 0, 30_000), ("other", 40_000, 49_613)], []),
    ("Gamma", 44100, 26_460, 3, [], []),
    ("Delta", 44100, 60_000, 4, [("bass", 0, 60_000)], []),
]


def noise(seed, n, amplitude):
    x = seed & 0xFFFFFFFF
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        x = (1664525 * x + 1013904223) & 0xFFFFFFFF
        out[i] = ((x >> 16) % (2 * amplitude + 1)) - amplitude
    return out


def generate(rate, frames, seed, silences, muted):
    refs = []
    for k, stem in enumerate(STEMS):
        left = noise(seed * 16 + k, frames, AMPLITUDE[k])
        right = (left + noise(seed * 16 + k + 8, frames, AMPLITUDE[k])) >> 1
        ref = np.stack([left, right], axis=1)
        for name, start, end in silences:
            if name == stem:
                ref[start:end] = 0
        refs.append(ref)
    ests = []
    for k, stem in enumerate(STEMS):
        est = refs[k] + (refs[(k + 1) % 4] >> 3) + noise(seed * 16 + k + 4, frames, 600)[:, None]
        est = np.clip(est, -32768, 32767)
        for name, start, end in muted:
            if name == stem:
                est[start:end] = 0
        ests.append(est)
    return [r / 32768.0 for r in refs], [e / 32768.0 for e in ests]


class Target:
    def __init__(self, audio):
        self.audio = audio


class FakeTrack:
    """What eval_mus_track reads of a musdb Track."""
    def __init__(self, name, rate, refs):
        self.name = name
        self.rate = rate
        self.subset = "test"
        self.targets = collections.OrderedDict((s, Target(r)) for s, r in zip(STEMS, refs))


def usdr(ref, est):
    num = np.sum(np.square(ref)) + 1e-7
    den = np.sum(np.square(ref - est)) + 1e-7
    return float(10 * np.log10(num / den))


def nan_to_null(value):
    """JSON has no NaN: museval's NaN windows and scores become null."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: nan_to_null(v) for k, v in value.items()}
    if isinstance(value, list):
        return [nan_to_null(v) for v in value]
    return value


def main():
    import museval
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    results = {"museval": museval.__version__ if hasattr(museval, "__version__") else "0.4.1",
               "numpy": np.__version__, "tracks": []}
    for name, rate, frames, seed, silences, muted in TRACKS:
        refs, ests = generate(rate, frames, seed, silences, muted)
        track = FakeTrack(name, rate, refs)
        entry = {"name": name, "rate": rate, "frames": frames, "targets": {}}
        try:
            store = museval.eval_mus_track(track, dict(zip(STEMS, ests)))
            for target in store.scores["targets"]:
                sdrs = [float(frame["metrics"]["SDR"]) for frame in target["frames"]]
                entry["targets"][target["name"]] = {
                    "sdr_frames": sdrs,
                    "sdr": float(np.nanmedian(np.array(sdrs, dtype=float))),
                }
        except ValueError as error:
            entry["error"] = str(error).split(".")[0]
        for stem, ref, est in zip(STEMS, refs, ests):
            entry["targets"].setdefault(stem, {})["usdr"] = usdr(ref, est)
        results["tracks"].append(entry)
        print(name, {k: round(v.get("sdr", float("nan")), 4) for k, v in entry["targets"].items()},
              entry.get("error", ""))
    with open(args.out, "w") as f:
        json.dump(nan_to_null(results), f, indent=1, allow_nan=False)


if __name__ == "__main__":
    main()
