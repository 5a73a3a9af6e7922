#!/usr/bin/env python3
"""Writes Stemflow's tiny test ONNX graphs (no weights from anywhere: every value is set here).

Needs only the `onnx` and `numpy` packages. Run from anywhere:

    python3 models/make_test_models.py

Graphs written to models/test/:
- probe.onnx: y = x + 1 on a [1, 4] tensor. Embedded in the engine to probe whether an execution
  provider can create and run a session on a device.
- waveform_gain.onnx: the raw-waveform contract (input `mix` [1, 2, 4096] at 44.1 kHz, output
  `stems` [1, 4, 2, 4096]): stem s, channel c = mix[c] * GAINS[s][c]. Checkable by hand.

With `--bench`, also models/bench/waveform_bench.onnx (not checked in): the same contract with a
7.8 s segment and a small random convolutional encoder/decoder (about 10 GFLOP per segment), to
time devices with a realistic amount of work.
"""
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent / "test"
OPSET = 17
IR_VERSION = 9  # ONNX Runtime 1.24+ reads it; newer IR versions are refused by older runtimes.

WAVEFORM_SEGMENT_SAMPLES = 4096
# Rows: vocals, drums, bass, other; columns: left, right.
WAVEFORM_GAINS = np.array(
    [[0.5, 0.25], [0.25, 0.5], [0.125, 0.125], [0.0625, 0.03125]], dtype=np.float32
)


def save(graph, name):
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="stemflow-make_test_models",
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    # Deterministic bytes: no doc strings with dates, fixed producer.
    path.write_bytes(model.SerializeToString(deterministic=True))
    print(f"wrote {path} ({path.stat().st_size} bytes)")


def probe():
    one = numpy_helper.from_array(np.ones((1, 4), dtype=np.float32), "one")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["y"])],
        "stemflow_probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=[one],
    )
    save(graph, "probe.onnx")


def waveform_gain():
    t = WAVEFORM_SEGMENT_SAMPLES
    gains = numpy_helper.from_array(WAVEFORM_GAINS.reshape(1, 4, 2, 1), "gains")
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
    graph = helper.make_graph(
        [
            helper.make_node("Unsqueeze", ["mix", "axes"], ["mix4"]),
            helper.make_node("Mul", ["mix4", "gains"], ["stems"]),
        ],
        "stemflow_waveform_gain",
        [helper.make_tensor_value_info("mix", TensorProto.FLOAT, [1, 2, t])],
        [helper.make_tensor_value_info("stems", TensorProto.FLOAT, [1, 4, 2, t])],
        initializer=[gains, axes],
    )
    save(graph, "waveform_gain.onnx")


def waveform_bench():
    t = 344_064  # divisible by 16 for the two stride-4 stages; ~7.8 s at 44.1 kHz
    rng = np.random.default_rng(1234)

    def weights(name, shape):
        fan_in = shape[1] * shape[2]
        return numpy_helper.from_array(
            (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32), name
        )

    conv = dict(kernel_shape=[8], strides=[4], pads=[2, 2])
    nodes = [
        helper.make_node("Conv", ["mix", "w1"], ["h1"], **conv),
        helper.make_node("Relu", ["h1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["h2"], **conv),
        helper.make_node("Relu", ["h2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3"], ["h3"], kernel_shape=[3], pads=[1, 1]),
        helper.make_node("Relu", ["h3"], ["r3"]),
        helper.make_node("ConvTranspose", ["r3", "w4"], ["h4"], **conv),
        helper.make_node("Relu", ["h4"], ["r4"]),
        helper.make_node("ConvTranspose", ["r4", "w5"], ["h5"], **conv),
        helper.make_node("Reshape", ["h5", "shape"], ["stems"]),
    ]
    init = [
        weights("w1", (64, 2, 8)),
        weights("w2", (128, 64, 8)),
        weights("w3", (128, 128, 3)),
        weights("w4", (128, 64, 8)),  # ConvTranspose weights: (in, out, k)
        weights("w5", (64, 8, 8)),
        numpy_helper.from_array(np.array([1, 4, 2, t], dtype=np.int64), "shape"),
    ]
    graph = helper.make_graph(
        nodes,
        "stemflow_waveform_bench",
        [helper.make_tensor_value_info("mix", TensorProto.FLOAT, [1, 2, t])],
        [helper.make_tensor_value_info("stems", TensorProto.FLOAT, [1, 4, 2, t])],
        initializer=init,
    )
    global OUT
    OUT = OUT.parent / "bench"
    save(graph, "waveform_bench.onnx")


if __name__ == "__main__":
    probe()
    waveform_gain()
    if "--bench" in sys.argv:
        waveform_bench()
