//! `stemflow models inspect MODEL`: a model's nodes, operators and element types, and the nodes
//! ONNX Runtime's CUDA, DirectML or CPU provider has no kernel for — from the table of its kernel
//! registrations Stemflow carries (`stemflow_onnx::kernels`), so no GPU and no ONNX Runtime are
//! needed. Each device is checked on the graph the engine would run there
//! (`stemflow_engine::runtime::graph_for`): the graph made for GPUs beside the model on a GPU,
//! the CPU graph on the CPU, and the output says which file that is and why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use stemflow_engine::runtime::{
    gpu_graph_path, graph_for, DeviceId, GraphChoice, Precision, DEFAULT_GPU_PRECISION,
};
use stemflow_engine::{SeparatorChoice, ROUTE_EXTENSION};
use stemflow_onnx::kernels::{inspect, sources, Inspection, NodeFinding, Provider};

use crate::error::CliError;
use crate::model_folders::SearchFolders;

/// Nodes named per group of findings before "…".
const NODES_NAMED: usize = 3;

/// `stemflow models inspect`'s arguments.
#[derive(Args)]
pub struct InspectArgs {
    /// A model: its name in the models folders or the path of an .onnx file.
    #[arg(value_name = "MODEL")]
    pub model: String,
    /// The device to check: cuda, directml or cpu, or a device id such as cuda:0 (its kind
    /// picks the graph and the provider's kernels; no such device is needed here); all three
    /// when left out.
    #[arg(long, value_name = "DEVICE")]
    pub device: Option<String>,
    /// The precision a GPU runs at, which picks its graph: f32 (`NAME.gpu.onnx`) or f16
    /// (`NAME.gpu-f16.onnx`). The engine's default when left out.
    #[arg(long, value_name = "PRECISION")]
    pub precision: Option<String>,
    #[command(flatten)]
    pub models_dirs: SearchFolders,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// One device's check: the graph the engine runs there, why, and its kernels' verdict.
struct DeviceCheck {
    device: DeviceId,
    graph: GraphChoice,
    /// Why this graph runs on `device`, in words.
    why: String,
    report: Inspection,
}

/// A graph file read once, with the devices checked on it.
struct GraphReport {
    path: PathBuf,
    file_bytes: usize,
    checks: Vec<DeviceCheck>,
}

/// The devices `--device` names: one, or the first device of each provider with a kernel table.
fn devices_to_check(device: Option<&str>) -> Result<Vec<(DeviceId, Provider)>, CliError> {
    let usage = |device: &str, why: &str| {
        CliError::Usage(format!(
            "--device {device}: {why}; expected cuda, directml or cpu (the providers whose \
             kernels Stemflow knows), or a device id such as cuda:0"
        ))
    };
    let Some(device) = device else {
        return Ok(Provider::ALL
            .iter()
            .filter_map(|&p| {
                let id: DeviceId = p.table_name().parse().ok()?;
                Some((id, p))
            })
            .collect());
    };
    let id: DeviceId = device.parse().map_err(|e: String| usage(device, &e))?;
    let provider = Provider::from_table_name(id.provider.prefix()).ok_or_else(|| {
        usage(
            device,
            &format!("Stemflow has no kernel table for {}", id.provider.prefix()),
        )
    })?;
    Ok(vec![(id, provider)])
}

/// The file name of `path`, for messages.
fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Why the engine runs `graph` (its choice for `model`) on `device` at `precision`.
fn why_this_graph(
    model: &Path,
    graph: &GraphChoice,
    device: DeviceId,
    precision: Precision,
) -> String {
    let on_cpu = device == DeviceId::CPU;
    match graph.gpu_precision {
        Some(ran) if graph.path == model => match on_cpu {
            true => format!(
                "the {ran} graph made for GPUs, given as the model; no CPU graph lies beside \
                 it, so {device} runs this one"
            ),
            false => format!("the {ran} graph made for GPUs, given as the model"),
        },
        Some(ran) if ran == precision => format!("the {ran} graph made for GPUs"),
        Some(ran) => format!(
            "the {ran} graph made for GPUs: no {precision} one ({}) lies beside the model, so \
             the engine takes this one",
            file_name(&gpu_graph_path(model, precision))
        ),
        None if on_cpu => "the CPU graph".to_owned(),
        None => format!(
            "the CPU graph: no graph made for GPUs ({}) lies beside it, so the engine runs the \
             CPU graph on {device}",
            file_name(&gpu_graph_path(model, precision))
        ),
    }
}

/// Runs `stemflow models inspect`.
pub fn run(args: &InspectArgs) -> Result<(), CliError> {
    let devices = devices_to_check(args.device.as_deref())?;
    let precision = match &args.precision {
        None => DEFAULT_GPU_PRECISION,
        Some(text) => Precision::parse(text)
            .ok_or_else(|| CliError::Usage(format!("--precision {text}: expected f32 or f16")))?,
    };
    let dirs = args.models_dirs.dirs();
    let path = match SeparatorChoice::resolve(&args.model, &dirs).map_err(|e| e.to_string())? {
        SeparatorChoice::Model(path) => path,
        SeparatorChoice::Builtin => {
            return Err(CliError::Failed(
                "builtin is Stemflow's DSP separator, not a model: nothing to inspect".into(),
            ))
        }
    };
    if path.extension().is_some_and(|e| e == ROUTE_EXTENSION) {
        return Err(CliError::Failed(format!(
            "{} is a route: inspect each model it names",
            path.display()
        )));
    }
    let mut graphs: Vec<GraphReport> = Vec::new();
    let mut bytes_of: BTreeMap<PathBuf, Vec<u8>> = BTreeMap::new();
    for (device, provider) in devices {
        let graph = graph_for(&path, device, precision);
        if !bytes_of.contains_key(&graph.path) {
            let bytes =
                std::fs::read(&graph.path).map_err(|e| format!("{}: {e}", graph.path.display()))?;
            bytes_of.insert(graph.path.clone(), bytes);
        }
        let bytes = &bytes_of[&graph.path];
        let report =
            inspect(bytes, provider).map_err(|e| format!("{}: {e}", graph.path.display()))?;
        let why = why_this_graph(&path, &graph, device, precision);
        let check = DeviceCheck {
            device,
            graph,
            why,
            report,
        };
        match graphs.iter_mut().find(|g| g.path == check.graph.path) {
            Some(known) => known.checks.push(check),
            None => graphs.push(GraphReport {
                path: check.graph.path.clone(),
                file_bytes: bytes.len(),
                checks: vec![check],
            }),
        }
    }
    let sources = sources()?;
    if args.json {
        let first = &graphs[0];
        let report = &first.checks[0].report;
        let value = serde_json::json!({
            "model": path.display().to_string(),
            "graph": first.path.display().to_string(),
            "file_bytes": first.file_bytes,
            "node_count": report.node_count,
            "ops": report.ops,
            "element_types": report.element_types,
            "float64_nodes": report.float64_nodes,
            "providers": graphs
                .iter()
                .flat_map(|g| g.checks.iter().map(move |c| provider_json(g, c)))
                .collect::<Vec<_>>(),
            "kernel_sources": sources,
        });
        crate::output::say!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    for graph in &graphs {
        for check in &graph.checks {
            crate::output::say!(
                "Graph for {}: {} ({})",
                check.device,
                file_name(&graph.path),
                check.why
            );
        }
        say_summary(&graph.path, graph.file_bytes, &graph.checks[0].report);
        for check in &graph.checks {
            say_provider(&check.report);
        }
    }
    crate::output::say!("Kernel tables: {}", sources.join("; "));
    Ok(())
}

/// Nodes, operators and element types (the same for every provider).
fn say_summary(path: &std::path::Path, file_bytes: usize, report: &Inspection) {
    crate::output::say!(
        "{} ({:.1} MB): {} nodes",
        path.display(),
        file_bytes as f64 / 1e6,
        report.node_count
    );
    let mut ops: Vec<(&String, &usize)> = report.ops.iter().collect();
    ops.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let ops: Vec<String> = ops.iter().map(|(op, n)| format!("{op} {n}")).collect();
    crate::output::say!("Operators: {}", ops.join(", "));
    let types: Vec<String> = report
        .element_types
        .iter()
        .map(|(t, n)| format!("{t} {n}"))
        .collect();
    crate::output::say!("Values by element type: {}", types.join(", "));
    if report.has_float64() {
        crate::output::say!(
            "float64: {} values; {} nodes read or write them (GPUs run float64 slowly, DirectML \
             hardly at all)",
            report.element_types["double"],
            report.float64_nodes
        );
    } else {
        crate::output::say!("float64: none");
    }
}

/// One provider's verdict and findings.
fn say_provider(report: &Inspection) {
    let name = report.provider.display_name();
    if report.unsupported.is_empty() {
        crate::output::say!("{name}: every node that runs has a kernel");
    } else {
        crate::output::say!(
            "{name}: {} nodes have no kernel ({}):",
            report.unsupported.len(),
            if report.provider == Provider::Cpu {
                "ONNX Runtime refuses the model"
            } else {
                "ONNX Runtime runs them on the CPU, copying data to and fro"
            }
        );
        say_groups(&report.unsupported);
    }
    if report.shape_nodes + report.shape_nodes_without_kernel.len() > 0 {
        crate::output::say!(
            "  {} integer shape computations stay on the CPU by design (ONNX Runtime's GPU \
             providers place them there; not counted as failures)",
            report.shape_nodes + report.shape_nodes_without_kernel.len()
        );
    }
    if !report.expanded.is_empty() {
        crate::output::say!(
            "  {} nodes are replaced by their ONNX function body (no provider has a kernel):",
            report.expanded.len()
        );
        say_groups(&report.expanded);
    }
    let notes = [
        (
            report.constant_nodes,
            "nodes compute only from constants (folded when the session is built)",
        ),
        (
            report.subgraph_nodes,
            "nodes hold subgraphs, which are not checked",
        ),
        (
            report.untyped_values,
            "values have an element type this check could not tell (not checked)",
        ),
    ];
    for (count, what) in notes {
        if count > 0 {
            crate::output::say!("  {count} {what}");
        }
    }
}

/// Findings grouped by operator and reason, with a few node names each.
fn say_groups(findings: &[NodeFinding]) {
    for ((op, reason), nodes) in group(findings) {
        let mut named: Vec<&str> = nodes.iter().take(NODES_NAMED).copied().collect();
        if nodes.len() > NODES_NAMED {
            named.push("…");
        }
        crate::output::say!(
            "    {op} ×{}: {reason} (nodes {})",
            nodes.len(),
            named.join(", ")
        );
    }
}

fn group(findings: &[NodeFinding]) -> BTreeMap<(&str, &str), Vec<&str>> {
    let mut groups: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for f in findings {
        groups
            .entry((f.op.as_str(), f.reason.as_str()))
            .or_default()
            .push(f.node.as_str());
    }
    groups
}

fn provider_json(graph: &GraphReport, check: &DeviceCheck) -> serde_json::Value {
    let report = &check.report;
    let findings = |list: &[NodeFinding]| {
        list.iter()
            .map(|f| serde_json::json!({"node": f.node, "op": f.op, "reason": f.reason}))
            .collect::<Vec<_>>()
    };
    serde_json::json!({
        "provider": report.provider.table_name(),
        "device": check.device.to_string(),
        "graph": graph.path.display().to_string(),
        "graph_is_for_gpus": check.graph.gpu_precision.is_some(),
        "graph_why": check.why,
        "node_count": report.node_count,
        "element_types": report.element_types,
        "float64_nodes": report.float64_nodes,
        "runs_wholly_on_provider": report.runs_wholly_on_provider(),
        "unsupported": findings(&report.unsupported),
        "shape_nodes_on_cpu": report.shape_nodes + report.shape_nodes_without_kernel.len(),
        "expanded": findings(&report.expanded),
        "constant_nodes": report.constant_nodes,
        "subgraph_nodes": report.subgraph_nodes,
        "untyped_values": report.untyped_values,
    })
}
