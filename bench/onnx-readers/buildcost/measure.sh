#!/bin/bash
# Clean release build time of each build-cost crate (own target dir, nice'd), 2 runs each.
set -uo pipefail
cd "$(dirname "$0")"
for c in plain prost-checked-in prost-build-protox onnx-protobuf; do
  (cd $c && CARGO_TARGET_DIR=$PWD/target-$c nice -n 10 cargo fetch -q)
  for i in 1 2; do
    rm -rf target-$c
    /usr/bin/time -f "$c	run$i	wall_s=%e	user_s=%U	sys_s=%S	maxrss_KB=%M" \
      bash -c "cd $c && CARGO_TARGET_DIR=$PWD/target-$c nice -n 10 cargo build --release -q" 2>&1 | tail -1
  done
  n=$(cd $c && CARGO_TARGET_DIR=$PWD/target-$c cargo tree -e normal,build --prefix none 2>/dev/null | sort -u | wc -l)
  echo "$c	crates_in_tree=$n"
done
