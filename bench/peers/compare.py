"""Times Stemflow against the Python tools on the same real-size model and song (issue 17).

    python compare.py --stemflow target/release/stemflow --models DIR --song SONG.wav [--rounds 2]
        [--int8] [--family htdemucs|mdx] [--peers ...]

HTDemucs (the default): DIR holds `htdemucs_random.onnx` and `htdemucs_random.th`
(`build_htdemucs.py`); peers demucs-onnx, pytorch, ort-alone.
MDX-Net (`--family mdx`): DIR holds `UVR-MDX-NET-Inst_HQ_3.onnx` with its sidecar and
audio-separator's model data (`build_mdx.py`); peers audio-separator (0.47.1's CLI, offline) and
ort-alone (as many runs as audio-separator makes); Stemflow writes the same two stems
(`--stems vocals,other`).
Each round runs every tool once, interleaved, as a whole process under `/usr/bin/time` (wall
seconds, peak RSS), CPU only; Stemflow runs with its optimised-graph cache warm (a first, cold
start is timed separately). With `--int8`, Stemflow also runs the model's int8 version
(`stemflow quantize`, written into the scratch folder). Prints a Markdown table with the ratio of
each peer to Stemflow. Not run in CI: `run.sh` sets up the throwaway virtualenv with the peers.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def timed(command: list, env: dict) -> tuple:
    """Runs `command`; returns (wall seconds, peak RSS in GB, its output)."""
    result = subprocess.run(
        ["/usr/bin/time", "-f", "TIME %e %M", *command],
        env=env, capture_output=True, text=True,
    )
    if result.returncode != 0:
        raise SystemExit(f"{command[0]} failed:\n{result.stdout}\n{result.stderr}")
    wall, kb = re.findall(r"TIME ([\d.]+) (\d+)", result.stderr)[-1]
    return float(wall), int(kb) * 1024 / 1e9, result.stdout + result.stderr


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stemflow", required=True, type=Path)
    parser.add_argument("--models", required=True, type=Path)
    parser.add_argument("--song", required=True, type=Path)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--int8", action="store_true", help="also time `stemflow quantize`'s int8 model")
    parser.add_argument("--family", choices=["htdemucs", "mdx"], default="htdemucs",
                        help="htdemucs (build_htdemucs.py's model) or mdx (build_mdx.py's)")
    parser.add_argument("--peers", help="which peers to run (comma-separated); default: all of the "
                        "family's (htdemucs: demucs-onnx,pytorch,ort-alone; mdx: audio-separator,ort-alone)")
    args = parser.parse_args()
    mdx = args.family == "mdx"
    peers = set((args.peers or ("audio-separator,ort-alone" if mdx
                                else "demucs-onnx,pytorch,ort-alone")).split(","))
    stem = "UVR-MDX-NET-Inst_HQ_3" if mdx else "htdemucs_random"
    onnx, th = args.models / f"{stem}.onnx", args.models / f"{stem}.th"
    scratch = Path(tempfile.mkdtemp(prefix="stemflow-peers-"))
    env = dict(os.environ, STEMFLOW_DATA_DIR=str(scratch / "data"))
    python = sys.executable
    # An MDX-Net model has two stems (UVR's primary and its complement); audio-separator writes
    # those two, so Stemflow writes vocals and other (the instrumental) rather than four files.
    stems = ["--stems", "vocals,other"] if mdx else []

    def stemflow(model: Path, out: str) -> list:
        return [str(args.stemflow), "separate", "--quiet", "--model", str(model), *stems,
                "-o", str(scratch / out), str(args.song)]

    def peer(tool: str, model: Path) -> list:
        return [python, str(HERE / "peer_run.py"), tool, str(model), str(args.song), str(scratch / tool)]

    tools = {"Stemflow": stemflow(onnx, "stemflow")}
    if mdx:
        tools["audio-separator 0.47.1"] = peer("audio-separator", onnx)
    else:
        tools["demucs-onnx 0.3.4"] = peer("demucs-onnx", onnx)
        tools["PyTorch demucs 4.0.1"] = peer("pytorch", th)
    tools["ONNX Runtime alone"] = peer("ort-alone", onnx)
    tools = {name: command for name, command in tools.items()
             if name == "Stemflow" or command[2] in peers}
    if args.int8:
        int8 = scratch / f"{stem}.int8.onnx"  # `stemflow quantize` copies the sidecar beside it
        subprocess.run([str(args.stemflow), "quantize", str(onnx), "-o", str(int8)], env=env, check=True)
        tools["Stemflow int8"] = stemflow(int8, "stemflow-int8")
    for name in [n for n in tools if n.startswith("Stemflow")]:
        cold = timed(tools[name], env)
        shutil.rmtree(scratch / tools[name][-2], ignore_errors=True)
        print(f"{name}, first start (optimised-graph cache empty): {cold[0]:.1f} s, {cold[1]:.2f} GB")
    results = {name: [] for name in tools}
    notes = {}
    for round_index in range(args.rounds):
        for name, command in tools.items():
            shutil.rmtree(command[-2] if name.startswith("Stemflow") else command[-1], ignore_errors=True)
            wall, rss, output = timed(command, env)
            results[name].append((wall, rss))
            runs = re.search(r"\bruns=(\d+) seconds_per_run=([\d.]+)", output)
            model_runs = re.search(r"\bmodel_runs=(\d+)", output)
            if runs:
                notes[name] = f"{runs.group(1)} runs × {runs.group(2)} s"
            elif model_runs:
                notes[name] = f"{model_runs.group(1)} model runs"
            print(f"round {round_index + 1}: {name}: {wall:.1f} s, {rss:.2f} GB", flush=True)
    best_stemflow = min(w for w, _ in results["Stemflow"])
    print()
    print("| tool | wall (s) | peak RSS (GB) | best wall ÷ Stemflow's | note |")
    print("|---|---|---|---|---|")
    for name, runs in results.items():
        walls = sorted(w for w, _ in runs)
        rss = max(r for _, r in runs)
        print(f"| {name} | {' / '.join(f'{w:.1f}' for w in walls)} | {rss:.2f} | "
              f"{walls[0] / best_stemflow:.2f} | {notes.get(name, '')} |")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
