"""Stemflow over a catalogue on Ray: many machines, one model load per worker.

Ray Data reads the manifest (one JSON object per line: {"input": "a/song.flac", "output": "song"},
paths relative to the manifest) and streams its rows to a pool of long-lived actors. Each actor
holds one `stemflow separate --manifest - --json` process, so the model is loaded once per actor,
not once per file; it writes each row to that process and reads back one result line. The result
lines become a JSON-lines dataset (`--results`). Outputs go to `--output/<name>/` with a
`stemflow-result.json` record, so running the same command again resumes: what is done is skipped.

On this machine (a local Ray with two workers):

    python stemflow_ray.py --manifest songs.jsonl --output stems --results results \\
        --stemflow target/release/stemflow --workers 2 --local

On a cluster (`ray start --head` on one node, `ray start --address HEAD:6379` on the others, the
songs, models and output folder on storage every node mounts at the same path, `stemflow` and
ONNX Runtime installed on every node):

    python stemflow_ray.py --manifest /shared/songs.jsonl --output /shared/stems \\
        --results /shared/results --stemflow /opt/stemflow/stemflow --workers 100 \\
        --cpus-per-worker 8 -- --model /shared/models/htdemucs.onnx

    # one GPU per worker:
    python stemflow_ray.py ... --gpus-per-worker 1 -- --model ... --device cuda:0

Arguments after `--` go to `stemflow separate` unchanged.
"""

import argparse
import collections
import json
import os
import subprocess
import sys


class StemflowWorker:
    """A Ray actor: one long-lived `stemflow separate --manifest - --json` process."""

    def __init__(self, stemflow, output, base, extra_args):
        command = [stemflow, "separate", "--manifest", "-", "--json", "-o", output, *extra_args]
        self.process = subprocess.Popen(
            command,
            cwd=base,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def __call__(self, batch):
        columns = collections.defaultdict(list)
        outputs = batch.get("output")
        for i, given in enumerate(batch["input"]):
            line = {"input": str(given)}
            name = None if outputs is None else outputs[i]
            if isinstance(name, str) and name:
                line["output"] = name
            self.process.stdin.write(json.dumps(line) + "\n")
            self.process.stdin.flush()
            reply = self.process.stdout.readline()
            if not reply:
                code = self.process.poll()
                raise RuntimeError(f"the stemflow worker stopped (exit {code}) at {given}")
            result = json.loads(reply)
            columns["input"].append(result["input"])
            columns["status"].append(result["status"])
            columns["folder"].append(result["folder"] or "")
            columns["outputs"].append(list(result["outputs"]))
            columns["seconds"].append(float(result["seconds"]))
            nan = float("nan")
            columns["audio_seconds"].append(result["audio_seconds"] if result["audio_seconds"] is not None else nan)
            columns["real_time_factor"].append(result["real_time_factor"] if result["real_time_factor"] is not None else nan)
            columns["error"].append(result["error"] or "")
        return dict(columns)

    def __del__(self):
        try:
            self.process.stdin.close()
            self.process.wait(timeout=30)
        except Exception:
            pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", required=True, help="JSON-lines manifest")
    parser.add_argument("--output", required=True, help="folder for the stems (shared storage)")
    parser.add_argument("--results", required=True, help="folder for the JSON-lines results")
    parser.add_argument("--stemflow", default="stemflow", help="the stemflow binary on every node")
    parser.add_argument("--workers", type=int, default=2, help="long-lived actors (models loaded)")
    parser.add_argument("--cpus-per-worker", type=float, default=1.0)
    parser.add_argument("--gpus-per-worker", type=float, default=0.0)
    parser.add_argument("--batch-size", type=int, default=1, help="rows handed to an actor at once")
    parser.add_argument("--local", action="store_true", help="start a local Ray instead of joining one")
    parser.add_argument("stemflow_args", nargs="*", help="after --: arguments for stemflow separate")
    args = parser.parse_args()

    import ray

    manifest = os.path.abspath(args.manifest)
    output = os.path.abspath(args.output)
    stemflow = os.path.abspath(args.stemflow) if os.sep in args.stemflow else args.stemflow
    if args.local:
        # Logical CPUs: one per worker and one for reading the manifest.
        ray.init(
            num_cpus=int(args.workers * args.cpus_per_worker) + 1,
            include_dashboard=False,
            object_store_memory=256 * 1024 * 1024,
            log_to_driver=False,
        )
    else:
        ray.init(address="auto")
    ray.data.DataContext.get_current().enable_progress_bars = False

    rows = ray.data.read_json(manifest)
    results = rows.map_batches(
        StemflowWorker,
        fn_constructor_kwargs={
            "stemflow": stemflow,
            "output": output,
            "base": os.path.dirname(manifest),
            "extra_args": args.stemflow_args,
        },
        compute=ray.data.ActorPoolStrategy(size=args.workers),
        num_cpus=args.cpus_per_worker,
        num_gpus=args.gpus_per_worker,
        batch_size=args.batch_size,
        batch_format="numpy",
    )
    results = results.materialize()
    results.write_json(os.path.abspath(args.results))
    counts = collections.Counter(row["status"] for row in results.iter_rows())
    print(
        f"separated {counts.get('separated', 0)}, skipped {counts.get('skipped', 0)}, "
        f"failed {counts.get('failed', 0)}"
    )
    ray.shutdown()
    return 1 if counts.get("failed", 0) else 0


if __name__ == "__main__":
    sys.exit(main())
