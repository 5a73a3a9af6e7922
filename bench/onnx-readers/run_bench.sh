#!/bin/bash
# Reproduces the numbers in REPORT.md. Needs big.onnx and small.onnx (gen/make_models.py).
set -euo pipefail
cd "$(dirname "$0")"
export CARGO_TARGET_DIR=$PWD/target
nice -n 10 cargo build --release -q
B=target/release/prost-bench
mkdir -p results
: > results/timings.tsv
for f in small.onnx big.onnx; do
  for t in sig nodes; do
    for v in borrowed prost-vec prost-bytes prost-lite onnx-protobuf; do
      nice -n 10 $B $f $t $v 9 | tee -a results/timings.tsv
    done
  done
  nice -n 10 $B $f sig borrowed-names 9 | tee -a results/timings.tsv
  for v in prost-vec prost-bytes prost-bytes-slice onnx-protobuf; do nice -n 10 $B $f decode $v 7 | tee -a results/timings.tsv; done
  for v in borrowed prost-vec prost-bytes onnx-protobuf; do nice -n 10 $B $f encode $v 7 | tee -a results/timings.tsv; done
done
nice -n 10 $B small.onnx unknown-fields - 1 | tee results/unknown_fields.tsv
# Peak RSS: one run per process; extra = max RSS minus the 'read' baseline of the same file.
: > results/rss.tsv
for f in small.onnx big.onnx; do
  for tv in "read borrowed" "read prost-bytes" "sig borrowed" "sig prost-vec" "sig prost-bytes" "sig prost-lite" \
            "nodes borrowed" "nodes prost-vec" "nodes prost-bytes" "nodes prost-lite" \
            "sig onnx-protobuf" "nodes onnx-protobuf" \
            "decode prost-vec" "decode prost-bytes" "decode prost-bytes-slice" "decode onnx-protobuf" "encode borrowed" "encode prost-vec" "encode prost-bytes" "encode onnx-protobuf"; do
    for i in 1 2 3; do
      kb=$( { /usr/bin/time -f "%M" nice -n 10 $B $f $tv 1 >/dev/null; } 2>&1 | tail -1 )
      printf "%s\t%s\t%s\t%s\n" "$f" "$tv" "$i" "$kb" | tee -a results/rss.tsv
    done
  done
done
