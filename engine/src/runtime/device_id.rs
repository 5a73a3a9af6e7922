//! Device ids and choices: which execution provider and device, as users write them
//! (`cpu`, `cuda:0`, `auto`), and the device a model really runs on ([`ActiveDevice`]).

use std::fmt;
use std::str::FromStr;

use ort::ep::{
    self, ArbitrarilyConfigurableExecutionProvider, ExecutionProvider, ExecutionProviderDispatch,
};
use serde::Serialize;

use super::gpu_tuning::GpuTuning;

/// An ONNX Runtime execution provider, in `Auto`'s order of preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// NVIDIA CUDA.
    Cuda,
    /// DirectML (Windows, any DirectX 12 GPU).
    DirectMl,
    /// AMD MIGraphX (ONNX Runtime's ROCm provider was removed in 1.23).
    MiGraphX,
    /// Apple CoreML.
    CoreMl,
    /// The CPU.
    Cpu,
}

impl Provider {
    /// All providers in `Auto` order: CUDA > DirectML > MIGraphX > CoreML > CPU.
    pub const AUTO_ORDER: [Provider; 5] = [
        Provider::Cuda,
        Provider::DirectMl,
        Provider::MiGraphX,
        Provider::CoreMl,
        Provider::Cpu,
    ];

    /// The id prefix ("cuda" in "cuda:0").
    pub fn prefix(self) -> &'static str {
        match self {
            Provider::Cuda => "cuda",
            Provider::DirectMl => "directml",
            Provider::MiGraphX => "migraphx",
            Provider::CoreMl => "coreml",
            Provider::Cpu => "cpu",
        }
    }

    /// ONNX Runtime's name for the provider.
    pub fn execution_provider_name(self) -> &'static str {
        match self {
            Provider::Cuda => "CUDAExecutionProvider",
            Provider::DirectMl => "DmlExecutionProvider",
            Provider::MiGraphX => "MIGraphXExecutionProvider",
            Provider::CoreMl => "CoreMLExecutionProvider",
            Provider::Cpu => "CPUExecutionProvider",
        }
    }

    /// Whether ids carry an index (`cuda:1`) or not (`cpu`, `coreml`).
    pub(super) fn is_indexed(self) -> bool {
        matches!(
            self,
            Provider::Cuda | Provider::DirectMl | Provider::MiGraphX
        )
    }

    /// Whether the loaded library was built with this provider. Requires a loaded runtime.
    pub(super) fn is_in_library(self) -> bool {
        let available = match self {
            Provider::Cuda => ep::CUDA::is_available(),
            Provider::DirectMl => ep::DirectML::is_available(),
            Provider::MiGraphX => ep::MIGraphX::is_available(),
            Provider::CoreMl => ep::CoreML::is_available(),
            Provider::Cpu => Ok(true),
        };
        available.unwrap_or(false)
    }
}

/// A stable device id: `cpu`, `cuda:0`, `directml:1`, `migraphx:0`, `coreml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    /// The provider.
    pub provider: Provider,
    /// The device index within the provider (0 for unindexed providers).
    pub index: u32,
}

impl DeviceId {
    /// The CPU.
    pub const CPU: DeviceId = DeviceId {
        provider: Provider::Cpu,
        index: 0,
    };

    /// The execution provider that runs a session on this device, set up as `tuning` says
    /// ([`GpuTuning::provider_options`]) and registered so that a failure is reported instead of
    /// silently falling back to the CPU. `None` for the CPU.
    pub fn execution_provider(self, tuning: &GpuTuning) -> Option<ExecutionProviderDispatch> {
        let index = self.index as i32;
        let dispatch = match self.provider {
            Provider::Cuda => self.cuda_provider(tuning).build(),
            Provider::DirectMl => ep::DirectML::default().with_device_id(index).build(),
            Provider::MiGraphX => ep::MIGraphX::default().with_device_id(index).build(),
            Provider::CoreMl => ep::CoreML::default().build(),
            Provider::Cpu => return None,
        };
        Some(dispatch.error_on_failure())
    }
}

impl DeviceId {
    /// CUDA's provider for this device, with `tuning`'s options.
    fn cuda_provider(self, tuning: &GpuTuning) -> ep::CUDA {
        tuning.provider_options(self).into_iter().fold(
            ep::CUDA::default().with_device_id(self.index as i32),
            |cuda, (key, value)| cuda.with_arbitrary_config(key, value),
        )
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.provider.is_indexed() {
            write!(f, "{}:{}", self.provider.prefix(), self.index)
        } else {
            f.write_str(self.provider.prefix())
        }
    }
}

impl Serialize for DeviceId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl FromStr for DeviceId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim().to_ascii_lowercase();
        let (prefix, index) = match s.split_once(':') {
            Some((prefix, index)) => (
                prefix.to_owned(),
                index
                    .parse::<u32>()
                    .map_err(|_| format!("'{s}': the device index must be a number"))?,
            ),
            None => (s.clone(), 0),
        };
        let provider = Provider::AUTO_ORDER
            .into_iter()
            .find(|p| p.prefix() == prefix || (prefix == "rocm" && *p == Provider::MiGraphX))
            .ok_or_else(|| {
                format!("unknown device '{s}' (expected auto, cpu, cuda:N, directml:N, migraphx:N or coreml)")
            })?;
        if !provider.is_indexed() && index != 0 {
            return Err(format!("'{s}': {} has no device index", provider.prefix()));
        }
        Ok(DeviceId { provider, index })
    }
}

/// What the user asked for: the best device, or a specific one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DeviceChoice {
    /// CUDA > DirectML > MIGraphX > CoreML > CPU, the first that works.
    #[default]
    Auto,
    /// This device, falling back to the CPU if it fails.
    Device(DeviceId),
}

impl DeviceChoice {
    /// The id saved in state and used on the command line: `auto` or a [`DeviceId`].
    pub fn id(&self) -> String {
        match self {
            DeviceChoice::Auto => "auto".into(),
            DeviceChoice::Device(id) => id.to_string(),
        }
    }
}

impl Serialize for DeviceChoice {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.id())
    }
}

impl<'de> serde::Deserialize<'de> for DeviceChoice {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = String::deserialize(deserializer)?;
        id.parse().map_err(serde::de::Error::custom)
    }
}

impl FromStr for DeviceChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().eq_ignore_ascii_case("auto") {
            Ok(DeviceChoice::Auto)
        } else {
            s.parse().map(DeviceChoice::Device)
        }
    }
}

/// The device a model runs on and why, for the editor and the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveDevice {
    /// What was asked for.
    pub requested: DeviceChoice,
    /// What runs.
    pub actual: DeviceId,
    /// Why they differ (or a later failure), if they do.
    pub fallback_reason: Option<String>,
}

/// What changed about the device a model runs on, reported between hops (see
/// `Separator::poll_events`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceEvent {
    /// A requested device switch is done: the model now runs on this device.
    DeviceSwitched(ActiveDevice),
    /// The device failed while running; the model moved (to the CPU) without a gap.
    DeviceFellBack(ActiveDevice),
    /// A requested device switch failed; the previous device keeps running.
    DeviceSwitchFailed(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::gpu_tuning::ConvSearch;

    #[test]
    fn cuda_is_registered_with_the_tunings_options() {
        let tuning = GpuTuning {
            should_use_tf32: false,
            conv_search: ConvSearch::Heuristic,
            should_capture_graph: true,
            should_bind_io: true,
        };
        let cuda: DeviceId = "cuda:1".parse().unwrap();
        // ONNX Runtime gets these key/value pairs (OrtCUDAProviderOptionsV2) at registration.
        let options = format!("{:?}", cuda.cuda_provider(&tuning));
        for pair in [
            "\"device_id\": \"1\"",
            "\"use_tf32\": \"0\"",
            "\"cudnn_conv_algo_search\": \"HEURISTIC\"",
            "\"enable_cuda_graph\": \"1\"",
        ] {
            assert!(options.contains(pair), "{pair} not in {options}");
        }
        let default = format!("{:?}", cuda.cuda_provider(&GpuTuning::default()));
        assert!(default.contains("\"use_tf32\": \"1\""), "{default}");
    }
}
