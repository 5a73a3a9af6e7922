"""Builds test ONNX models resembling a separation model: 200 blocks of
Conv -> Relu -> Transpose -> MatMul -> Transpose (1,000 nodes), three float32
initializers per block (600) stored as raw_data, named inputs/outputs with a
symbolic time axis and metadata_props. Usage: make_models.py OUT CHANNELS"""
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

out, c = sys.argv[1], int(sys.argv[2])
blocks = 200
rng = np.random.default_rng(0)
nodes, inits = [], []
x = "mix"
for i in range(blocks):
    p = f"/encoder.{i}"
    w = numpy_helper.from_array(rng.standard_normal((c, c, 3, 1), dtype=np.float32), f"{p}/conv/weight")
    b = numpy_helper.from_array(rng.standard_normal((c,), dtype=np.float32), f"{p}/conv/bias")
    m = numpy_helper.from_array(rng.standard_normal((c, c), dtype=np.float32), f"{p}/linear/weight")
    inits += [w, b, m]
    nodes.append(helper.make_node("Conv", [x, w.name, b.name], [f"{p}/conv/out"], name=f"{p}/conv/Conv",
                                  kernel_shape=[3, 1], pads=[1, 0, 1, 0], strides=[1, 1], dilations=[1, 1], group=1))
    nodes.append(helper.make_node("Relu", [f"{p}/conv/out"], [f"{p}/relu/out"], name=f"{p}/relu/Relu"))
    nodes.append(helper.make_node("Transpose", [f"{p}/relu/out"], [f"{p}/t1/out"], name=f"{p}/t1/Transpose", perm=[0, 3, 2, 1]))
    nodes.append(helper.make_node("MatMul", [f"{p}/t1/out", m.name], [f"{p}/linear/out"], name=f"{p}/linear/MatMul"))
    y = "stems" if i == blocks - 1 else f"{p}/out"
    nodes.append(helper.make_node("Transpose", [f"{p}/linear/out"], [y], name=f"{p}/t2/Transpose", perm=[0, 3, 2, 1]))
    x = y
graph = helper.make_graph(
    nodes, "separator",
    [helper.make_tensor_value_info("mix", TensorProto.FLOAT, [1, c, "time", 1])],
    [helper.make_tensor_value_info("stems", TensorProto.FLOAT, [1, c, "time", 1])],
    initializer=inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="prost-bench")
helper.set_model_props(model, {"stemflow.stems": "drums,bass,other,vocals", "sample_rate": "44100"})
onnx.checker.check_model(model)
data = model.SerializeToString()
open(out, "wb").write(data)
print(out, len(data) / 1e6, "MB", len(nodes), "nodes", len(inits), "initializers")
