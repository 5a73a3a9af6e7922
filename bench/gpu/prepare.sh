#!/usr/bin/env bash
# Packs what bench/gpu needs on a GPU machine lent by the `device` tool (no network, no Rust
# there; at most 64 MiB per call) into .gpu/ (git-ignored): ONNX Runtime's CUDA build in parts,
# the release `stemflow` CLI, the pure-Python packages PyTorch demucs and MSST need, and MSST's
# model code. Run from the project root, here; README.md says which `run` calls follow.
#
#   bench/gpu/prepare.sh                 # TORCH_VENV (default /work/venvs/torch) gives the
#                                        # packages; MSST_GIT or MSST_DIR gives MSST (ccc011a)
set -euo pipefail
root=$(git rev-parse --show-toplevel); cd "$root"
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >> "$exclude"
mkdir -p .gpu/parts .gpu/run

# ONNX Runtime's CUDA build (onnxruntime-gpu 1.31.0, the pinned `cuda` flavour): the provider
# library is 284 MB, so it travels xz-compressed in 45 MB parts (a call carries 64 MiB, the working tree included), stashed on the machine.
lib=$(cargo xtask fetch-runtime --flavor cuda 2>&1 | grep -oE '/[^ ]*libonnxruntime\.so[^ ]*' | tail -n 1 || true)
[ -n "$lib" ] || lib=$(find "$root/runtime/cuda" -name 'libonnxruntime.so*' -type f | head -n 1)
dir=$(dirname "$lib"); echo "ONNX Runtime CUDA build: $dir"
cuda="$dir/libonnxruntime_providers_cuda.so"; [ -f "$cuda" ] || { echo "no $cuda" >&2; exit 1; }
if [ ! -s .gpu/parts/cuda.xz.aa ] || [ "$cuda" -nt .gpu/parts/cuda.xz.aa ]; then
  rm -f .gpu/parts/cuda.xz.*
  echo "compressing the CUDA provider (284 MB; minutes on 2 cores)…"
  xz -9 -T0 -c "$cuda" | split -b 45000000 -a 2 - .gpu/parts/cuda.xz.
fi
real=$(readlink -f "$lib"); basename "$real" > .gpu/run/ort.name
xz -9 -T0 -c "$real" > .gpu/run/ort.xz
cp "$dir/libonnxruntime_providers_shared.so" .gpu/run/

# The CLI.
cargo build --release -p stemflow-cli
xz -6 -T0 -c target/release/stemflow > .gpu/run/stemflow.xz

# Pure-Python packages the machine's PyTorch lacks (demucs, MSST's imports), as installed here.
venv=${TORCH_VENV:-/work/venvs/torch}
site=$(ls -d "$venv"/lib/python3*/site-packages | head -n 1)
packages="demucs julius omegaconf beartype rotary_embedding_torch einops ml_collections absl yaml tqdm"
(cd "$site" && tar -czf "$root/.gpu/run/pydeps.tgz" --exclude='__pycache__' --exclude='*.so' $packages)

# MSST's BS-RoFormer and demix (commit ccc011a, as the parity scripts): the package's
# __init__.py is emptied, since it imports the Mel-RoFormer and Conformer variants (librosa).
rm -rf .gpu/msst && mkdir -p .gpu/msst
if [ -n "${MSST_DIR:-}" ]; then
  cp -r "$MSST_DIR/models" "$MSST_DIR/utils" .gpu/msst/
else
  git --git-dir="${MSST_GIT:-/work/.mirror/ZFTurbo+Music-Source-Separation-Training/repo}" \
    archive ccc011abf7f89dd7922bb2888d48493b575c0289 models/bs_roformer utils/model_utils.py \
    | tar -x -C .gpu/msst
fi
: > .gpu/msst/models/bs_roformer/__init__.py
tar -czf .gpu/run/msst.tgz -C .gpu/msst models utils
cp bench/gpu/unpack.sh .gpu/run/

ls -la .gpu/parts .gpu/run
du -sh .gpu/run
echo "Next: the run calls in bench/gpu/README.md (three parts, then the measurement)."
