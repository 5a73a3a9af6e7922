#!/usr/bin/env python3
"""Reference outputs of MSST's `ensemble.py` and UVR's ensemble for Stemflow's ensembles.

Stemflow combines several separators' stems as MSST's `ensemble.py` (`average_waveforms`) and
UVR's ensemble mode (`lib_v5/spec_utils.py`: `ensembling`, Max Spec / Min Spec / Average) do. This
script runs their own code on small deterministic inputs and saves what it returns; the engine's
test (`engine/tests/ensemble_parity.rs`) compares. It is never run by CI or `cargo xtask test`:
its output is committed (engine/tests/fixtures/ensemble/, whose README.md gives the commands and
versions).

Run it by hand in a throwaway virtual environment with numpy, librosa and soundfile, a checkout
of MSST (its `ensemble.py`) and one of UVR (its `lib_v5/spec_utils.py`, from which the ensemble
functions are taken as they are, without importing UVR's other modules):

    export MSST=/path/to/Music-Source-Separation-Training UVR=/path/to/ultimatevocalremovergui
    python models/ensemble_reference.py --out engine/tests/fixtures/ensemble

Writes, for each input set (`three`: three members; `two`: two members, the second the first
negated over the first half, so that magnitudes tie):
- `SET_members.npy`: float32 `[M, 2, T]`, the members' stereo stems;
- `SET_msst.npy`: float32 `[K, 2, T]`, `average_waveforms(members, weights, type)` for each of
  MSST_RUNS (type, weights) in order;
- `SET_uvr.npy`: float32 `[3, 2, T]`, UVR's Max Spec, Min Spec and Average of the members.
"""
import argparse
import ast
import importlib
import os

import numpy as np

LENGTH = 4500  # samples: five STFT frames, not a multiple of the hop
MSST_TYPES = ["avg_wave", "median_wave", "min_wave", "max_wave",
              "avg_fft", "median_fft", "min_fft", "max_fft"]
WEIGHTS = {"three": [2.0, 1.0, 0.5], "two": [3.0, 1.0]}


def msst_runs(members):
    """(type, weights) pairs: every type with MSST's default weights (np.ones, as ensemble.py
    passes them when none are given), then the averages with weights (floats, as its argparse
    gives them)."""
    ones = np.ones(members)
    runs = [(t, ones) for t in MSST_TYPES]
    weights = WEIGHTS["three" if members == 3 else "two"]
    runs += [("avg_wave", weights), ("avg_fft", weights)]
    return runs


def members(set_name):
    """Deterministic stereo 'stems' of one source as different models would give them: a shared
    mixture of tones and noise, each member with its own gain, filter and noise."""
    rng = np.random.default_rng(46)
    t = np.arange(LENGTH) / 44100.0
    shared = np.stack([
        0.3 * np.sin(2 * np.pi * 440.0 * t) + 0.1 * np.sin(2 * np.pi * 3100.0 * t),
        0.25 * np.sin(2 * np.pi * 660.0 * t + 0.4) + 0.1 * np.sin(2 * np.pi * 5200.0 * t),
    ]) + 0.05 * rng.standard_normal((2, LENGTH))
    count = 3 if set_name == "three" else 2
    out = []
    for m in range(count):
        gain = 1.0 - 0.2 * m
        own = 0.08 * rng.standard_normal((2, LENGTH))
        smoothed = np.copy(shared)
        smoothed[:, 1:] += (0.3 * m) * shared[:, :-1]
        out.append(gain * smoothed + own)
    out = np.array(out, dtype=np.float32)
    if set_name == "two":
        half = LENGTH // 2
        out[1, :, :half] = -out[0, :, :half]
    return out


def load_msst(msst):
    """MSST's ensemble.py, with one fix: under numpy 2 (which MSST requires) `np.ogrid[...]`
    returns a tuple, and `absmax` (max_fft) fails on `indices.insert(...)`; the fix makes it a
    list, as numpy 1 returned, and changes nothing else."""
    path = os.path.join(msst, "ensemble.py")
    source = open(path).read()
    broken = "indices = np.ogrid[tuple(slice(0, d) for d in dims)]"
    assert source.count(broken) == 2, "ensemble.py is not the expected version"
    source = source.replace(broken, "indices = list(np.ogrid[tuple(slice(0, d) for d in dims)])")
    module = type(importlib)("msst_ensemble")
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def load_uvr(uvr):
    """UVR's ensemble functions, taken from spec_utils.py as they are (its imports pull in UVR's
    GUI-side modules, so only these definitions are executed)."""
    path = os.path.join(uvr, "lib_v5", "spec_utils.py")
    tree = ast.parse(open(path).read())
    wanted = {"ensembling", "wave_to_spectrogram_no_mp", "spectrogram_to_wave_no_mp", "to_shape"}
    body = [node for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name in wanted]
    body += [node for node in tree.body
             if isinstance(node, ast.Assign)
             and any(getattr(t, "id", "") in {"MAX_SPEC", "MIN_SPEC", "AVERAGE"} for t in node.targets)]
    namespace = {"np": np, "librosa": __import__("librosa")}
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), namespace)
    return namespace


def uvr_ensemble(uvr, waves, algorithm):
    """UVR's `ensemble_inputs` without the files: Average is the mean of the waves (all as long
    here), Max/Min Spec go through `ensembling` on `wave_to_spectrogram_no_mp` spectra, then
    `spectrogram_to_wave_no_mp` and `to_shape` (which pads the inverse back to the input's
    length: UVR's inverse STFT is not given the length and stops at the last whole hop)."""
    if algorithm == uvr["AVERAGE"]:
        return sum(list(waves)) / len(waves)
    specs = [uvr["wave_to_spectrogram_no_mp"](w) for w in waves]
    output = uvr["spectrogram_to_wave_no_mp"](uvr["ensembling"](algorithm, specs))
    return uvr["to_shape"](output, waves[0].shape)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    msst = load_msst(os.environ["MSST"])
    uvr = load_uvr(os.environ["UVR"])
    os.makedirs(args.out, exist_ok=True)
    for set_name in ["three", "two"]:
        data = members(set_name)
        np.save(os.path.join(args.out, f"{set_name}_members.npy"), data)
        results = []
        for kind, weights in msst_runs(len(data)):
            result = msst.average_waveforms(data, weights, kind)
            results.append(np.asarray(result, dtype=np.float32))
        np.save(os.path.join(args.out, f"{set_name}_msst.npy"), np.array(results))
        uvr_results = [uvr_ensemble(uvr, data, a)
                       for a in [uvr["MAX_SPEC"], uvr["MIN_SPEC"], uvr["AVERAGE"]]]
        np.save(os.path.join(args.out, f"{set_name}_uvr.npy"),
                np.array(uvr_results, dtype=np.float32))
        print(set_name, data.shape, len(results), "MSST runs, 3 UVR runs")


if __name__ == "__main__":
    main()
