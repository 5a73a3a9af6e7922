#!/usr/bin/env python3
"""Writes Stemflow's tiny test ONNX graphs (no weights from anywhere: every value is set here).

Needs only the `onnx` and `numpy` packages. Run from anywhere:

    python3 models/make_test_models.py

Graphs written to models/test/:
- probe.onnx: y = x + 1 on a [1, 4] tensor. Embedded in the engine to probe whether an execution
  provider can create and run a session on a device.
- waveform_gain.onnx: the raw-waveform contract (input `mix` [1, 2, 4096] at 44.1 kHz, output
  `stems` [1, 4, 2, 4096]): stem s, channel c = mix[c] * GAINS[s][c]. Checkable by hand.
"""
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


if __name__ == "__main__":
    probe()
    waveform_gain()
