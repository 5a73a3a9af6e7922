//! `stemflow quantize`: writes an int8 version of a model (dynamic quantization, in Rust).

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use stemflow_convert::install::write_new_file;
use stemflow_convert::quantize::{quantize_model, QuantizeOptions};
use stemflow_engine::choice::{models_dirs, SeparatorChoice};
use stemflow_engine::families::params::{sidecar_candidates, uvr_table_entry};

use crate::error::CliError;
use crate::memory::describe_bytes;

pub const QUANTIZE_EXAMPLES: &str = "\
Examples:
  stemflow quantize htdemucs                      # writes htdemucs.int8.onnx next to it
  stemflow quantize model.onnx --output /tmp/model-int8.onnx
  stemflow quantize spleeter-2stems --ops matmul,conv
  stemflow bench --model htdemucs,htdemucs.int8   # speed and SDR change, side by side

Weights become int8 (7 bits, so CPUs without VNNI cannot overflow) with one scale per output
channel; activations are quantized while the model
runs (ONNX Runtime's dynamic quantization). MatMul layers (transformers, dense layers) are
quantized by default: they gain on every x86 and ARM CPU. Convolutions only with --ops conv:
ONNX Runtime's integer convolution is slower than its float one on CPUs without VNNI. The int8
file is a model like any other: listed by `stemflow models`, chosen by name. It is for the CPU;
GPUs run the float model faster.";

/// Operators `--ops` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QuantizedOp {
    /// Matrix products with constant weights.
    Matmul,
    /// Convolutions with constant weights.
    Conv,
}

/// `stemflow quantize`'s arguments.
#[derive(Args)]
pub struct QuantizeArgs {
    /// The model: a name from the models folder or an `.onnx` file.
    #[arg(value_name = "MODEL")]
    pub model: String,
    /// Where to write the int8 model (default: `<model>.int8.onnx` next to it). An existing
    /// file is never overwritten.
    #[arg(long, short, value_name = "FILE.onnx")]
    pub output: Option<PathBuf>,
    /// Another folder to look for MODEL in (repeatable).
    #[arg(long = "models-dir", value_name = "DIR")]
    pub models_dir: Vec<PathBuf>,
    /// Which operators to quantize (repeat or comma-separate).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "matmul")]
    pub ops: Vec<QuantizedOp>,
    /// Use int8's whole range for weights (8 bits instead of 7). Only for models that never run
    /// on an x86 CPU without VNNI: there, full-range weights overflow the integer sums and the
    /// output comes out wrong.
    #[arg(long)]
    pub full_range: bool,
}

/// Runs `stemflow quantize`.
pub fn run(args: &QuantizeArgs) -> Result<(), CliError> {
    let path = match SeparatorChoice::resolve(&args.model, &models_dirs(&args.models_dir)) {
        Ok(SeparatorChoice::Model(path)) if is_onnx(&path) => path,
        Ok(_) => {
            return Err(CliError::Failed(format!(
                "{} is not an ONNX model file (the built-in separator and routes have no weights to quantize)",
                args.model
            )))
        }
        Err(error) => return Err(CliError::Failed(error.to_string())),
    };
    let output = args.output.clone().unwrap_or_else(|| int8_path(&path));
    if !is_onnx(&output) {
        return Err(CliError::Usage(format!(
            "--output {} must end in .onnx",
            output.display()
        )));
    }
    let bytes = std::fs::read(&path)
        .map_err(|e| CliError::Failed(format!("cannot read {}: {e}", path.display())))?;
    let companions = parameter_files(&path, &output, &bytes)?;
    for target in std::iter::once(&output).chain(companions.iter().map(|(to, _)| to)) {
        if target.exists() {
            return Err(CliError::Failed(format!(
                "{} already exists; delete it or choose another --output (nothing was overwritten)",
                target.display()
            )));
        }
    }
    let ops = QuantizeOptions {
        matmul: args.ops.contains(&QuantizedOp::Matmul),
        conv: args.ops.contains(&QuantizedOp::Conv),
        full_range: args.full_range,
    };
    let (quantized, report) =
        quantize_model(&bytes, ops).map_err(|e| format!("{}: {e}", path.display()))?;
    drop(bytes);
    write_new_file(&output, &quantized).map_err(|e| e.to_string())?;
    for (to, contents) in &companions {
        write_new_file(to, contents).map_err(|e| e.to_string())?;
        crate::output::say_err!("Wrote the model's parameters to {}", to.display());
    }

    let mut done = Vec::new();
    if report.num_matmuls > 0 {
        done.push(format!("{} MatMul", report.num_matmuls));
    }
    if report.num_convs > 0 {
        done.push(format!("{} Conv", report.num_convs));
    }
    crate::output::say!(
        "{} → {}: {} in int8, weights {} → {}",
        path.display(),
        output.display(),
        done.join(" and "),
        describe_bytes(Some(report.weight_bytes_before)),
        describe_bytes(Some(report.weight_bytes_after)),
    );
    let mut left = Vec::new();
    if report.num_matmuls_left > 0 {
        left.push(format!("{} MatMul", report.num_matmuls_left));
    }
    if report.num_convs_left > 0 {
        let hint = if ops.conv { "" } else { " (--ops matmul,conv)" };
        left.push(format!("{} Conv{hint}", report.num_convs_left));
    }
    if report.num_conv_transposes > 0 {
        left.push(format!("{} ConvTranspose", report.num_conv_transposes));
    }
    if !left.is_empty() {
        crate::output::say!("Left in float: {}", left.join(", "));
    }
    Ok(())
}

/// The files that must sit next to the int8 model for it to load as the float one does: its
/// sidecars (`.json`, `.yaml`), copied; or, for a model UVR's MDX-Net table knows by the hash of
/// its file (which quantizing changes), the table's entry as a JSON sidecar.
fn parameter_files(
    model: &Path,
    output: &Path,
    bytes: &[u8],
) -> Result<Vec<(PathBuf, Vec<u8>)>, String> {
    let mut files = Vec::new();
    for (from, to) in sidecar_candidates(model)
        .into_iter()
        .zip(sidecar_candidates(output))
    {
        if from.is_file() {
            let contents =
                std::fs::read(&from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
            files.push((to, contents));
        }
    }
    if files.is_empty() {
        if let Some(entry) = uvr_table_entry(bytes) {
            let contents = serde_json::to_vec_pretty(&entry.values).map_err(|e| e.to_string())?;
            files.push((output.with_extension("json"), contents));
        }
    }
    Ok(files)
}

fn is_onnx(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

/// `dir/name.onnx` → `dir/name.int8.onnx`.
fn int8_path(model: &Path) -> PathBuf {
    let stem = model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    model.with_file_name(format!("{stem}.int8.onnx"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_int8_file_sits_next_to_the_model() {
        assert_eq!(
            int8_path(Path::new("/m/htdemucs.onnx")),
            Path::new("/m/htdemucs.int8.onnx")
        );
    }
}
