//! `stemflow quantize`: writes an int8 version of a model (dynamic quantization, in Rust), or
//! with `--fp16` a float16 version for GPUs.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use stemflow_convert::float16::convert_model;
use stemflow_convert::quantize::{quantize_model, QuantizeOptions};
use stemflow_engine::families::{sidecar_candidates, uvr_table_entry};
use stemflow_engine::SeparatorChoice;
use stemflow_fetch::files::write_new_file;

use crate::error::CliError;
use crate::memory::describe_bytes;
use crate::model_folders::SearchFolders;

pub const QUANTIZE_EXAMPLES: &str = "\
Examples:
  stemflow quantize htdemucs                      # writes htdemucs.int8.onnx next to it
  stemflow quantize model.onnx --output /tmp/model-int8.onnx
  stemflow quantize spleeter-2stems --ops matmul,conv
  stemflow bench --model htdemucs,htdemucs.int8   # speed and SDR change, side by side
  stemflow quantize htdemucs --fp16               # writes htdemucs.fp16.onnx, for GPUs

Weights become int8 (7 bits, so CPUs without VNNI cannot overflow) with one scale per output
channel; activations are quantized while the model
runs (ONNX Runtime's dynamic quantization). MatMul layers (transformers, dense layers) are
quantized by default: they gain on every x86 and ARM CPU. Convolutions only with --ops conv:
ONNX Runtime's integer convolution is slower than its float one on CPUs without VNNI. The int8
file is a model like any other: listed by `stemflow models`, chosen by name. It is for the CPU;
GPUs run the float model faster.

--fp16 writes a float16 version instead, for GPUs (CUDA, DirectML, CoreML, MIGraphX): half the
file and memory, and tensor cores. Inputs and outputs stay float32; shape arithmetic and the
few operators float16 cannot serve stay float32. On the CPU it is slower than the float model.";

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
    #[command(flatten)]
    pub models_dirs: SearchFolders,
    /// Which operators to quantize (repeat or comma-separate).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "matmul")]
    pub ops: Vec<QuantizedOp>,
    /// Use int8's whole range for weights (8 bits instead of 7). Only for models that never run
    /// on an x86 CPU without VNNI: there, full-range weights overflow the integer sums and the
    /// output comes out wrong.
    #[arg(long, conflicts_with = "fp16")]
    pub full_range: bool,
    /// Write a float16 version for GPUs instead of int8 (default output `<model>.fp16.onnx`).
    #[arg(long, conflicts_with = "ops")]
    pub fp16: bool,
}

/// Runs `stemflow quantize`.
pub fn run(args: &QuantizeArgs) -> Result<(), CliError> {
    let path = match SeparatorChoice::resolve(&args.model, &args.models_dirs.dirs()) {
        Ok(SeparatorChoice::Model(path)) if is_onnx(&path) => path,
        Ok(_) => {
            return Err(CliError::Failed(format!(
                "{} is not an ONNX model file (the built-in separator and routes have no weights to quantize)",
                args.model
            )))
        }
        Err(error) => return Err(CliError::Failed(error.to_string())),
    };
    let suffix = if args.fp16 { "fp16" } else { "int8" };
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| variant_path(&path, suffix));
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
    if args.fp16 {
        let (half, report) =
            convert_model(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        drop(bytes);
        write_new_file(&output, &half).map_err(|e| e.to_string())?;
        write_companions(&companions)?;
        crate::output::say!(
            "{} → {}: {} nodes in float16, weights {} → {}",
            path.display(),
            output.display(),
            report.num_half_nodes,
            describe_bytes(Some(report.weight_bytes_before)),
            describe_bytes(Some(report.weight_bytes_after)),
        );
        crate::output::say!(
            "Kept float32: {} nodes (shape arithmetic, operators float16 cannot serve); {} casts added",
            report.num_float_nodes,
            report.num_casts
        );
        if report.num_clamped > 0 {
            crate::output::say_err!(
                "Warning: {} weights lie beyond float16's range and were clamped to ±65504; compare the outputs (`stemflow bench --model NAME,NAME.fp16`)",
                report.num_clamped
            );
        }
        return Ok(());
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
    write_companions(&companions)?;

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

/// Writes the parameter files [`parameter_files`] found (never over an existing file).
fn write_companions(companions: &[(PathBuf, Vec<u8>)]) -> Result<(), CliError> {
    for (to, contents) in companions {
        write_new_file(to, contents).map_err(|e| e.to_string())?;
        crate::output::say_err!("Wrote the model's parameters to {}", to.display());
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

/// `dir/name.onnx` → `dir/name.<suffix>.onnx` (`int8`, `fp16`).
fn variant_path(model: &Path, suffix: &str) -> PathBuf {
    let stem = model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    model.with_file_name(format!("{stem}.{suffix}.onnx"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_int8_and_fp16_files_sit_next_to_the_model() {
        assert_eq!(
            variant_path(Path::new("/m/htdemucs.onnx"), "int8"),
            Path::new("/m/htdemucs.int8.onnx")
        );
        assert_eq!(
            variant_path(Path::new("/m/htdemucs.onnx"), "fp16"),
            Path::new("/m/htdemucs.fp16.onnx")
        );
    }
}
