#!/usr/bin/env bash
# Peer comparison for issue 17 (not part of CI): sets up a throwaway virtualenv with the Python
# tools, builds the random-weight real-size model, and times Stemflow against them.
#
#   bash bench/peers/run.sh [--mdx] SONG.wav [ROUNDS]
#
# Default: HTDemucs against demucs-onnx, PyTorch demucs and ONNX Runtime alone. Needs ~4 GB of
# disk for the virtualenv (PyTorch) and ~0.5 GB for the models. PEERS_VENV may name an existing
# virtualenv that already has the packages below.
# --mdx: an MDX-Net of UVR-MDX-NET-Inst_HQ_3's size against audio-separator 0.47.1 and ONNX
# Runtime alone, in a virtualenv of its own (audio-separator needs numpy 2, the demucs peers
# numpy 1): PEERS_MDX_VENV, ~4 GB more (PyTorch again); the model takes 64 MB.
set -euo pipefail
cd "$(dirname "$0")/../.."
family=htdemucs
if [ "${1:-}" = "--mdx" ]; then
    family=mdx
    shift
fi
song=${1:?usage: run.sh [--mdx] SONG.wav [ROUNDS]}
rounds=${2:-2}
if [ "$family" = mdx ]; then
    venv=${PEERS_MDX_VENV:-target/peers-mdx-venv}
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check \
            "audio-separator==0.47.1" "torch==2.4.1" "onnxruntime==1.31.0"
    fi
    models=target/peer-models/mdx
    if [ ! -f "$models/UVR-MDX-NET-Inst_HQ_3.onnx" ]; then
        "$venv/bin/python" bench/peers/build_mdx.py "$models"
    fi
else
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
fi
cargo build --release -p stemflow-cli
"$venv/bin/python" bench/peers/compare.py --family "$family" --stemflow target/release/stemflow \
    --models "$models" --song "$song" --rounds "$rounds"
