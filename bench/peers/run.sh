#!/usr/bin/env bash
# Peer comparison for issue 17 (not part of CI): sets up a throwaway virtualenv with the Python
# tools, builds the random-weight real-size HTDemucs, and times Stemflow against them.
#
#   bash bench/peers/run.sh SONG.wav [ROUNDS]
#
# Needs ~4 GB of disk for the virtualenv (PyTorch) and ~0.5 GB for the models. PEERS_VENV may name
# an existing virtualenv that already has the packages below.
set -euo pipefail
cd "$(dirname "$0")/../.."
song=${1:?usage: run.sh SONG.wav [ROUNDS]}
rounds=${2:-2}
venv=${PEERS_VENV:-target/peers-venv}
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        "demucs==4.0.1" "demucs-onnx==0.3.4" "torch==2.4.1" "torchaudio==2.4.1" \
        "onnx==1.16.2" "onnxruntime==1.31.0" "numpy<2"
fi
models=target/peer-models
if [ ! -f "$models/htdemucs_random.onnx" ]; then
    "$venv/bin/python" bench/peers/build_htdemucs.py "$models"
fi
cargo build --release -p stemflow-cli
"$venv/bin/python" bench/peers/compare.py --stemflow target/release/stemflow \
    --models "$models" --song "$song" --rounds "$rounds"
