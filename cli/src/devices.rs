//! `stemflow devices`: the ONNX Runtime library, every device it can use, and Auto's pick.

use clap::Args;
use stemflow_engine::runtime::{auto_device, devices, runtime, DeviceStatus, GpuTuning};

use crate::error::CliError;

pub const DEVICES_EXAMPLES: &str = "\
Examples:
  stemflow devices
  stemflow devices --json | jq .auto

ONNX Runtime is looked for in this order: STEMFLOW_ORT_LIB (a file or folder), the
`onnxruntime_library` in the user data folder's settings.json, next to the stemflow program,
then the user data folder's runtime/ (where `cargo xtask install` and `cargo xtask
fetch-runtime` put it). The built-in separator needs no runtime.

GPU set-up (last line; docs/models.md): STEMFLOW_CUDA_TF32=0 or --no-tf32 turns TF32 off,
STEMFLOW_CUDNN_CONV_SEARCH=exhaustive|heuristic|default, STEMFLOW_GPU_GRAPH=1 captures CUDA or
DirectML graphs, STEMFLOW_IO_BINDING=1 binds GPU sessions' inputs and outputs to buffers
allocated once; or the settings.json keys cuda_tf32, cudnn_conv_search, gpu_graph, io_binding.";

/// `stemflow devices`'s arguments.
#[derive(Args)]
pub struct DevicesArgs {
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// Runs `stemflow devices`.
pub fn run(args: &DevicesArgs) -> Result<(), CliError> {
    list_devices(args.json).map_err(CliError::Failed)
}

/// `stemflow devices`: the runtime's state, every device and Auto's pick.
fn list_devices(is_json: bool) -> Result<(), String> {
    let runtime = runtime();
    let devices = devices();
    let auto = auto_device(devices);
    if is_json {
        let value = serde_json::json!({
            "runtime": match runtime {
                Ok(r) => serde_json::json!({
                    "loaded": true,
                    "version": r.version(),
                    "library": r.library_path(),
                    "source": r.source().to_string(),
                }),
                Err(e) => serde_json::json!({ "loaded": false, "error": e.to_string() }),
            },
            "auto": auto.to_string(),
            "devices": devices,
            "gpu_setup": gpu_setup_json(&GpuTuning::current()),
        });
        crate::output::say!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    match runtime {
        Ok(r) => crate::output::say!(
            "ONNX Runtime {} from {} ({})",
            r.version(),
            r.library_path().display(),
            r.source()
        ),
        Err(e) => crate::output::say!("{e}"),
    }
    crate::output::say!();
    crate::output::say!("{:<12} {:<40} {:<10} STATUS", "ID", "NAME", "PROVIDER");
    for device in devices {
        let status = match &device.status {
            DeviceStatus::Usable => "usable".to_owned(),
            DeviceStatus::Unusable(reason) => format!("unusable: {reason}"),
        };
        crate::output::say!(
            "{:<12} {:<40} {:<10} {status}",
            device.id.to_string(),
            device.name,
            device.provider.prefix()
        );
    }
    crate::output::say!();
    crate::output::say!("Auto picks: {auto}");
    crate::output::say!("GPU set-up: {}", GpuTuning::current().summary());
    Ok(())
}

/// The GPU set-up in force, as `stemflow devices --json` reports it.
fn gpu_setup_json(tuning: &GpuTuning) -> serde_json::Value {
    serde_json::json!({
        "cuda_tf32": tuning.should_use_tf32,
        "cudnn_conv_search": tuning.conv_search.ort_value().to_ascii_lowercase(),
        "gpu_graph": tuning.should_capture_graph,
        "io_binding": tuning.should_bind_io,
    })
}

/// `--no-tf32` (separate, bench): TF32 off for this run, as `STEMFLOW_CUDA_TF32=0` would.
pub(crate) fn no_tf32_flag(is_set: bool) {
    if is_set {
        stemflow_engine::runtime::override_setting(stemflow_engine::runtime::TF32_ENV, "0");
    }
}
