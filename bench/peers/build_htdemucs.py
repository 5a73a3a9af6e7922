"""Builds a real-size HTDemucs with random weights, for speed and memory comparisons.

The hyper-parameters are the released `htdemucs` model's (demucs 4.0.1 defaults plus
`bottom_channels=512` and a 7.8 s training segment: 41.5 M parameters); the weights are random,
which changes no timing or memory figure. Writes two files into OUT_DIR:

- `htdemucs_random.th`: the PyTorch model, loadable by `demucs --repo` (for the PyTorch peer),
- `htdemucs_random.onnx`: the same model exported with demucs-onnx's patches (`mix` [1, 2, 343980]
  -> `stems` [1, 4, 2, 343980]), as demucs-onnx and Stemflow run it.

Usage: python build_htdemucs.py OUT_DIR   (needs demucs==4.0.1, demucs-onnx==0.3.4, torch, onnx)
"""
import copy
import sys
from fractions import Fraction
from pathlib import Path

import torch
from demucs.htdemucs import HTDemucs
from demucs.states import serialize_model
from omegaconf import OmegaConf
from demucs_onnx.export.patch import patch_htdemucs_for_onnx

SOURCES = ["drums", "bass", "other", "vocals"]
SEGMENT_FRAMES = 343980  # 7.8 s at 44.1 kHz, as demucs-onnx exports


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = HTDemucs(SOURCES, samplerate=44100, segment=Fraction(39, 5), bottom_channels=512)
    model.eval()
    print(f"HTDemucs: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters")

    # demucs loads `<sig>.th` from a `--repo` folder; serialize_model keeps the constructor
    # arguments so the class is rebuilt exactly.
    torch.save(serialize_model(model, OmegaConf.create({}), half=False), out / "htdemucs_random.th")

    patched = patch_htdemucs_for_onnx(copy.deepcopy(model))
    onnx_path = out / "htdemucs_random.onnx"
    # demucs-onnx's own export call (legacy exporter, opset 17, constant folding), written out so
    # that it runs on torch 1.13 too (whose export() has no `dynamo` argument).
    with torch.no_grad():
        torch.onnx.export(
            patched, torch.randn(1, 2, SEGMENT_FRAMES), str(onnx_path), opset_version=17,
            input_names=["mix"], output_names=["stems"], do_constant_folding=True,
        )
    print(f"wrote {onnx_path} ({onnx_path.stat().st_size / 1e6:.0f} MB)")

    # The export must compute what the PyTorch model computes (random weights or not).
    import numpy as np
    import onnxruntime as ort

    mix = torch.randn(1, 2, SEGMENT_FRAMES)
    with torch.no_grad():
        expected = model(mix).numpy()
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    got = session.run(["stems"], {"mix": mix.numpy()})[0]
    print(f"ONNX vs PyTorch: max abs diff {float(np.abs(got - expected).max()):.2e}")


if __name__ == "__main__":
    main()
