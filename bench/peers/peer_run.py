"""One peer's whole run on one song, as its own tool does it, for `compare.py` to time.

    peer_run.py demucs-onnx     MODEL.onnx SONG.wav OUT_DIR  # demucs-onnx 0.3.4's chunked inference
    peer_run.py pytorch         MODEL.th   SONG.wav OUT_DIR  # demucs 4.0.1's apply_model (as its CLI)
    peer_run.py audio-separator MODEL.onnx SONG.wav OUT_DIR  # audio-separator 0.47.1's CLI on an
                                                             # MDX-Net (build_mdx.py's folder)
    peer_run.py ort-alone       MODEL.onnx SONG.wav OUT_DIR  # ONNX Runtime only: one session, the
                                                             # peers' number of runs, nothing else

Each reads a 16-bit stereo WAV and writes 16-bit WAV stems, so reading and writing are counted as
they are for Stemflow. Prints `runs=N seconds_per_run=S` for ORT alone, `model_runs=N` for
audio-separator.
"""
import os
import sys
import time
import wave
from pathlib import Path

import numpy as np

SOURCES = ["drums", "bass", "other", "vocals"]


def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path)) as f:
        assert f.getnchannels() == 2 and f.getsampwidth() == 2 and f.getframerate() == 44100, path
        data = np.frombuffer(f.readframes(f.getnframes()), dtype="<i2")
    return (data.reshape(-1, 2).T.astype(np.float32) / 32768.0).copy()


def write_stems(stems: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, audio in stems.items():
        pcm = (np.clip(np.asarray(audio), -1.0, 1.0 - 1 / 32768) * 32768).astype("<i2")
        with wave.open(str(out / f"{name}.wav"), "wb") as f:
            f.setnchannels(2)
            f.setsampwidth(2)
            f.setframerate(44100)
            f.writeframes(pcm.T.tobytes())


def mdx_runs(model: Path, frames: int) -> int:
    """The model runs audio-separator 0.47.1's `MDXSeparator.demix` makes on `frames` frames
    (defaults: segment_size = dim_t, hop 1024, overlap 0.25, batch 1), from the sidecar's UVR
    parameters; its second, "match mix" pass runs no model."""
    import json

    params = json.loads(model.with_suffix(".json").read_text())
    trim = params["mdx_n_fft_scale_set"] // 2
    chunk = 1024 * (2 ** params["mdx_dim_t_set"] - 1)
    gen = chunk - 2 * trim
    padded = trim + frames + gen + trim - frames % gen
    step = int(0.75 * chunk)
    return -(-padded // step)


def audio_separator(model: Path, song: Path, out: Path) -> None:
    """audio-separator's own CLI (`audio-separator SONG -m NAME --model_file_dir DIR`), run here so
    that its model runs can be counted. Offline: `build_mdx.py` put the files it would otherwise
    download (`download_checks.json`, `mdx_model_data.json` with this model's hash,
    `vr_model_data.json`) beside the model, and it downloads only what is missing."""
    for name in ["download_checks.json", "mdx_model_data.json", "vr_model_data.json"]:
        if not (model.parent / name).is_file():
            raise SystemExit(f"{model.parent / name} missing (run build_mdx.py): audio-separator "
                             "would download it")
    from audio_separator.separator.architectures.mdx_separator import MDXSeparator
    from audio_separator.utils import cli

    runs = 0
    run_model = MDXSeparator.run_model

    def counted(self, mix, is_match_mix=False):
        nonlocal runs
        runs += not is_match_mix  # the "match mix" pass only takes STFTs
        return run_model(self, mix, is_match_mix=is_match_mix)

    MDXSeparator.run_model = counted
    sys.argv = ["audio-separator", str(song), "-m", model.name, "--model_file_dir", str(model.parent),
                "--output_dir", str(out), "--output_format", "WAV"]
    cli.main()
    print(f"model_runs={runs}")


def main() -> None:
    tool, model, song, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    if tool == "audio-separator":
        return audio_separator(model, song, out)
    mix = read_wav(song)
    if tool == "demucs-onnx":
        from demucs_onnx import inference

        session = inference._make_session(model, ["CPUExecutionProvider"])
        stems = inference._chunked_separate_single(session, SOURCES, mix, progress=False)
        write_stems(stems, out)
    elif tool == "pytorch":
        import torch
        from demucs.apply import apply_model
        from demucs.states import load_model

        torch.set_num_threads(os.cpu_count() or 1)
        net = load_model(torch.load(model, map_location="cpu"))
        net.eval()
        wav = torch.from_numpy(mix)
        # As demucs/separate.py does: normalise, separate (shifts 1, overlap 0.25), restore.
        ref = wav.mean(0)
        wav = (wav - ref.mean()) / ref.std()
        with torch.no_grad():
            sources = apply_model(net, wav[None], shifts=1, split=True, overlap=0.25)[0]
        sources = sources * ref.std() + ref.mean()
        write_stems({name: s.numpy() for name, s in zip(net.sources, sources)}, out)
    elif tool == "ort-alone":
        import onnxruntime as ort

        session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        graph_input = session.get_inputs()[0]
        if len(graph_input.shape) == 4:  # MDX-Net [batch, 4, dim_f, dim_t]: audio-separator's runs
            runs = mdx_runs(model, mix.shape[1])
            chunk = np.zeros((1, *graph_input.shape[1:]), dtype=np.float32)
        else:  # HTDemucs: demucs-onnx's runs
            segment = 343980
            stride = segment - segment // 4
            runs = max(1, -(-mix.shape[1] // stride))
            chunk = np.zeros((1, 2, segment), dtype=np.float32)
        start = time.perf_counter()
        for _ in range(runs):
            session.run(None, {graph_input.name: chunk})
        per_run = (time.perf_counter() - start) / runs
        print(f"runs={runs} seconds_per_run={per_run:.2f}")
    else:
        raise SystemExit(f"unknown tool {tool!r}")


if __name__ == "__main__":
    main()
