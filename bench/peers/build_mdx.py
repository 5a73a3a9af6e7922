"""Builds a real-size MDX-Net (UVR-MDX-NET-Inst_HQ_3's shape) with random weights, for speed and
memory comparisons.

The network is KUIELab's TFC-TDF U-Net ("ConvTDFNet", github.com/kuielab/mdx-net), which UVR's
MDX-Net models were trained with. Inst_HQ_3's hyper-parameters: dim_f 3072, dim_t 256 (2^8),
n_fft 6144, hop 1024, compensate 1.022, primary stem Instrumental (UVR's model table), and
KUIELab's defaults num_blocks 11, l 3, k 3, bn 8, bias False with g 48: 16.7 M parameters, which is
the released file's size (63.7 MiB; the trained checkpoint itself is not public as such, so g 48
is the one width that matches it). The weights are random, which changes no timing or memory
figure. Writes into OUT_DIR:

- `UVR-MDX-NET-Inst_HQ_3.onnx`: `input` [batch, 4, 3072, 256] -> `output` [batch, 4, 3072, 256]
  (opset 17, batch dynamic, as UVR's exports),
- `UVR-MDX-NET-Inst_HQ_3.json`: the UVR parameters as a sidecar, for Stemflow (the file's hash is
  not in UVR's table),
- `mdx_model_data.json`, `vr_model_data.json`, `download_checks.json`: the files audio-separator
  0.47.1 downloads into its `--model_file_dir` on first use, here with this model's MD5 (UVR's
  hash of the last 10,240,000 bytes) and Inst_HQ_3's parameters, so that
  `audio-separator --model_file_dir OUT_DIR -m UVR-MDX-NET-Inst_HQ_3.onnx` runs offline.

Usage: python build_mdx.py OUT_DIR   (needs torch and onnxruntime)
"""
import hashlib
import inspect
import json
import sys
from pathlib import Path

import torch
from torch import nn

NAME = "UVR-MDX-NET-Inst_HQ_3"
UVR_PARAMS = {"compensate": 1.022, "mdx_dim_f_set": 3072, "mdx_dim_t_set": 8,
              "mdx_n_fft_scale_set": 6144, "primary_stem": "Instrumental"}
DIM_C, DIM_F, DIM_T = 4, 3072, 256  # L/R x re/im, bins kept, STFT frames per chunk
NUM_BLOCKS, L, G, K, BN = 11, 3, 48, 3, 8


def conv_bn_relu(c_in, c_out, conv=nn.Conv2d, **kwargs):
    return nn.Sequential(conv(c_in, c_out, **kwargs), nn.BatchNorm2d(c_out), nn.ReLU())


class TFC_TDF(nn.Module):
    """L 3x3 convolutions (TFC), then a residual two-layer bottleneck over frequency (TDF)."""

    def __init__(self, c, f):
        super().__init__()
        self.tfc = nn.Sequential(*[conv_bn_relu(c, c, kernel_size=K, padding=K // 2) for _ in range(L)])
        self.tdf = nn.Sequential(nn.Linear(f, f // BN, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                                 nn.Linear(f // BN, f, bias=False), nn.BatchNorm2d(c), nn.ReLU())

    def forward(self, x):
        x = self.tfc(x)
        return x + self.tdf(x)


class ConvTDFNet(nn.Module):
    """U-Net of TFC-TDF blocks: NUM_BLOCKS // 2 levels down (2x2 strided conv, +G channels), one
    in the middle, as many up (2x2 transposed conv), skips joined by multiplication."""

    def __init__(self):
        super().__init__()
        self.first = conv_bn_relu(DIM_C, G, kernel_size=1)
        self.encoders, self.downs, self.ups, self.decoders = (nn.ModuleList() for _ in range(4))
        c, f = G, DIM_F
        for _ in range(NUM_BLOCKS // 2):
            self.encoders.append(TFC_TDF(c, f))
            self.downs.append(conv_bn_relu(c, c + G, kernel_size=2, stride=2))
            c, f = c + G, f // 2
        self.middle = TFC_TDF(c, f)
        for _ in range(NUM_BLOCKS // 2):
            self.ups.append(conv_bn_relu(c, c - G, nn.ConvTranspose2d, kernel_size=2, stride=2))
            c, f = c - G, f * 2
            self.decoders.append(TFC_TDF(c, f))
        self.final = nn.Conv2d(c, DIM_C, kernel_size=1)

    def forward(self, x):
        x = self.first(x).transpose(-1, -2)  # [B, C, T, F]: the TDF layers act on frequency
        skips = []
        for encoder, down in zip(self.encoders, self.downs):
            x = encoder(x)
            skips.append(x)
            x = down(x)
        x = self.middle(x)
        for up, decoder, skip in zip(self.ups, self.decoders, reversed(skips)):
            x = decoder(up(x) * skip)
        return self.final(x.transpose(-1, -2))


def uvr_hash(path: Path) -> str:
    """UVR's and audio-separator's model hash: MD5 of the last 10,240,000 bytes (or the file)."""
    data = path.read_bytes()
    return hashlib.md5(data[-10_240_000:]).hexdigest()


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = ConvTDFNet()
    # Random running statistics too, so that no BatchNorm is an identity that an optimiser could drop.
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    model.eval()
    print(f"ConvTDFNet: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters")

    onnx_path = out / f"{NAME}.onnx"
    # The legacy (TorchScript) exporter, as build_htdemucs.py; torch >= 2.9 defaults to dynamo.
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    with torch.no_grad():
        torch.onnx.export(
            model, torch.zeros(1, DIM_C, DIM_F, DIM_T), str(onnx_path), opset_version=17,
            input_names=["input"], output_names=["output"], do_constant_folding=True,
            dynamic_axes={"input": {0: "batch_size"}, "output": {0: "batch_size"}}, **legacy,
        )
    print(f"wrote {onnx_path} ({onnx_path.stat().st_size / 2**20:.1f} MiB)")

    (out / f"{NAME}.json").write_text(json.dumps(UVR_PARAMS, indent=2) + "\n")
    model_hash = uvr_hash(onnx_path)
    (out / "mdx_model_data.json").write_text(json.dumps({model_hash: UVR_PARAMS}, indent=2) + "\n")
    (out / "vr_model_data.json").write_text("{}\n")
    lists = ["vr_download_list", "mdx_download_list", "mdx_download_vip_list", "demucs_download_list",
             "mdx23c_download_list", "mdx23c_download_vip_list", "roformer_download_list"]
    checks = {key: {} for key in lists}
    checks["mdx_download_list"] = {"MDX-Net Model: UVR-MDX-NET Inst HQ 3 (random weights)": onnx_path.name}
    (out / "download_checks.json").write_text(json.dumps(checks, indent=2) + "\n")
    print(f"wrote the Stemflow sidecar and audio-separator's model data (MD5 {model_hash})")

    # The export must compute what the PyTorch model computes (random weights or not).
    import numpy as np
    import onnxruntime as ort

    spec = torch.randn(1, DIM_C, DIM_F, DIM_T)
    with torch.no_grad():
        expected = model(spec).numpy()
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    got = session.run(["output"], {"input": spec.numpy()})[0]
    scale = float(np.abs(expected).max())
    print(f"ONNX vs PyTorch: max abs diff {float(np.abs(got - expected).max()):.2e} (output max {scale:.2e})")


if __name__ == "__main__":
    main()
