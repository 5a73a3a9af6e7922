"""Times Stemflow against the Python tools on the same real-size model and song (issue 17).

    python compare.py --stemflow target/release/stemflow --models DIR --song SONG.wav [--rounds 2]
        [--int8] [--peers demucs-onnx,pytorch,ort-alone]

DIR holds `htdemucs_random.onnx` and `htdemucs_random.th` (`build_htdemucs.py`). Each round runs
every tool once, interleaved, as a whole process under `/usr/bin/time` (wall seconds, peak RSS),
CPU only; Stemflow runs with its optimised-graph cache warm (a first, cold start is timed
separately). With `--int8`, Stemflow also runs the model's int8 version (`stemflow quantize`,
written into the scratch folder). Prints a Markdown table with the ratio of each peer to Stemflow. Not run in CI:
`run.sh` sets up the throwaway virtualenv with the peers.
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
    parser.add_argument("--peers", default="demucs-onnx,pytorch,ort-alone",
                        help="which peers to run (comma-separated)")
    args = parser.parse_args()
    peers = set(args.peers.split(","))
    onnx, th = args.models / "htdemucs_random.onnx", args.models / "htdemucs_random.th"
    scratch = Path(tempfile.mkdtemp(prefix="stemflow-peers-"))
    env = dict(os.environ, STEMFLOW_DATA_DIR=str(scratch / "data"))
    python = sys.executable
    tools = {
        "Stemflow": [str(args.stemflow), "separate", "--quiet", "--model", str(onnx),
                     "-o", str(scratch / "stemflow"), str(args.song)],
        "demucs-onnx 0.3.4": [python, str(HERE / "peer_run.py"), "demucs-onnx", str(onnx),
                              str(args.song), str(scratch / "demucs-onnx")],
        "PyTorch demucs 4.0.1": [python, str(HERE / "peer_run.py"), "pytorch", str(th),
                                 str(args.song), str(scratch / "pytorch")],
        "ONNX Runtime alone": [python, str(HERE / "peer_run.py"), "ort-alone", str(onnx),
                               str(args.song), str(scratch / "ort")],
    }
    tools = {name: command for name, command in tools.items()
             if name == "Stemflow" or command[2] in peers}
    if args.int8:
        int8 = scratch / "htdemucs_random.int8.onnx"
        subprocess.run([str(args.stemflow), "quantize", str(onnx), "-o", str(int8)], env=env, check=True)
        tools["Stemflow int8"] = [str(args.stemflow), "separate", "--quiet", "--model", str(int8),
                                  "-o", str(scratch / "stemflow-int8"), str(args.song)]
    for name in [n for n in tools if n.startswith("Stemflow")]:
        cold = timed(tools[name], env)
        shutil.rmtree(scratch / tools[name][-2], ignore_errors=True)
        print(f"{name}, first start (optimised-graph cache empty): {cold[0]:.1f} s, {cold[1]:.2f} GB")
    results = {name: [] for name in tools}
    notes = {}
    for round_index in range(args.rounds):
        for name, command in tools.items():
            if name.startswith("Stemflow"):
                shutil.rmtree(command[-2], ignore_errors=True)
            wall, rss, output = timed(command, env)
            results[name].append((wall, rss))
            runs = re.search(r"runs=(\d+) seconds_per_run=([\d.]+)", output)
            if runs:
                notes[name] = f"{runs.group(1)} runs × {runs.group(2)} s"
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
