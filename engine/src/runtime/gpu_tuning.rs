//! [`GpuTuning`]: how a session on a GPU is set up — TF32 for float32 matrix products and
//! convolutions, cuDNN's convolution algorithm search, CUDA (and DirectML) graph capture, and
//! I/O binding to buffers allocated and bound once — from the settings file, the environment
//! and the command line, in that order of precedence (the last wins).

use std::sync::Mutex;

use ort::ep::{self, ArbitrarilyConfigurableExecutionProvider, ExecutionProviderDispatch};
use stemflow_paths as paths;

use super::device_id::{DeviceId, Provider};

/// `0` turns TF32 off on CUDA (`1`: on, the default).
pub const TF32_ENV: &str = "STEMFLOW_CUDA_TF32";
/// cuDNN's convolution algorithm search: `exhaustive` (the default), `heuristic` or `default`.
pub const CONV_SEARCH_ENV: &str = "STEMFLOW_CUDNN_CONV_SEARCH";
/// `1` captures the model run as a CUDA (or DirectML) graph and replays it (default `0`).
pub const GRAPH_CAPTURE_ENV: &str = "STEMFLOW_GPU_GRAPH";
/// `1` runs GPU sessions through I/O binding (default `0`: host tensors per run, as on the CPU;
/// on an H200 every bound run failed, see docs/models.md).
pub const IO_BINDING_ENV: &str = "STEMFLOW_IO_BINDING";

/// The settings file's keys (`settings.json` in the user data folder), same values as above
/// (`true`/`false` for the switches).
pub const SETTINGS_KEYS: [&str; 4] = ["cuda_tf32", "cudnn_conv_search", "gpu_graph", "io_binding"];

/// How cuDNN picks a convolution algorithm (ONNX Runtime's `cudnn_conv_algo_search`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConvSearch {
    /// Time every algorithm at the first run of each shape and keep the fastest.
    Exhaustive,
    /// cuDNN's heuristics, no timing (a faster first run).
    Heuristic,
    /// `IMPLICIT_PRECOMP_GEMM` always (least memory).
    Default,
}

impl ConvSearch {
    /// ONNX Runtime's value (`EXHAUSTIVE`, `HEURISTIC`, `DEFAULT`).
    pub fn ort_value(self) -> &'static str {
        match self {
            ConvSearch::Exhaustive => "EXHAUSTIVE",
            ConvSearch::Heuristic => "HEURISTIC",
            ConvSearch::Default => "DEFAULT",
        }
    }

    fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "exhaustive" => Some(ConvSearch::Exhaustive),
            "heuristic" => Some(ConvSearch::Heuristic),
            "default" => Some(ConvSearch::Default),
            _ => None,
        }
    }
}

/// How sessions on GPUs are set up. Part of a shared session's key: instances asking for other
/// settings get a session of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GpuTuning {
    /// TF32 for float32 `MatMul`/`Conv` on CUDA (Ampere and newer: 8× the float32 rate, 10-bit
    /// mantissas in the products, float32 accumulation). Default on.
    pub should_use_tf32: bool,
    /// cuDNN's convolution algorithm search (CUDA). Default exhaustive, ONNX Runtime's own.
    pub conv_search: ConvSearch,
    /// Capture the run as a CUDA graph (DirectML: its graph capture) and replay it: one launch
    /// instead of thousands, where shapes are fixed and every node runs on the GPU. Needs I/O
    /// binding (implied). Default off until measured (see docs/models.md).
    pub should_capture_graph: bool,
    /// Keep a GPU session's inputs and outputs in buffers allocated and bound once (pinned host
    /// memory; on the device under graph capture, see `bound_io.rs`). Default off: on an H200
    /// (CUDA 13, ONNX Runtime 1.31's CUDA build) every run through the earlier device-side
    /// buffers failed in ONNX Runtime (docs/models.md, "GPUs: measured"), and the host-side
    /// ones have not run on a GPU yet; a bound run that fails gives the buffers up
    /// ([`super::session_slot::SessionSlot::give_up_binding`]).
    pub should_bind_io: bool,
}

impl Default for GpuTuning {
    fn default() -> Self {
        GpuTuning {
            should_use_tf32: true,
            conv_search: ConvSearch::Exhaustive,
            should_capture_graph: false,
            should_bind_io: false,
        }
    }
}

/// Command-line overrides, set once by the CLI before sessions are built.
static OVERRIDES: Mutex<Vec<(&'static str, String)>> = Mutex::new(Vec::new());

/// Overrides one setting for this process, as its environment variable would (the CLI's
/// `--no-tf32` sets `STEMFLOW_CUDA_TF32` to `0`). Call before building sessions.
pub fn override_setting(env_name: &'static str, value: &str) {
    if let Ok(mut overrides) = OVERRIDES.lock() {
        overrides.retain(|(name, _)| *name != env_name);
        overrides.push((env_name, value.to_owned()));
    }
}

impl GpuTuning {
    /// The tuning in force: defaults, then the settings file, the environment, the command
    /// line. A value that cannot be used is ignored with a warning naming it. Not
    /// realtime-safe: reads a file and the environment.
    pub fn current() -> GpuTuning {
        let settings = paths::settings_file()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
        let overrides = OVERRIDES.lock().map(|o| o.clone()).unwrap_or_default();
        GpuTuning::resolve(
            |key| settings.as_ref()?.get(key).map(settings_text),
            |name| {
                overrides
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.clone())
                    .or_else(|| std::env::var(name).ok())
            },
        )
    }

    /// [`GpuTuning::current`] from given sources: `setting(key)` and `env(name)` (the
    /// environment, command-line overrides applied).
    pub fn resolve(
        setting: impl Fn(&str) -> Option<String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> GpuTuning {
        let mut tuning = GpuTuning::default();
        let names = [TF32_ENV, CONV_SEARCH_ENV, GRAPH_CAPTURE_ENV, IO_BINDING_ENV];
        for (name, key) in names.into_iter().zip(SETTINGS_KEYS) {
            for (value, from) in [(setting(key), key), (env(name), name)] {
                let Some(value) = value else { continue };
                if !tuning.apply(name, &value) {
                    log::warn!("{from}={value:?} is not a value Stemflow knows; ignored");
                }
            }
        }
        tuning
    }

    /// Applies one setting; `false` when the value is not one it takes.
    fn apply(&mut self, env_name: &str, value: &str) -> bool {
        let switch = match value.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "on" | "yes" => Some(true),
            "0" | "false" | "off" | "no" => Some(false),
            _ => None,
        };
        match (env_name, switch) {
            (TF32_ENV, Some(on)) => self.should_use_tf32 = on,
            (GRAPH_CAPTURE_ENV, Some(on)) => self.should_capture_graph = on,
            (IO_BINDING_ENV, Some(on)) => self.should_bind_io = on,
            (CONV_SEARCH_ENV, _) => match ConvSearch::parse(value) {
                Some(search) => self.conv_search = search,
                None => return false,
            },
            _ => return false,
        }
        true
    }

    /// Whether a session on `device` runs through bound buffers.
    pub fn binds_io(&self, device: DeviceId) -> bool {
        device != DeviceId::CPU && (self.should_bind_io || self.should_capture_graph)
    }

    /// The provider options for `device`, as ONNX Runtime names them (CUDA's
    /// `OrtCUDAProviderOptionsV2` keys; none for other providers).
    pub fn provider_options(&self, device: DeviceId) -> Vec<(&'static str, String)> {
        if device.provider != Provider::Cuda {
            return Vec::new();
        }
        let switch = |on: bool| if on { "1" } else { "0" }.to_owned();
        vec![
            ("use_tf32", switch(self.should_use_tf32)),
            (
                "cudnn_conv_algo_search",
                self.conv_search.ort_value().to_owned(),
            ),
            ("enable_cuda_graph", switch(self.should_capture_graph)),
        ]
    }

    /// Session configuration entries for `device` (DirectML's graph capture).
    pub fn session_config(&self, device: DeviceId) -> Vec<(&'static str, &'static str)> {
        match device.provider {
            Provider::DirectMl if self.should_capture_graph => {
                vec![("ep.dml.enable_graph_capture", "1")]
            }
            _ => Vec::new(),
        }
    }

    /// `tf32 on, cuDNN search exhaustive, graph off, I/O binding on`, for logs and reports.
    pub fn summary(&self) -> String {
        let on = |b: bool| if b { "on" } else { "off" };
        format!(
            "TF32 {}, cuDNN search {}, graph capture {}, I/O binding {}",
            on(self.should_use_tf32),
            self.conv_search.ort_value().to_ascii_lowercase(),
            on(self.should_capture_graph),
            on(self.should_bind_io)
        )
    }
}

/// A settings value as the text an environment variable would hold (`true` → `true`).
fn settings_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl GpuTuning {
    /// The execution provider that runs a session on `device`, set up as this tuning says
    /// ([`GpuTuning::provider_options`]) and registered so that a failure is reported instead of
    /// silently falling back to the CPU. `None` for the CPU.
    pub fn execution_provider(&self, device: DeviceId) -> Option<ExecutionProviderDispatch> {
        let index = device.index as i32;
        let dispatch = match device.provider {
            Provider::Cuda => self.cuda_provider(device).build(),
            Provider::DirectMl => ep::DirectML::default().with_device_id(index).build(),
            Provider::MiGraphX => ep::MIGraphX::default().with_device_id(index).build(),
            Provider::CoreMl => ep::CoreML::default().build(),
            Provider::Cpu => return None,
        };
        Some(dispatch.error_on_failure())
    }

    /// CUDA's provider for `device`, with this tuning's options.
    fn cuda_provider(&self, device: DeviceId) -> ep::CUDA {
        self.provider_options(device).into_iter().fold(
            ep::CUDA::default().with_device_id(device.index as i32),
            |cuda, (key, value)| cuda.with_arbitrary_config(key, value),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(settings: &[(&str, &str)], env: &[(&str, &str)]) -> GpuTuning {
        let find = |list: &[(&str, &str)], key: &str| {
            list.iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| (*v).to_owned())
        };
        GpuTuning::resolve(|k| find(settings, k), |n| find(env, n))
    }

    #[test]
    fn defaults_settings_then_environment_and_bad_values_ignored() {
        assert_eq!(from(&[], &[]), GpuTuning::default());
        let tuning = from(
            &[
                ("cuda_tf32", "false"),
                ("cudnn_conv_search", "heuristic"),
                ("io_binding", "false"),
            ],
            &[
                (IO_BINDING_ENV, "1"),
                (GRAPH_CAPTURE_ENV, "yes"),
                (CONV_SEARCH_ENV, "fastest"),
            ],
        );
        assert!(!tuning.should_use_tf32, "the settings file turns TF32 off");
        assert_eq!(
            tuning.conv_search,
            ConvSearch::Heuristic,
            "a bad value keeps the setting"
        );
        assert!(
            tuning.should_bind_io,
            "the environment beats the settings file"
        );
        assert!(tuning.should_capture_graph);
    }

    #[test]
    fn cuda_gets_its_options_other_devices_none_and_the_cpu_no_binding() {
        let cuda: DeviceId = "cuda:0".parse().unwrap();
        let dml: DeviceId = "directml:0".parse().unwrap();
        let tuning = GpuTuning {
            should_use_tf32: false,
            conv_search: ConvSearch::Heuristic,
            should_capture_graph: true,
            should_bind_io: false,
        };
        assert_eq!(
            tuning.provider_options(cuda),
            [
                ("use_tf32", "0".to_owned()),
                ("cudnn_conv_algo_search", "HEURISTIC".to_owned()),
                ("enable_cuda_graph", "1".to_owned())
            ]
        );
        assert!(tuning.provider_options(dml).is_empty());
        assert_eq!(
            tuning.session_config(dml),
            [("ep.dml.enable_graph_capture", "1")]
        );
        assert!(tuning.session_config(cuda).is_empty());
        assert!(tuning.binds_io(cuda), "graph capture needs bound buffers");
        assert!(!tuning.binds_io(DeviceId::CPU));
        let default = GpuTuning::default();
        assert_eq!(
            default.provider_options(cuda)[0],
            ("use_tf32", "1".to_owned())
        );
        assert!(
            !default.binds_io(dml) && !default.binds_io(cuda),
            "no I/O binding by default (measured: docs/models.md)"
        );
        let binding = GpuTuning {
            should_bind_io: true,
            ..default
        };
        assert!(binding.binds_io(dml) && !binding.binds_io(DeviceId::CPU));
        assert!(default
            .summary()
            .starts_with("TF32 on, cuDNN search exhaustive"));
    }

    #[test]
    fn cuda_is_registered_with_the_tunings_options() {
        // Every option the CUDA provider takes away from its default.
        let tuning = GpuTuning {
            should_use_tf32: false,
            conv_search: ConvSearch::Heuristic,
            should_capture_graph: true,
            ..GpuTuning::default()
        };
        let cuda: DeviceId = "cuda:1".parse().unwrap();
        // ONNX Runtime gets these key/value pairs (OrtCUDAProviderOptionsV2) at registration.
        let options = format!("{:?}", tuning.cuda_provider(cuda));
        for pair in [
            "\"device_id\": \"1\"",
            "\"use_tf32\": \"0\"",
            "\"cudnn_conv_algo_search\": \"HEURISTIC\"",
            "\"enable_cuda_graph\": \"1\"",
        ] {
            assert!(options.contains(pair), "{pair} not in {options}");
        }
        let default = format!("{:?}", GpuTuning::default().cuda_provider(cuda));
        assert!(default.contains("\"use_tf32\": \"1\""), "{default}");
    }
}
