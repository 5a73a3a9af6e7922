//! Devices: what can run a model, discovered once per process, and the `Auto` choice.

use std::sync::OnceLock;

use serde::Serialize;

use super::library::{runtime, RuntimeError};

pub use super::device_id::{ActiveDevice, DeviceChoice, DeviceEvent, DeviceId, Provider};

/// A tiny graph (`y = x + 1` on `[1, 4]`) used to prove a provider works on a device.
/// Written by `models/make_test_models.py`.
pub const PROBE_MODEL: &[u8] = include_bytes!("../../../models/test/probe.onnx");

/// The most devices of one provider that discovery probes.
const MAX_DEVICES_PER_PROVIDER: u32 = 8;

/// Whether a device can run models.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "reason", rename_all = "lowercase")]
pub enum DeviceStatus {
    /// A session was created and run on it.
    Usable,
    /// It cannot be used, and why.
    Unusable(String),
}

/// A discovered device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceInfo {
    /// Stable id.
    pub id: DeviceId,
    /// Human-readable name.
    pub name: String,
    /// Hardware vendor, where known.
    pub vendor: String,
    /// The execution provider.
    pub provider: Provider,
    /// Device memory in bytes, where known.
    pub memory_bytes: Option<u64>,
    /// Usable or not, and why.
    pub status: DeviceStatus,
}

impl DeviceInfo {
    /// Whether models can run on it.
    pub fn is_usable(&self) -> bool {
        self.status == DeviceStatus::Usable
    }
}

static DEVICES: OnceLock<Vec<DeviceInfo>> = OnceLock::new();

/// Every device found, CPU last, discovered on first use (probing takes a moment per
/// provider). Without a runtime, only the CPU is listed (for the built-in separator).
/// Not realtime-safe.
pub fn devices() -> &'static [DeviceInfo] {
    DEVICES.get_or_init(|| match runtime() {
        Ok(_) => discover(),
        Err(error) => vec![cpu_device(DeviceStatus::Usable, None, Some(error))],
    })
}

/// The device `Auto` resolves to: the first usable one in provider order.
pub fn auto_device(devices: &[DeviceInfo]) -> DeviceId {
    Provider::AUTO_ORDER
        .iter()
        .flat_map(|provider| devices.iter().filter(move |d| d.provider == *provider))
        .find(|d| d.is_usable())
        .map(|d| d.id)
        .unwrap_or(DeviceId::CPU)
}

/// The devices to try for a choice, in order: `Auto` → every usable device in provider order;
/// a specific device → that device, then the CPU. Always ends with the CPU.
pub fn candidates_for(choice: DeviceChoice, devices: &[DeviceInfo]) -> Vec<DeviceId> {
    let mut order: Vec<DeviceId> = match choice {
        DeviceChoice::Auto => {
            let mut usable: Vec<DeviceId> = devices
                .iter()
                .filter(|d| d.is_usable())
                .map(|d| d.id)
                .collect();
            usable.sort_by_key(|id| (id.provider, id.index));
            usable
        }
        DeviceChoice::Device(id) => vec![id],
    };
    if order.last() != Some(&DeviceId::CPU) {
        order.retain(|id| *id != DeviceId::CPU);
        order.push(DeviceId::CPU);
    }
    order
}

fn cpu_device(
    status: DeviceStatus,
    vendor: Option<String>,
    runtime_error: Option<&RuntimeError>,
) -> DeviceInfo {
    DeviceInfo {
        id: DeviceId::CPU,
        name: match runtime_error {
            Some(_) => "CPU (built-in separator only: ONNX Runtime not loaded)".into(),
            None => "CPU".into(),
        },
        vendor: vendor.unwrap_or_default(),
        provider: Provider::Cpu,
        memory_bytes: None,
        status,
    }
}

/// Probes every provider the loaded library has. Requires a loaded runtime.
fn discover() -> Vec<DeviceInfo> {
    let Ok(runtime) = runtime() else {
        return vec![];
    };
    // Hardware ONNX Runtime enumerated itself (api-22+): vendor names.
    let mut cpu_vendor = None;
    let mut gpu_vendors: Vec<(String, String)> = Vec::new();
    for device in runtime.environment().devices() {
        let hardware = device.hardware_device();
        let vendor = hardware.vendor().unwrap_or("").to_owned();
        let ep_name = device.ep().unwrap_or("").to_owned();
        match hardware.ty() {
            ort::memory::DeviceType::CPU => cpu_vendor = Some(vendor),
            _ => gpu_vendors.push((ep_name, vendor)),
        }
    }

    let mut found = Vec::new();
    for provider in Provider::AUTO_ORDER {
        if provider == Provider::Cpu || !provider.is_in_library() {
            continue;
        }
        let vendor = gpu_vendors
            .iter()
            .find(|(ep, _)| ep == provider.execution_provider_name())
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| match provider {
                Provider::Cuda => "NVIDIA".into(),
                Provider::MiGraphX => "AMD".into(),
                Provider::CoreMl => "Apple".into(),
                _ => String::new(),
            });
        let max_index = if provider.is_indexed() {
            MAX_DEVICES_PER_PROVIDER
        } else {
            1
        };
        for index in 0..max_index {
            let id = DeviceId { provider, index };
            let status = match probe(id) {
                Ok(()) => DeviceStatus::Usable,
                Err(error) if index == 0 => DeviceStatus::Unusable(error),
                // Past the last device of this provider.
                Err(_) => break,
            };
            let is_usable = status == DeviceStatus::Usable;
            found.push(DeviceInfo {
                id,
                name: format!(
                    "{} device {index}",
                    provider
                        .execution_provider_name()
                        .trim_end_matches("ExecutionProvider")
                ),
                vendor: vendor.clone(),
                provider,
                memory_bytes: None,
                status,
            });
            if !is_usable {
                break;
            }
        }
    }
    let cpu_status = match probe(DeviceId::CPU) {
        Ok(()) => DeviceStatus::Usable,
        Err(e) => DeviceStatus::Unusable(e),
    };
    found.push(cpu_device(cpu_status, cpu_vendor, None));
    found
}

/// Creates and runs a session of [`PROBE_MODEL`] on `id`.
pub fn probe(id: DeviceId) -> Result<(), String> {
    let session = super::build::build_session(id, PROBE_MODEL, 1, None)?;
    let mut session = session;
    let input = ort::value::Tensor::from_array(([1usize, 4], vec![0.0f32; 4]))
        .map_err(|e| e.to_string())?;
    let outputs = session
        .run(ort::inputs!["x" => input])
        .map_err(|e| e.to_string())?;
    let y = outputs["y"]
        .try_extract_array::<f32>()
        .map_err(|e| e.to_string())?;
    if y.iter().all(|&v| v == 1.0) {
        Ok(())
    } else {
        Err(format!("the probe model computed wrong values on {id}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_bad_ids_explain_themselves() {
        for text in [
            "cpu",
            "cuda:0",
            "cuda:3",
            "directml:1",
            "migraphx:0",
            "coreml",
        ] {
            let id: DeviceId = text.parse().unwrap();
            assert_eq!(id.to_string(), text);
        }
        assert_eq!(
            "ROCm:0".parse::<DeviceId>().unwrap().to_string(),
            "migraphx:0"
        );
        assert_eq!("cuda".parse::<DeviceId>().unwrap().to_string(), "cuda:0");
        assert!("tpu:0"
            .parse::<DeviceId>()
            .unwrap_err()
            .contains("unknown device"));
        assert!("cuda:x".parse::<DeviceId>().unwrap_err().contains("number"));
        assert!("cpu:1".parse::<DeviceId>().is_err());
        assert_eq!("auto".parse::<DeviceChoice>().unwrap(), DeviceChoice::Auto);
        assert_eq!(DeviceChoice::Auto.id(), "auto");
    }

    fn device(id: &str, is_usable: bool) -> DeviceInfo {
        let id: DeviceId = id.parse().unwrap();
        DeviceInfo {
            id,
            name: id.to_string(),
            vendor: String::new(),
            provider: id.provider,
            memory_bytes: None,
            status: if is_usable {
                DeviceStatus::Usable
            } else {
                DeviceStatus::Unusable("no".into())
            },
        }
    }

    #[test]
    fn auto_prefers_cuda_then_directml_then_migraphx_then_coreml_then_cpu() {
        let all = vec![
            device("cpu", true),
            device("coreml", true),
            device("migraphx:0", true),
            device("directml:0", true),
            device("cuda:1", true),
            device("cuda:0", false),
        ];
        assert_eq!(auto_device(&all).to_string(), "cuda:1");
        assert_eq!(auto_device(&all[..4]).to_string(), "directml:0");
        assert_eq!(auto_device(&all[..3]).to_string(), "migraphx:0");
        assert_eq!(auto_device(&all[..2]).to_string(), "coreml");
        assert_eq!(auto_device(&all[..1]).to_string(), "cpu");
        let order: Vec<String> = candidates_for(DeviceChoice::Auto, &all)
            .iter()
            .map(|d| d.to_string())
            .collect();
        assert_eq!(
            order,
            ["cuda:1", "directml:0", "migraphx:0", "coreml", "cpu"]
        );
        let explicit: Vec<String> =
            candidates_for(DeviceChoice::Device("cuda:0".parse().unwrap()), &all)
                .iter()
                .map(|d| d.to_string())
                .collect();
        assert_eq!(explicit, ["cuda:0", "cpu"]);
    }
}
