//! `stemflow models inspect MODEL`: a model's nodes, operators and element types, and the nodes
//! ONNX Runtime's CUDA, DirectML or CPU provider has no kernel for — from the table of its kernel
//! registrations Stemflow carries (`stemflow_onnx::kernels`), so no GPU and no ONNX Runtime are
//! needed.

use std::collections::BTreeMap;

use clap::Args;
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
    /// The provider to check: cuda, directml or cpu (a device id such as cuda:0 works too);
    /// all three when left out.
    #[arg(long, value_name = "DEVICE")]
    pub device: Option<String>,
    #[command(flatten)]
    pub models_dirs: SearchFolders,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// Runs `stemflow models inspect`.
pub fn run(args: &InspectArgs) -> Result<(), CliError> {
    let providers = match &args.device {
        None => Provider::ALL.to_vec(),
        Some(device) => {
            let prefix = device.split(':').next().unwrap_or_default().trim();
            vec![
                Provider::from_table_name(&prefix.to_ascii_lowercase()).ok_or_else(|| {
                    CliError::Usage(format!(
                        "--device {device}: expected cuda, directml or cpu (the providers whose \
                     kernels Stemflow knows)"
                    ))
                })?,
            ]
        }
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
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let reports = providers
        .iter()
        .map(|&p| inspect(&bytes, p).map_err(|e| format!("{}: {e}", path.display())))
        .collect::<Result<Vec<Inspection>, String>>()?;
    let sources = sources()?;
    if args.json {
        let value = serde_json::json!({
            "model": path.display().to_string(),
            "file_bytes": bytes.len(),
            "node_count": reports[0].node_count,
            "ops": reports[0].ops,
            "element_types": reports[0].element_types,
            "float64_nodes": reports[0].float64_nodes,
            "providers": reports.iter().map(provider_json).collect::<Vec<_>>(),
            "kernel_sources": sources,
        });
        crate::output::say!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    say_summary(&path, bytes.len(), &reports[0]);
    for report in &reports {
        say_provider(report);
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

fn provider_json(report: &Inspection) -> serde_json::Value {
    let findings = |list: &[NodeFinding]| {
        list.iter()
            .map(|f| serde_json::json!({"node": f.node, "op": f.op, "reason": f.reason}))
            .collect::<Vec<_>>()
    };
    serde_json::json!({
        "provider": report.provider.table_name(),
        "runs_wholly_on_provider": report.runs_wholly_on_provider(),
        "unsupported": findings(&report.unsupported),
        "shape_nodes_on_cpu": report.shape_nodes + report.shape_nodes_without_kernel.len(),
        "expanded": findings(&report.expanded),
        "constant_nodes": report.constant_nodes,
        "subgraph_nodes": report.subgraph_nodes,
        "untyped_values": report.untyped_values,
    })
}
