//! The editor's view-model: a plain snapshot of what the editor shows ([`EditorModel`]), the
//! things a user can ask for ([`EditorAction`]), and the [`EditorBackend`] that produces the one
//! and carries out the other. The real backend talks to the plugin; tests use a fake.

use std::path::PathBuf;
use std::sync::Arc;

use stemflow_engine::runtime::{auto_device, ActiveDevice, DeviceChoice, DeviceId, DeviceInfo};
use stemflow_engine::{SeparatorChoice, NUM_STEMS};

use stemflow_engine::ModelInfo;

pub use stemflow_fetch::progress::{Progress as DownloadProgress, Stage as DownloadStage};

/// Whether the ONNX Runtime library is available.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeStatus {
    /// Still being looked for (the first editor open of the process).
    Loading,
    /// Loaded; its version.
    Loaded(String),
    /// Not available, and why (with the fix).
    Missing(String),
}

/// The models found in the models folders.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelList {
    /// A scan runs in the background.
    Scanning,
    /// The scan's result.
    Ready(Arc<Vec<ModelInfo>>),
}

/// Loading a model the user chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelTask {
    /// Nothing pending.
    Idle,
    /// Loading and validating the named model (the current separator keeps playing).
    Loading(String),
    /// The named model failed to load; the current separator keeps playing.
    Failed {
        /// The model's name.
        name: String,
        /// Why.
        error: String,
    },
}

/// A model Stemflow knows by name (its catalogue) that is not in the models folder yet,
/// offered for download.
#[derive(Debug, Clone, PartialEq)]
pub struct AvailableModel {
    /// Its name, also the installed file's stem.
    pub name: String,
    /// Bytes to download, when known.
    pub download_bytes: Option<u64>,
    /// Its stems, as its owner names them ("drums, bass, other, vocals").
    pub stems: String,
    /// Who publishes it.
    pub source: String,
    /// The owner's terms.
    pub terms: String,
    /// The quality the owner publishes.
    pub quality: String,
    /// Whether its terms were accepted before (then a download starts without asking).
    pub is_terms_accepted: bool,
    /// Whether only part of the file can be checked (no SHA-256 of it is published): shown.
    pub is_weakly_verified: bool,
}

/// Downloading a model of the catalogue, on a background thread.
#[derive(Debug, Clone, PartialEq)]
pub enum DownloadTask {
    /// Nothing downloading.
    Idle,
    /// Downloading, checking, converting or installing the named model; the current separator
    /// keeps playing.
    Running {
        /// The model.
        name: String,
        /// How far it has come (`None` before the first report).
        progress: Option<DownloadProgress>,
        /// Cancel was pressed; the download stops at its next read.
        is_cancelling: bool,
    },
    /// The named model could not be installed, and why; nothing was installed.
    Failed {
        /// The model.
        name: String,
        /// Why (with what to do).
        error: String,
    },
}

/// The running stream, as far as the editor shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamStatus {
    /// The separator's display name.
    pub separator_name: String,
    /// Whether it runs a model (so the device matters).
    pub is_model: bool,
    /// Whether that model computes in float16 (made for GPUs: slower on the CPU).
    pub is_float16: bool,
    /// Reported latency.
    pub latency_samples: usize,
    /// How many times as often as at Full Look-ahead the model runs.
    pub compute_factor: f64,
    /// The real-time factor a shortened look-ahead needs, measured when it was loaded.
    pub predicted_rtf: Option<f64>,
    /// Host sample rate.
    pub sample_rate_hz: f32,
    /// The device the model runs on (`None` for the built-in separator).
    pub active_device: Option<ActiveDevice>,
    /// The last device switch that failed (the previous device kept running).
    pub device_warning: Option<String>,
    /// Blocks with frames that were not ready in time, since the stream started.
    pub underrun_blocks: u64,
    /// Worker busy time over audio time, over the last second or so. `None` before any audio.
    pub real_time_factor: Option<f64>,
    /// Why the worker stopped, if it died.
    pub worker_error: Option<String>,
    /// The separator's first failure (a model error or NaN output), how often it failed and
    /// that its stems went to Other meanwhile.
    pub separator_error: Option<String>,
}

/// Everything the editor draws, gathered once per frame.
#[derive(Debug, Clone, PartialEq)]
pub struct EditorModel {
    /// Discovered devices, CPU last; `None` while discovery runs.
    pub devices: Option<Arc<[DeviceInfo]>>,
    /// The saved device choice.
    pub device_choice: DeviceChoice,
    /// The saved separator choice.
    pub separator: SeparatorChoice,
    /// Models found.
    pub models: ModelList,
    /// The user models folder (where "Models folder…" opens).
    pub models_folder: Option<PathBuf>,
    /// A model being loaded or one that failed.
    pub model_task: ModelTask,
    /// Catalogue models not in the models folder, offered for download (empty while scanning).
    pub available: Arc<[AvailableModel]>,
    /// A catalogue model being downloaded, or one that failed.
    pub download: DownloadTask,
    /// The running stream; `None` while the plugin is not active.
    pub stream: Option<StreamStatus>,
    /// ONNX Runtime.
    pub runtime: RuntimeStatus,
    /// Problems with the saved state (a device that is gone, a model that failed on load).
    pub notices: Vec<String>,
    /// Peak per stem since the last frame (linear).
    pub meter_peaks: [f32; NUM_STEMS],
}

impl Default for EditorModel {
    fn default() -> Self {
        Self {
            devices: None,
            device_choice: DeviceChoice::Auto,
            separator: SeparatorChoice::Builtin,
            models: ModelList::Scanning,
            models_folder: None,
            model_task: ModelTask::Idle,
            available: Arc::new([]),
            download: DownloadTask::Idle,
            stream: None,
            runtime: RuntimeStatus::Loading,
            notices: Vec::new(),
            meter_peaks: [0.0; NUM_STEMS],
        }
    }
}

/// What the user asked for in a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditorAction {
    /// Save this device choice and move a running model to it.
    SetDevice(DeviceChoice),
    /// Load this separator in the background; on success save it and swap it in.
    ChooseSeparator(SeparatorChoice),
    /// Scan the models folders again.
    RescanModels,
    /// Create the user models folder and open it in the file manager.
    OpenModelsFolder,
    /// Download this catalogue model in the background (the user accepted its owner's terms, now
    /// or before), then rescan and choose it.
    DownloadModel(String),
    /// Stop the running download (what arrived is kept and resumed next time).
    CancelDownload,
}

/// Supplies the editor's model and carries out its actions. Methods run on the GUI thread and
/// must return quickly: anything slow (device discovery, model scans and loads) runs on
/// background threads and shows up in later models.
pub trait EditorBackend: Send + 'static {
    /// A snapshot for this frame.
    fn model(&mut self) -> EditorModel;

    /// Carries out an action.
    fn perform(&mut self, action: EditorAction);
}

/// The Device button's cycle: Auto, every usable non-CPU device in Auto's preference order,
/// then the CPU. Devices that are not usable are left out of the cycle (their reason is listed
/// in the button's hover text); the CPU is always in it, as the device everything falls back to.
pub fn device_cycle(devices: &[DeviceInfo]) -> Vec<DeviceChoice> {
    let mut usable: Vec<DeviceId> = devices
        .iter()
        .filter(|d| d.is_usable() && d.id != DeviceId::CPU)
        .map(|d| d.id)
        .collect();
    usable.sort_by_key(|id| (id.provider, id.index));
    std::iter::once(DeviceChoice::Auto)
        .chain(usable.into_iter().map(DeviceChoice::Device))
        .chain(std::iter::once(DeviceChoice::Device(DeviceId::CPU)))
        .collect()
}

/// The choice after (`forward`) or before `current` in [`device_cycle`]. A choice that is not in
/// the cycle (a saved device that is gone or unusable) steps to Auto.
pub fn step_device(current: DeviceChoice, devices: &[DeviceInfo], forward: bool) -> DeviceChoice {
    let cycle = device_cycle(devices);
    match cycle.iter().position(|c| *c == current) {
        Some(i) if forward => cycle[(i + 1) % cycle.len()],
        Some(i) => cycle[(i + cycle.len() - 1) % cycle.len()],
        None => DeviceChoice::Auto,
    }
}

/// The device a choice resolves to before any fallback: Auto's pick, or the device itself.
pub fn resolve_choice(choice: DeviceChoice, devices: &[DeviceInfo]) -> DeviceId {
    match choice {
        DeviceChoice::Auto => auto_device(devices),
        DeviceChoice::Device(id) => id,
    }
}

/// A short, human name for a device: "CPU", "CUDA 0", "DirectML 1", "MIGraphX 0", "CoreML".
pub fn device_short_name(id: DeviceId) -> String {
    use stemflow_engine::runtime::Provider;
    let provider = match id.provider {
        Provider::Cuda => "CUDA",
        Provider::DirectMl => "DirectML",
        Provider::MiGraphX => "MIGraphX",
        Provider::CoreMl => return "CoreML".into(),
        Provider::Cpu => return "CPU".into(),
    };
    format!("{provider} {}", id.index)
}

/// A short name for a choice: "Auto" or the device's.
pub fn choice_short_name(choice: DeviceChoice) -> String {
    match choice {
        DeviceChoice::Auto => "Auto".into(),
        DeviceChoice::Device(id) => device_short_name(id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stemflow_engine::runtime::DeviceStatus;

    fn device(id: &str, is_usable: bool) -> DeviceInfo {
        let status = if is_usable {
            DeviceStatus::Usable
        } else {
            DeviceStatus::Unusable("driver too old".into())
        };
        let name = device_short_name(id.parse().unwrap());
        crate::editor::tests::device(id, &name, "", None, status)
    }

    fn ids(cycle: &[DeviceChoice]) -> Vec<String> {
        cycle.iter().map(DeviceChoice::id).collect()
    }

    #[test]
    fn cycle_is_auto_then_usable_devices_in_auto_order_then_cpu() {
        let devices = [
            device("directml:0", true),
            device("cuda:1", true),
            device("cuda:0", true),
            device("migraphx:0", false),
            device("cpu", true),
        ];
        assert_eq!(
            ids(&device_cycle(&devices)),
            ["auto", "cuda:0", "cuda:1", "directml:0", "cpu"]
        );
        // Without a runtime only the CPU is listed.
        assert_eq!(ids(&device_cycle(&[device("cpu", true)])), ["auto", "cpu"]);
        // Even an empty list keeps Auto and the CPU.
        assert_eq!(ids(&device_cycle(&[])), ["auto", "cpu"]);
    }

    #[test]
    fn stepping_wraps_both_ways_and_unknown_choices_go_to_auto() {
        let devices = [device("cuda:0", true), device("cpu", true)];
        let cuda = DeviceChoice::Device("cuda:0".parse().unwrap());
        let cpu = DeviceChoice::Device(DeviceId::CPU);
        assert_eq!(step_device(DeviceChoice::Auto, &devices, true), cuda);
        assert_eq!(step_device(cuda, &devices, true), cpu);
        assert_eq!(step_device(cpu, &devices, true), DeviceChoice::Auto);
        assert_eq!(step_device(DeviceChoice::Auto, &devices, false), cpu);
        assert_eq!(step_device(cpu, &devices, false), cuda);
        let gone = DeviceChoice::Device("directml:3".parse().unwrap());
        assert_eq!(step_device(gone, &devices, true), DeviceChoice::Auto);
        assert_eq!(step_device(gone, &devices, false), DeviceChoice::Auto);
    }

    #[test]
    fn names_are_short() {
        assert_eq!(device_short_name("cuda:1".parse().unwrap()), "CUDA 1");
        assert_eq!(device_short_name(DeviceId::CPU), "CPU");
        assert_eq!(device_short_name("coreml".parse().unwrap()), "CoreML");
        assert_eq!(choice_short_name(DeviceChoice::Auto), "Auto");
    }
}
