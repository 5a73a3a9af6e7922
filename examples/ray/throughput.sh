#!/usr/bin/env bash
# Catalogue throughput on this machine: N short songs separated by one `stemflow separate
# --manifest` process and by the Ray example (local Ray, W workers), for each MODEL.
#
#   examples/ray/throughput.sh [N=50] [SECONDS=10] [W=2] [MODELS="builtin spleeter-2stems"]
#
# Needs target/release/stemflow (cargo build --release -p stemflow-cli), target/rayenv (cargo
# xtask test makes it) and, for neural models, the model in the models folder. Prints songs per
# hour and × real time per row; the Ray rows include starting Ray.
set -euo pipefail
cd "$(dirname "$0")/../.."
count=${1:-50}
seconds=${2:-10}
workers=${3:-2}
models=${4:-"builtin spleeter-2stems"}
stemflow=$PWD/target/release/stemflow
python=$PWD/target/rayenv/bin/python
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# N different songs: the demo song rendered once, cut at N different offsets, each gained
# differently so no two inputs have the same content.
"$stemflow" demo -o "$work/demo" --duration-s $((seconds + count)) > /dev/null
mkdir -p "$work/songs"
"$python" - "$work" "$count" "$seconds" <<'EOF'
import struct, sys
work, count, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# A minimal RIFF reader and writer: the demo song is 32-bit float (WAVE_FORMAT_EXTENSIBLE).
data = open(f"{work}/demo/demo-song.wav", "rb").read()
chunks, at = {}, 12
while at + 8 <= len(data):
    cid, size = data[at:at + 4], struct.unpack("<I", data[at + 4:at + 8])[0]
    chunks[cid] = data[at + 8:at + 8 + size]
    at += 8 + size + (size & 1)
fmt, audio = chunks[b"fmt "], chunks[b"data"]
channels, rate = struct.unpack("<HI", fmt[2:8])
frame_bytes = struct.unpack("<H", fmt[12:14])[0]
lines = []
for i in range(count):
    chunk = audio[i * rate * frame_bytes:(i + seconds) * rate * frame_bytes]
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(chunk)) + chunk
    open(f"{work}/songs/song{i:03}.wav", "wb").write(b"RIFF" + struct.pack("<I", len(body)) + body)
    lines.append('{"input": "songs/song%03d.wav"}' % i)
open(f"{work}/songs.jsonl", "w").write("\n".join(lines) + "\n")
EOF

audio_s=$((count * seconds))
report() {
    local label=$1 start=$2 end=$3
    python3 -c "
wall = ($end - $start) / 1e9
print(f'{\"$label\":<36} {wall:8.1f} s  {$count * 3600 / wall:9.0f} songs/h  {$audio_s / wall:7.1f}x real time')"
}
printf '%-36s %10s  %16s  %15s\n' "$count songs × $seconds s" "wall" "throughput" "speed"
for model in $models; do
    rm -rf "$work/plain" "$work/ray" "$work/results"
    start=$(date +%s%N)
    "$stemflow" separate --manifest "$work/songs.jsonl" -o "$work/plain" --model "$model" --json > "$work/plain.jsonl"
    report "$model, one process" "$start" "$(date +%s%N)"
    start=$(date +%s%N)
    "$python" examples/ray/stemflow_ray.py --manifest "$work/songs.jsonl" --output "$work/ray" \
        --results "$work/results" --stemflow "$stemflow" --workers "$workers" --local -- --model "$model" \
        > "$work/ray.log" 2>&1 || { cat "$work/ray.log"; exit 1; }
    report "$model, Ray ($workers workers)" "$start" "$(date +%s%N)"
done
