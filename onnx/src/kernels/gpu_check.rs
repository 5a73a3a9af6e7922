//! [`check_gpu_graph`]: the one call tests of GPU graphs make, and [`sources`] for reports.

use super::inspect::inspect;
use super::provider::Provider;
use super::table::KernelTable;

/// Where the table's registrations come from, one line per source (for reports).
pub fn sources() -> Result<Vec<String>, String> {
    Ok(KernelTable::get()?
        .sources
        .iter()
        .filter(|s| s.starts_with("cpu:") || s.starts_with("cuda"))
        .cloned()
        .collect())
}

/// `Ok` when CUDA and DirectML have a kernel for every node of `model` that runs (integer shape
/// computations, which ONNX Runtime keeps on the CPU by design, and operators ONNX Runtime
/// replaces by their ONNX function body, such as `GroupNormalization`, aside) and no value is
/// float64;
/// else `Err` listing each problem, one per line. For tests that a GPU graph is what it should
/// be. Not realtime-safe: reads the whole model.
pub fn check_gpu_graph(model: &[u8]) -> Result<(), String> {
    let mut problems = Vec::new();
    for provider in [Provider::Cuda, Provider::DirectMl] {
        let report = inspect(model, provider)?;
        if provider == Provider::Cuda && report.has_float64() {
            problems.push(format!(
                "{} values are float64 ({} nodes read or write them)",
                report.element_types["double"], report.float64_nodes
            ));
        }
        for finding in &report.unsupported {
            problems.push(format!(
                "{} node {} ({}): {}",
                provider.display_name(),
                finding.node,
                finding.op,
                finding.reason
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}
