//! [`inspect`]: a model's nodes, operators and element types, and which nodes an execution
//! provider has no kernel for, from the committed table of ONNX Runtime's registrations.

use std::collections::{BTreeMap, HashMap};

use super::element::{element_name, is_integer_or_bool};
use super::provider::Provider;
use super::table::{KernelTable, Registration};
use super::types::ValueTypes;
use crate::field::{data_type, graph};
use crate::model::ModelView;
use crate::view::{raw_fields, GraphPart, NodeView, ValueInfoView};

/// One node and what was found about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFinding {
    /// The node's name (`#N`, its position, when it has none).
    pub node: String,
    /// Its operator (`com.microsoft.MultiHeadAttention` outside the default domain).
    pub op: String,
    /// Why, in words.
    pub reason: String,
}

/// What [`inspect`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// The provider checked.
    pub provider: Provider,
    /// Nodes of the main graph.
    pub node_count: usize,
    /// Nodes by operator.
    pub ops: BTreeMap<String, usize>,
    /// Values (inputs, initializers, node outputs) by element type name.
    pub element_types: BTreeMap<String, usize>,
    /// Nodes that read or write float64 values.
    pub float64_nodes: usize,
    /// Nodes the provider has no kernel for: ONNX Runtime runs them on the CPU (or, on the
    /// CPU itself, refuses the model).
    pub unsupported: Vec<NodeFinding>,
    /// Integer shape computations (from `Shape` outputs and constants) the provider has no
    /// kernel for: ONNX Runtime's GPU providers keep such nodes on the CPU by design.
    pub shape_nodes_without_kernel: Vec<NodeFinding>,
    /// Integer shape computations the provider could run but ONNX Runtime's CUDA provider
    /// places on the CPU by design (their results are a few integers read as shapes).
    pub shape_nodes: usize,
    /// Operators ONNX defines by a function body, which no provider has a kernel for: ONNX
    /// Runtime replaces each by its body (which this check does not see).
    pub expanded: Vec<NodeFinding>,
    /// Nodes computing only from constants: folded when the session is built, never run.
    pub constant_nodes: usize,
    /// Nodes holding subgraphs (If, Loop, Scan), whose bodies are not checked.
    pub subgraph_nodes: usize,
    /// Node outputs whose element type could not be told (not checked).
    pub untyped_values: usize,
}

impl Inspection {
    /// Whether any value is float64.
    pub fn has_float64(&self) -> bool {
        self.element_types.contains_key("double")
    }

    /// Whether the provider has a kernel for every node that runs (shape computations and
    /// constant folding aside).
    pub fn runs_wholly_on_provider(&self) -> bool {
        self.unsupported.is_empty()
    }
}

/// Inspects `model` (an ONNX file's bytes) for `provider`. Not realtime-safe: reads the whole
/// model.
pub fn inspect(model: &[u8], provider: Provider) -> Result<Inspection, String> {
    let table = KernelTable::get()?;
    let view = ModelView::read(model)?;
    let opsets = view.opsets()?;
    let version_of = |domain: &str| opsets.get(domain).copied().unwrap_or(1);
    let mut types = ValueTypes::default();
    let mut origin: HashMap<&str, Origin> = HashMap::new();
    let mut nodes = Vec::new();
    for field in raw_fields(view.graph()?)? {
        if field.number == graph::VALUE_INFO {
            let info = ValueInfoView::read(field.body().unwrap_or_default())?;
            types.declare(info.name, info.elem_type.unwrap_or(0));
            continue;
        }
        match GraphPart::read(&field)? {
            GraphPart::Node(node) => nodes.push(node),
            GraphPart::Initializer(tensor) => {
                types.declare(tensor.name, tensor.data_type);
                origin.insert(tensor.name, Origin::Constant);
            }
            GraphPart::Input(info) | GraphPart::Output(info) => {
                types.declare(info.name, info.elem_type.unwrap_or(0))
            }
            _ => {}
        }
    }
    let mut report = Inspection {
        provider,
        node_count: nodes.len(),
        ops: BTreeMap::new(),
        element_types: BTreeMap::new(),
        float64_nodes: 0,
        unsupported: Vec::new(),
        shape_nodes_without_kernel: Vec::new(),
        shape_nodes: 0,
        expanded: Vec::new(),
        constant_nodes: 0,
        subgraph_nodes: 0,
        untyped_values: 0,
    };
    for (index, node) in nodes.iter().enumerate() {
        let domain = domain_name(node);
        let version = version_of(domain);
        types.infer(node, table, domain, version);
        let op = qualified_op(node, domain);
        *report.ops.entry(op.clone()).or_insert(0) += 1;
        report.subgraph_nodes += usize::from(node.has_subgraph);
        let in_types: Vec<Option<i64>> = node.inputs.iter().map(|n| types.get(n)).collect();
        let out_types: Vec<Option<i64>> = node.outputs.iter().map(|n| types.get(n)).collect();
        report.untyped_values += out_types.iter().filter(|t| t.is_none()).count();
        let touches_double = in_types
            .iter()
            .chain(&out_types)
            .any(|t| *t == Some(data_type::DOUBLE));
        report.float64_nodes += usize::from(touches_double);
        let kind = node_origin(node, &origin, &out_types);
        for output in &node.outputs {
            origin.insert(output, kind);
        }
        let finding = |reason: String| NodeFinding {
            node: if node.name.is_empty() {
                format!("#{index}")
            } else {
                node.name.to_owned()
            },
            op: op.clone(),
            reason,
        };
        if kind == Origin::Constant && !node.inputs.is_empty() {
            report.constant_nodes += 1;
            continue;
        }
        let is_shape = kind == Origin::Shape && !node.is("Shape") && !node.is("Size");
        let verdict = check(
            table, provider, node, domain, version, &in_types, &out_types,
        );
        match verdict {
            Ok(()) if is_shape && provider != Provider::Cpu => report.shape_nodes += 1,
            Ok(()) => {}
            Err(_) if is_shape && provider != Provider::Cpu => {
                report.shape_nodes_without_kernel.push(finding(
                    "an integer shape computation: ONNX Runtime keeps it on the CPU by design"
                        .into(),
                ))
            }
            Err(reason) => {
                let function = table
                    .schema(domain, node.op_type)
                    .and_then(|s| s.resolve(version))
                    .is_some_and(|(_, is_function)| is_function);
                let cpu_runs = provider != Provider::Cpu
                    && check(
                        table,
                        Provider::Cpu,
                        node,
                        domain,
                        version,
                        &in_types,
                        &out_types,
                    )
                    .is_ok();
                if function && !cpu_runs {
                    report.expanded.push(finding(format!(
                        "{reason}; ONNX Runtime replaces it by its ONNX function body"
                    )));
                } else {
                    report.unsupported.push(finding(reason));
                }
            }
        }
    }
    for (code, count) in types.counts() {
        *report.element_types.entry(element_name(code)).or_insert(0) += count;
    }
    Ok(report)
}

/// Where a value comes from, for telling shape computations and constants apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// An initializer or a value computed from initializers only.
    Constant,
    /// Integers computed from `Shape`/`Size` outputs (and constants).
    Shape,
    /// Anything else.
    Data,
}

/// The origin of `node`'s outputs.
fn node_origin(
    node: &NodeView<'_>,
    origin: &HashMap<&str, Origin>,
    outputs: &[Option<i64>],
) -> Origin {
    if node.is("Shape") || node.is("Size") {
        return Origin::Shape;
    }
    let random = node.op_type.starts_with("Random") || node.op_type == "Multinomial";
    let inputs: Vec<Origin> = node
        .inputs
        .iter()
        .filter(|name| !name.is_empty())
        .map(|name| origin.get(name).copied().unwrap_or(Origin::Data))
        .collect();
    let integers = outputs.iter().all(|t| t.is_some_and(is_integer_or_bool));
    if random || node.has_subgraph || inputs.contains(&Origin::Data) {
        Origin::Data
    } else if inputs.contains(&Origin::Shape) {
        if integers {
            Origin::Shape
        } else {
            Origin::Data
        }
    } else if inputs.is_empty() && !node.is("Constant") {
        Origin::Data
    } else {
        Origin::Constant
    }
}

/// Whether `provider` has a kernel that serves `node` at `version` with these types; else why not.
fn check(
    table: &KernelTable,
    provider: Provider,
    node: &NodeView<'_>,
    domain: &str,
    version: i64,
    inputs: &[Option<i64>],
    outputs: &[Option<i64>],
) -> Result<(), String> {
    let registrations = table.registrations(provider, domain, node.op_type);
    let name = provider.display_name();
    if registrations.is_empty() {
        return Err(format!("{name} has no {} kernel", node.op_type));
    }
    let covering: Vec<&Registration> = registrations.iter().filter(|r| r.covers(version)).collect();
    if covering.is_empty() {
        let ranges: Vec<String> = registrations.iter().map(Registration::range_text).collect();
        return Err(format!(
            "{name} registers {} for opset {}, not {version}",
            node.op_type,
            ranges.join(", ")
        ));
    }
    let mut first_mismatch = None;
    for registration in covering {
        match mismatch(registration, node, inputs, outputs) {
            None => return Ok(()),
            Some(reason) => {
                first_mismatch.get_or_insert(reason);
            }
        }
    }
    Err(format!("{name}: {}", first_mismatch.unwrap_or_default()))
}

/// The first input or output whose type the registration does not allow, in words.
fn mismatch(
    registration: &Registration,
    node: &NodeView<'_>,
    inputs: &[Option<i64>],
    outputs: &[Option<i64>],
) -> Option<String> {
    let sides = [
        ("input", &node.inputs, inputs, true),
        ("output", &node.outputs, outputs, false),
    ];
    for (side, names, types, is_input) in sides {
        for (i, (value, code)) in names.iter().zip(types).enumerate() {
            let (Some(code), false) = (code, value.is_empty()) else {
                continue;
            };
            let binding = if is_input {
                registration.input(i)
            } else {
                registration.output(i)
            };
            let Some((param, bound)) = binding else {
                continue;
            };
            let Some(allowed) = registration.allowed(bound) else {
                continue;
            };
            if !allowed.contains(*code) {
                return Some(format!(
                    "{side} {i} ({param}) is {}, the kernel takes {}",
                    element_name(*code),
                    allowed.names()
                ));
            }
        }
    }
    None
}

/// `ai.onnx` for the default domain, else the node's domain.
fn domain_name<'a>(node: &NodeView<'a>) -> &'a str {
    if node.is_default_domain() {
        "ai.onnx"
    } else {
        node.domain
    }
}

/// `Conv`, or `com.microsoft.MultiHeadAttention` outside the default domain.
fn qualified_op(node: &NodeView<'_>, domain: &str) -> String {
    if domain == "ai.onnx" {
        node.op_type.to_owned()
    } else {
        format!("{domain}.{}", node.op_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::{Attribute, Dim};
    use crate::graph::OnnxGraph;
    use crate::kernels::check_gpu_graph;

    fn dims(d: &[usize]) -> Vec<Dim> {
        d.iter().map(|&n| Dim::Fixed(n)).collect()
    }

    /// x [2, 4] → MatMul → Add → Softmax, and its shape through Gather/Unsqueeze/Concat into a
    /// Reshape: everything CUDA and DirectML run, with integer shape computations.
    fn float32_graph() -> OnnxGraph<'static> {
        let mut g = OnnxGraph::new("g");
        g.add_input("x", dims(&[2, 4]));
        g.add_initializer_f32("w", &[4, 4], vec![0.5; 16]).unwrap();
        g.add_initializer_f32("b", &[4], vec![0.1; 4]).unwrap();
        g.add_initializer_i64("zero", &[], vec![0]).unwrap();
        g.add_initializer_i64("axes", &[1], vec![0]).unwrap();
        g.add_initializer_i64("minus_one", &[1], vec![-1]).unwrap();
        g.add_node("MatMul", "mm", &["x", "w"], &["h"], vec![]);
        g.add_node("Add", "bias", &["h", "b"], &["a"], vec![]);
        g.add_node("Softmax", "sm", &["a"], &["s"], vec![]);
        g.add_node("Shape", "shape", &["x"], &["shape"], vec![]);
        g.add_node("Gather", "first", &["shape", "zero"], &["rows"], vec![]);
        g.add_node(
            "Unsqueeze",
            "rows_1d",
            &["rows", "axes"],
            &["rows1"],
            vec![],
        );
        g.add_node(
            "Concat",
            "target",
            &["rows1", "minus_one"],
            &["target"],
            vec![("axis", Attribute::Int(0))],
        );
        g.add_node("Reshape", "reshape", &["s", "target"], &["y"], vec![]);
        g.add_output("y", dims(&[2, 4]));
        g
    }

    #[test]
    fn a_float32_graph_runs_on_every_provider_with_its_shape_nodes_counted() {
        let model = float32_graph().to_model_bytes();
        let cuda = inspect(&model, Provider::Cuda).unwrap();
        assert_eq!(cuda.node_count, 8);
        assert_eq!(cuda.ops["MatMul"], 1);
        assert!(cuda.unsupported.is_empty(), "{:?}", cuda.unsupported);
        assert_eq!(
            cuda.shape_nodes, 3,
            "Gather, Unsqueeze and Concat of the shape"
        );
        assert!(!cuda.has_float64() && cuda.runs_wholly_on_provider());
        assert_eq!(cuda.element_types["float"], 7, "x, w, b, h, a, s, y");
        assert_eq!(cuda.element_types["int64"], 7);
        assert_eq!(cuda.untyped_values, 0);
        let cpu = inspect(&model, Provider::Cpu).unwrap();
        assert!(cpu.unsupported.is_empty() && cpu.shape_nodes == 0);
        check_gpu_graph(&model).unwrap();
    }

    #[test]
    fn float64_fails_directml_and_the_gpu_check_but_not_cuda() {
        let mut g = OnnxGraph::new("g");
        g.add_input("x", dims(&[4]));
        g.add_node(
            "Cast",
            "up",
            &["x"],
            &["x64"],
            vec![("to", Attribute::Int(data_type::DOUBLE))],
        );
        g.add_node("Add", "sum", &["x64", "x64"], &["y64"], vec![]);
        g.add_node(
            "Cast",
            "down",
            &["y64"],
            &["y"],
            vec![("to", Attribute::Int(data_type::FLOAT))],
        );
        g.add_output("y", dims(&[4]));
        let model = g.to_model_bytes();
        let cuda = inspect(&model, Provider::Cuda).unwrap();
        assert!(cuda.unsupported.is_empty() && cuda.has_float64());
        assert_eq!((cuda.element_types["double"], cuda.float64_nodes), (2, 3));
        let dml = inspect(&model, Provider::DirectMl).unwrap();
        assert_eq!(dml.unsupported.len(), 1, "{:?}", dml.unsupported);
        assert_eq!(dml.unsupported[0].node, "sum");
        assert!(dml.unsupported[0].reason.contains("input 0 (A) is double"));
        let problems = check_gpu_graph(&model).unwrap_err();
        assert!(problems.contains("float64") && problems.contains("DirectML node sum (Add)"));
    }

    #[test]
    fn missing_kernels_old_versions_constants_and_function_bodies_are_told_apart() {
        let mut g = OnnxGraph::new("g");
        g.add_input("x", dims(&[1, 2048]));
        g.add_initializer_i64("step", &[], vec![512]).unwrap();
        g.add_initializer_f32("c", &[2], vec![1.0, 2.0]).unwrap();
        g.add_initializer_i64("like", &[1], vec![0]).unwrap();
        g.add_node(
            "STFT",
            "stft",
            &["x", "step"],
            &["spec"],
            vec![("onesided", Attribute::Int(1))],
        );
        g.add_node("Upsample", "up", &["x", "c"], &["u"], vec![]);
        g.add_node("Celu", "celu", &["x"], &["v"], vec![]);
        g.add_node("CastLike", "cast_like", &["x", "like"], &["w"], vec![]);
        g.add_node("Neg", "folded", &["c"], &["nc"], vec![]);
        g.add_output("spec", vec![]);
        let model = g.to_model_bytes();
        let cuda = inspect(&model, Provider::Cuda).unwrap();
        let reasons: Vec<(&str, &str)> = cuda
            .unsupported
            .iter()
            .map(|f| (f.node.as_str(), f.reason.as_str()))
            .collect();
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert_eq!(reasons[0], ("stft", "CUDA has no STFT kernel"));
        assert!(reasons[1]
            .1
            .contains("registers Upsample for opset 9, [7, 8], not 17"));
        assert_eq!(
            reasons[2].0, "celu",
            "a function the CPU has a kernel for goes to the CPU"
        );
        assert_eq!(cuda.expanded.len(), 1);
        assert!(cuda.expanded[0].reason.contains("function body"));
        assert_eq!(
            cuda.element_types["int64"], 3,
            "step, like and CastLike's output"
        );
        assert_eq!(cuda.constant_nodes, 1);
        let dml = inspect(&model, Provider::DirectMl).unwrap();
        assert!(
            dml.unsupported.iter().all(|f| f.node != "stft"),
            "DirectML has STFT"
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(inspect(b"", Provider::Cuda).is_err());
        assert!(inspect(&[0x3a, 50, 1, 2], Provider::Cpu).is_err());
        assert!(check_gpu_graph(b"not onnx").is_err());
    }
}
