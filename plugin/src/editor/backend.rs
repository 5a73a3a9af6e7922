//! The real [`EditorBackend`]: reads the plugin's shared state and parameters, and runs
//! everything slow (device discovery, model scans, model loads, model downloads, opening the
//! file manager) on background threads so the GUI thread never waits and the audio thread is
//! never involved.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use stemflow_engine::choice::SeparatorChoice;
use stemflow_engine::runtime::devices::{devices, DeviceId, DeviceInfo, DeviceStatus, Provider};
use stemflow_engine::runtime::runtime;
use stemflow_engine::stream::StreamStats;

use stemflow_fetch::catalogue::{catalogue_model, CatalogueModel, CATALOGUE};
use stemflow_fetch::download::Downloader;
use stemflow_fetch::get::{install_catalogue_model, GetOptions, ModelSource};
use stemflow_fetch::terms::terms_accepted;
use stemflow_fetch::FetchError;

/// Model discovery.
pub(crate) use stemflow_engine::models;

use super::model::{
    AvailableModel, DownloadTask, EditorAction, EditorBackend, EditorModel, ModelList, ModelTask,
    RuntimeStatus, StreamStatus,
};
use crate::params::StemflowParams;
use crate::shared::{PluginShared, PreparedSeparator, SwapRefused};

/// How often the worker's real-time factor is re-measured.
const RTF_WINDOW: Duration = Duration::from_millis(750);

/// What the process-wide discovery found: devices and the runtime library.
struct Discovery {
    devices: Arc<[DeviceInfo]>,
    runtime: RuntimeStatus,
}

static DISCOVERY: OnceLock<Discovery> = OnceLock::new();
static DISCOVERY_STARTED: Once = Once::new();

/// Starts loading the runtime and probing devices on a background thread, once per process.
/// Probing can take seconds; the editor shows "looking for devices…" meanwhile.
fn start_discovery() {
    DISCOVERY_STARTED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("stemflow-discovery".into())
            .spawn(|| {
                let result = std::panic::catch_unwind(|| Discovery {
                    runtime: match runtime() {
                        Ok(runtime) => RuntimeStatus::Loaded(runtime.version().to_owned()),
                        Err(error) => RuntimeStatus::Missing(error.to_string()),
                    },
                    devices: devices().into(),
                });
                let _ =
                    DISCOVERY.set(result.unwrap_or_else(|_| {
                        cpu_only("device discovery failed unexpectedly".into())
                    }));
            });
        if let Err(error) = spawned {
            let _ = DISCOVERY.set(cpu_only(format!("cannot start device discovery: {error}")));
        }
    });
}

fn cpu_only(reason: String) -> Discovery {
    Discovery {
        devices: vec![DeviceInfo {
            id: DeviceId::CPU,
            name: "CPU".into(),
            vendor: String::new(),
            provider: Provider::Cpu,
            memory_bytes: None,
            status: DeviceStatus::Usable,
        }]
        .into(),
        runtime: RuntimeStatus::Missing(reason),
    }
}

/// Measures the worker's real-time factor over windows of [`RTF_WINDOW`].
#[derive(Default)]
struct RtfMeter {
    /// The stats being measured (a new stream starts over).
    stats: Option<Arc<StreamStats>>,
    /// Start of the current window: when, busy ns, processed frames.
    window_start: Option<(Instant, u64, u64)>,
    value: Option<f64>,
}

impl RtfMeter {
    fn update(&mut self, stats: &Arc<StreamStats>, sample_rate_hz: f32) -> Option<f64> {
        let now = Instant::now();
        let sample = (stats.worker_busy_ns(), stats.worker_processed_frames());
        if !self.stats.as_ref().is_some_and(|s| Arc::ptr_eq(s, stats)) {
            self.stats = Some(stats.clone());
            self.window_start = Some((now, sample.0, sample.1));
            self.value = rtf(sample.0, sample.1, sample_rate_hz);
        }
        if let Some((started, busy_ns, frames)) = self.window_start {
            if now.duration_since(started) >= RTF_WINDOW {
                if let Some(value) = rtf(sample.0 - busy_ns, sample.1 - frames, sample_rate_hz) {
                    self.value = Some(value);
                }
                self.window_start = Some((now, sample.0, sample.1));
            }
        }
        self.value
    }
}

/// Busy time over audio time; `None` without audio.
fn rtf(busy_ns: u64, frames: u64, sample_rate_hz: f32) -> Option<f64> {
    (frames > 0 && sample_rate_hz > 0.0)
        .then(|| (busy_ns as f64 * 1e-9) / (frames as f64 / sample_rate_hz as f64))
}

/// What background threads report back.
#[derive(Default)]
struct Background {
    models: Option<Arc<Vec<models::ModelInfo>>>,
    /// Catalogue models not in the user models folder, found by the last scan.
    available: Option<Arc<[AvailableModel]>>,
    is_scanning: bool,
    /// A scan was asked for while one ran: the running one scans again before it reports.
    should_scan_again: bool,
    model_task: Option<ModelTask>,
    /// The download thread's state (`None`: nothing downloading).
    download: Option<DownloadTask>,
    /// Set to stop the running download; shared with its thread.
    download_cancel: Option<Arc<AtomicBool>>,
    /// A model a download installed, for the GUI thread to rescan and choose.
    finished_download: Option<PathBuf>,
    folder_error: Option<String>,
}

/// The catalogue models that `found` (a scan of the models folders) lacks in `models_dir`, with
/// whether their terms were accepted. Not realtime-safe: reads the terms record.
fn available_models(found: &[models::ModelInfo], models_dir: Option<&Path>) -> Vec<AvailableModel> {
    let Some(models_dir) = models_dir else {
        return Vec::new();
    };
    CATALOGUE
        .iter()
        .filter(|entry| {
            let installed = models_dir.join(entry.installed_file());
            !found.iter().any(|info| info.path == installed) && !installed.exists()
        })
        .map(|entry| AvailableModel {
            name: entry.name.to_owned(),
            download_bytes: entry.download_bytes(),
            stems: entry.stems.join(", "),
            source: entry.source.to_owned(),
            terms: entry.terms.to_owned(),
            quality: entry.quality.to_owned(),
            is_terms_accepted: terms_accepted(entry, models_dir),
        })
        .collect()
}

/// Installs `model` into `models_dir` from `source` on a background thread, reporting its
/// progress, failure or installed model through `background`. The user accepted its terms
/// before this is called. Not realtime-safe (it spawns a thread); returns at once.
fn spawn_download(
    background: Arc<Mutex<Background>>,
    model: &'static CatalogueModel,
    source: ModelSource,
    models_dir: PathBuf,
) {
    let cancel = Arc::new(AtomicBool::new(false));
    {
        let mut state = background.lock();
        if matches!(state.download, Some(DownloadTask::Running { .. })) {
            return;
        }
        state.download = Some(DownloadTask::Running {
            name: model.name.to_owned(),
            progress: None,
            is_cancelling: false,
        });
        state.download_cancel = Some(cancel.clone());
    }
    let thread_state = background.clone();
    let spawned = std::thread::Builder::new()
        .name("stemflow-model-download".into())
        .spawn(move || {
            let options = GetOptions {
                force: false,
                accept_terms: true,
            };
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                install_catalogue_model(
                    model,
                    source,
                    &models_dir,
                    options,
                    &mut |progress| {
                        if let Some(DownloadTask::Running {
                            progress: shown, ..
                        }) = &mut thread_state.lock().download
                        {
                            *shown = Some(*progress);
                        }
                    },
                    &cancel,
                )
            }));
            let mut state = thread_state.lock();
            state.download_cancel = None;
            state.download = match result {
                Ok(Ok(installed)) => {
                    state.finished_download = Some(installed.model);
                    None
                }
                Ok(Err(FetchError::Cancelled)) => None,
                Ok(Err(error)) => Some(DownloadTask::Failed {
                    name: model.name.to_owned(),
                    error: error.to_string(),
                }),
                Err(_) => Some(DownloadTask::Failed {
                    name: model.name.to_owned(),
                    error: "the download crashed".into(),
                }),
            };
        });
    if let Err(error) = spawned {
        let mut state = background.lock();
        state.download_cancel = None;
        state.download = Some(DownloadTask::Failed {
            name: model.name.to_owned(),
            error: format!("cannot start the download: {error}"),
        });
    }
}

/// The editor's link to the plugin.
pub struct PluginBackend {
    shared: Arc<PluginShared>,
    params: Arc<StemflowParams>,
    background: Arc<Mutex<Background>>,
    rtf: RtfMeter,
}

impl PluginBackend {
    /// Creates the backend and starts device discovery and a model scan in the background.
    /// Returns at once.
    pub fn new(shared: Arc<PluginShared>, params: Arc<StemflowParams>) -> Self {
        start_discovery();
        let backend = Self {
            shared,
            params,
            background: Arc::default(),
            rtf: RtfMeter::default(),
        };
        backend.start_scan();
        backend
    }

    /// Scans the models folders on a background thread. Asked while a scan runs, it scans once
    /// more when that one ends (a model installed meanwhile is found).
    fn start_scan(&self) {
        {
            let mut background = self.background.lock();
            if background.is_scanning {
                background.should_scan_again = true;
                return;
            }
            background.is_scanning = true;
        }
        let background = self.background.clone();
        let spawned = std::thread::Builder::new()
            .name("stemflow-model-scan".into())
            .spawn(move || loop {
                let dirs = models::models_dirs(&[]);
                let found =
                    std::panic::catch_unwind(|| models::scan_models(&dirs)).unwrap_or_default();
                let available = available_models(&found, dirs.first().map(PathBuf::as_path));
                let mut background = background.lock();
                if std::mem::take(&mut background.should_scan_again) {
                    continue;
                }
                background.models = Some(Arc::new(found));
                background.available = Some(available.into());
                background.is_scanning = false;
                break;
            });
        if spawned.is_err() {
            let mut background = self.background.lock();
            background.models = Some(Arc::default());
            background.is_scanning = false;
        }
    }

    /// Downloads the catalogue model `name` into the user models folder on a background thread
    /// (the user accepted its terms); when it is installed, [`EditorBackend::model`] rescans and
    /// chooses it.
    fn start_download(&self, name: &str) {
        let Some(model) = catalogue_model(name) else {
            return;
        };
        let Some(models_dir) = models::models_dirs(&[]).into_iter().next() else {
            self.background.lock().download = Some(DownloadTask::Failed {
                name: model.name.to_owned(),
                error: "no user models folder is known on this system".into(),
            });
            return;
        };
        spawn_download(
            self.background.clone(),
            model,
            ModelSource::Download(Downloader::new()),
            models_dir,
        );
    }

    /// Asks the running download to stop; it ends at its next read.
    fn cancel_download(&self) {
        let mut background = self.background.lock();
        if let Some(cancel) = &background.download_cancel {
            cancel.store(true, Ordering::Relaxed);
        }
        if let Some(DownloadTask::Running { is_cancelling, .. }) = &mut background.download {
            *is_cancelling = true;
        }
    }

    /// Loads `choice` on a background thread; on success saves it and swaps it in while the host
    /// plays (or keeps it for the next activation when the plugin is inactive). A model that
    /// fails to load leaves the running separator as it is.
    fn choose_separator(&self, choice: SeparatorChoice) {
        let name = choice.display_name();
        {
            let mut background = self.background.lock();
            if matches!(background.model_task, Some(ModelTask::Loading(_))) {
                return;
            }
            background.model_task = Some(ModelTask::Loading(name.clone()));
        }
        let device = self.params.saved.get().device;
        let look_ahead = self.params.look_ahead.value().look_ahead();
        let shared = self.shared.clone();
        let params = self.params.clone();
        let background = self.background.clone();
        let spawned = std::thread::Builder::new()
            .name("stemflow-model-load".into())
            .spawn(move || {
                let built = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    choice
                        .build_with(device, look_ahead)
                        .map_err(|e| e.to_string())
                }))
                .unwrap_or_else(|_| Err("loading the model crashed".into()));
                let mut background_state = background.lock();
                match built {
                    Ok(separator) => {
                        // Not under the background lock: a swap spawns a thread and may join old
                        // workers.
                        drop(background_state);
                        let swapped = match shared.swap_separator(
                            choice.clone(),
                            device,
                            look_ahead,
                            separator,
                        ) {
                            Ok(()) => Ok(()),
                            Err(SwapRefused::NotActive(separator)) => {
                                drop(shared.set_prepared(PreparedSeparator {
                                    choice: choice.clone(),
                                    device,
                                    look_ahead,
                                    separator,
                                }));
                                Ok(())
                            }
                            Err(SwapRefused::Failed(error)) => Err(error),
                        };
                        let mut background_state = background.lock();
                        match swapped {
                            Ok(()) => {
                                let mut saved = params.saved.get();
                                saved.separator = choice;
                                params.saved.set_state(saved);
                                background_state.model_task = Some(ModelTask::Idle);
                            }
                            Err(error) => {
                                background_state.model_task =
                                    Some(ModelTask::Failed { name, error });
                            }
                        }
                    }
                    Err(error) => {
                        background_state.model_task = Some(ModelTask::Failed { name, error });
                    }
                }
            });
        if let Err(error) = spawned {
            self.background.lock().model_task = Some(ModelTask::Failed {
                name: "model".into(),
                error: error.to_string(),
            });
        }
    }

    fn open_models_folder(&self) {
        let result = match models::models_dirs(&[]).into_iter().next() {
            Some(folder) => open_folder(&folder),
            None => Err("no user data folder is known on this system".into()),
        };
        self.background.lock().folder_error = result
            .err()
            .map(|e| format!("Could not open the models folder: {e}"));
    }
}

impl EditorBackend for PluginBackend {
    fn model(&mut self) -> EditorModel {
        // Streams replaced by a model change are freed here, off the audio thread.
        self.shared.collect_retired();
        // A download finished: look at the models folder again and load the new model like any
        // the user chooses.
        let finished = self.background.lock().finished_download.take();
        if let Some(path) = finished {
            self.start_scan();
            self.choose_separator(SeparatorChoice::Model(path));
        }
        let saved = self.params.saved.get();
        let discovery = DISCOVERY.get();
        let stream = self.shared.stream_snapshot().map(|snapshot| {
            let stats = &snapshot.stats;
            StreamStatus {
                separator_name: snapshot.facts.name,
                is_model: snapshot.facts.is_model,
                is_float16: snapshot.facts.is_float16,
                latency_samples: snapshot.latency_samples,
                compute_factor: snapshot.facts.compute_factor,
                predicted_rtf: snapshot.facts.predicted_rtf,
                sample_rate_hz: snapshot.sample_rate_hz,
                active_device: stats.active_device(),
                device_warning: stats.device_warning(),
                underrun_blocks: stats.underrun_blocks(),
                real_time_factor: self.rtf.update(stats, snapshot.sample_rate_hz),
                worker_error: stats.worker_error(),
                separator_error: stats.separator_error().map(|e| {
                    format!(
                        "{e} ({} times); its stems went to Other",
                        stats.separator_failures()
                    )
                }),
            }
        });
        let background = self.background.lock();
        let mut notices: Vec<String> = self
            .params
            .saved
            .last_notice()
            .map(|n| n.to_string())
            .into_iter()
            .collect();
        notices.extend(background.folder_error.clone());
        EditorModel {
            devices: discovery.map(|d| d.devices.clone()),
            device_choice: saved.device,
            separator: saved.separator,
            models: match (&background.models, background.is_scanning) {
                (Some(models), false) => ModelList::Ready(models.clone()),
                _ => ModelList::Scanning,
            },
            models_folder: models::models_dirs(&[]).into_iter().next(),
            model_task: background.model_task.clone().unwrap_or(ModelTask::Idle),
            available: match (&background.available, background.is_scanning) {
                (Some(available), false) => available.clone(),
                _ => Arc::new([]),
            },
            download: background.download.clone().unwrap_or(DownloadTask::Idle),
            stream,
            runtime: discovery
                .map(|d| d.runtime.clone())
                .unwrap_or(RuntimeStatus::Loading),
            notices,
            meter_peaks: self.shared.meters.take(),
        }
    }

    fn perform(&mut self, action: EditorAction) {
        match action {
            EditorAction::SetDevice(choice) => {
                let mut saved = self.params.saved.get();
                saved.device = choice;
                self.params.saved.set_state(saved);
                self.shared.set_device(choice);
            }
            EditorAction::ChooseSeparator(choice) => self.choose_separator(choice),
            EditorAction::RescanModels => self.start_scan(),
            EditorAction::OpenModelsFolder => self.open_models_folder(),
            EditorAction::DownloadModel(name) => self.start_download(&name),
            EditorAction::CancelDownload => self.cancel_download(),
        }
    }
}

impl Drop for PluginBackend {
    /// A download still running when the plugin goes away stops at its next read (its part is
    /// kept for the next time).
    fn drop(&mut self) {
        self.cancel_download();
    }
}

/// Creates `folder` and opens it in the system's file manager without waiting for it.
/// Not realtime-safe: creates folders and spawns a process.
pub fn open_folder(folder: &Path) -> Result<(), String> {
    std::fs::create_dir_all(folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(windows) {
        "explorer"
    } else {
        "xdg-open"
    };
    let mut child = std::process::Command::new(opener)
        .arg(folder)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("{opener}: {e}"))?;
    // Reap it in the background so no zombie process is left behind.
    let _ = std::thread::Builder::new()
        .name("stemflow-open-folder".into())
        .spawn(move || {
            let _ = child.wait();
        });
    Ok(())
}

/// The folders models are looked for in (the user models folder first), for display.
#[allow(dead_code)]
pub fn model_folders() -> Vec<PathBuf> {
    models::models_dirs(&[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use stemflow_engine::look_ahead::LookAhead;
    use stemflow_engine::runtime::devices::DeviceChoice;
    use stemflow_engine::separator::Separator;

    #[test]
    fn rtf_is_busy_time_over_audio_time() {
        assert_eq!(rtf(0, 0, 48_000.0), None);
        let value = rtf(250_000_000, 48_000, 48_000.0).unwrap();
        assert!((value - 0.25).abs() < 1e-9, "{value}");
    }

    /// Waits until the backend's model task is idle again and the saved separator is `choice`.
    fn wait_until_chosen(
        backend: &mut PluginBackend,
        params: &StemflowParams,
        choice: &SeparatorChoice,
    ) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while params.saved.get().separator != *choice {
            assert!(Instant::now() < deadline, "the choice was never saved");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(backend.model().model_task, ModelTask::Idle);
    }

    #[test]
    fn choosing_a_separator_while_inactive_keeps_it_for_the_next_activation() {
        let shared = Arc::new(PluginShared::default());
        let params = Arc::new(StemflowParams::default());
        let mut saved = params.saved.get();
        saved.separator = SeparatorChoice::Model("/nowhere/model.onnx".into());
        params.saved.set_state(saved);
        let mut backend = PluginBackend::new(shared.clone(), params.clone());
        backend.perform(EditorAction::ChooseSeparator(SeparatorChoice::Builtin));
        wait_until_chosen(&mut backend, &params, &SeparatorChoice::Builtin);
        assert!(shared
            .take_prepared(
                &SeparatorChoice::Builtin,
                DeviceChoice::Auto,
                LookAhead::Full
            )
            .is_some());
    }

    #[test]
    fn choosing_a_separator_while_playing_swaps_the_stream_in_without_a_restart() {
        use crate::shared::{RunningStream, SeparatorFacts};
        use crate::swap::stream_swap_channel;
        use stemflow_engine::builtin::BuiltinSeparator;
        use stemflow_engine::stream::{spawn_stream, ProcessingMode, StreamConfig};
        use stemflow_engine::Stem;

        let shared = Arc::new(PluginShared::default());
        let params = Arc::new(StemflowParams::default());
        let config = StreamConfig {
            host_sample_rate_hz: 48_000.0,
            max_block_frames: 512,
            mode: ProcessingMode::Offline,
            is_offline_only: false,
        };
        let (handle, controller) =
            spawn_stream(Box::new(BuiltinSeparator::new()), &config).unwrap();
        let (swap_sender, mut swap) = stream_swap_channel(config.host_sample_rate_hz);
        let old_stats = handle.stats().clone();
        shared.replace_stream(Some(RunningStream {
            controller,
            config,
            choice: SeparatorChoice::Model("/running/model.onnx".into()),
            device: DeviceChoice::Auto,
            look_ahead: LookAhead::Full,
            facts: SeparatorFacts {
                name: "model".into(),
                is_model: true,
                is_float16: false,
                compute_factor: 1.0,
                predicted_rtf: None,
            },
            swap: swap_sender,
            retiring: Default::default(),
        }));
        let mut current = Box::new(handle);
        let mut saved = params.saved.get();
        saved.separator = SeparatorChoice::Model("/running/model.onnx".into());
        params.saved.set_state(saved);
        let mut backend = PluginBackend::new(shared.clone(), params.clone());
        backend.perform(EditorAction::ChooseSeparator(SeparatorChoice::Builtin));
        wait_until_chosen(&mut backend, &params, &SeparatorChoice::Builtin);
        assert!(
            shared
                .take_prepared(
                    &SeparatorChoice::Builtin,
                    DeviceChoice::Auto,
                    LookAhead::Full
                )
                .is_none(),
            "a running plugin gets the stream, not a separator for later"
        );
        let snapshot = shared.stream_snapshot().unwrap();
        assert_eq!(snapshot.facts.name, BuiltinSeparator::new().info().name());
        assert!(!snapshot.facts.is_model);

        // The audio thread: a block of fade-out, then the swap at the next block.
        let block = vec![0.25f32; 512];
        let mut gains = Vec::new();
        let mut installed_latency = None;
        for _ in 0..1000 {
            if let Some(latency) = swap.begin_block(&mut current) {
                installed_latency = Some(latency);
            }
            current.process(&block, &block);
            for _ in 0..block.len() {
                gains.push(swap.next_gain());
            }
            if installed_latency.is_some() && !swap.is_fading() {
                break;
            }
        }
        let latency = installed_latency.expect("the stream was never installed");
        assert_eq!(latency, current.latency_samples());
        assert!(
            Arc::ptr_eq(current.stats(), &snapshot.stats),
            "the new stream runs"
        );
        // Fade-out: falling to 0 within the first block, never rising.
        let fade_frames = (crate::swap::SWAP_FADE_MS / 1000.0 * 48_000.0).ceil() as usize;
        assert!(gains[..fade_frames].windows(2).all(|w| w[1] <= w[0]));
        assert_eq!(gains[fade_frames - 1], 0.0);
        // The new stream's stems arrive after its latency and fade in.
        let swapped_at = 512;
        assert!(gains[fade_frames..swapped_at + latency]
            .iter()
            .all(|&g| g == 0.0));
        for k in 0..fade_frames {
            let expected = (k + 1) as f32 / fade_frames as f32;
            assert_eq!(
                gains[swapped_at + latency + k],
                expected,
                "fade-in frame {k}"
            );
        }
        assert!(gains[swapped_at + latency + fade_frames..]
            .iter()
            .all(|&g| g == 1.0));
        let vocals = current.stem_output(Stem::Vocals, 0).to_vec();
        assert!(vocals.iter().all(|x| x.is_finite()));

        // The old stream comes back and is freed (its worker joined) off the audio thread.
        backend.model();
        assert_eq!(
            Arc::strong_count(&old_stats),
            1,
            "the old stream was not freed"
        );
    }

    #[test]
    fn a_model_that_fails_to_load_keeps_the_saved_separator() {
        let shared = Arc::new(PluginShared::default());
        let params = Arc::new(StemflowParams::default());
        let mut backend = PluginBackend::new(shared, params.clone());
        let missing = PathBuf::from("/nonexistent/stemflow/broken.onnx");
        backend.perform(EditorAction::ChooseSeparator(SeparatorChoice::Model(
            missing,
        )));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match backend.model().model_task {
                ModelTask::Failed { name, error } => {
                    assert_eq!(name, "broken");
                    assert!(!error.is_empty());
                    break;
                }
                _ => {
                    assert!(Instant::now() < deadline, "the load never finished");
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
        assert_eq!(params.saved.get().separator, SeparatorChoice::Builtin);
    }

    #[test]
    fn setting_the_device_saves_it_by_id() {
        let shared = Arc::new(PluginShared::default());
        let params = Arc::new(StemflowParams::default());
        let mut backend = PluginBackend::new(shared, params.clone());
        backend.perform(EditorAction::SetDevice(DeviceChoice::Device(DeviceId::CPU)));
        assert_eq!(params.saved.get().device.id(), "cpu");
        assert_eq!(
            backend.model().device_choice,
            DeviceChoice::Device(DeviceId::CPU)
        );
    }

    /// A loopback mirror serving `body` for every path, in small pieces when `trickle`.
    fn mirror(body: Vec<u8>, trickle: bool) -> String {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let piece = if trickle { 2048 } else { body.len().max(1) };
                for chunk in body.chunks(piece) {
                    if stream.write_all(chunk).is_err() {
                        break;
                    }
                    if trickle {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
            }
        });
        url
    }

    /// A catalogue entry (made here: the real ones' checksums are of files no test has) of
    /// one ONNX file with `bytes`' checksum.
    fn test_model(bytes: &[u8]) -> &'static CatalogueModel {
        use sha2::Digest;
        use stemflow_fetch::catalogue::{Delivery, FileCheck, RemoteFile};
        let sha256: &'static str =
            Box::leak(format!("{:x}", sha2::Sha256::digest(bytes)).into_boxed_str());
        Box::leak(Box::new(CatalogueModel {
            name: "test-model",
            family: "mdx-net",
            stems: &["vocals", "instrumental"],
            delivery: Delivery::Onnx(RemoteFile {
                url: "https://owner.invalid/test-model.onnx",
                check: FileCheck {
                    sha256: Some(sha256),
                    sha256_prefix: None,
                    uvr_md5_tail: None,
                    size_bytes: Some(bytes.len() as u64),
                },
            }),
            source: "the tests",
            terms: "for testing only",
            quality: "none",
        }))
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "stemflow-editor-download-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// Waits until the download thread has finished.
    fn wait_for_download(backend: &PluginBackend) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(
            backend.background.lock().download,
            Some(DownloadTask::Running { .. })
        ) {
            assert!(Instant::now() < deadline, "the download never finished");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn backend() -> PluginBackend {
        PluginBackend::new(
            Arc::new(PluginShared::default()),
            Arc::new(StemflowParams::default()),
        )
    }

    #[test]
    fn a_downloaded_model_is_installed_then_scanned_and_chosen() {
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 241) as u8).collect();
        let model = test_model(&bytes);
        let url = mirror(bytes.clone(), false);
        let dir = scratch("installed");
        let mut backend = backend();
        spawn_download(
            backend.background.clone(),
            model,
            ModelSource::Download(Downloader::direct().with_mirror(&url)),
            dir.clone(),
        );
        wait_for_download(&backend);
        let installed = dir.join("test-model.onnx");
        assert_eq!(std::fs::read(&installed).unwrap(), bytes);
        assert_eq!(backend.model().download, DownloadTask::Idle);
        // The next frame chose it (the fake bytes are no ONNX model, so it then fails to load,
        // leaving the running separator as it is).
        match backend.model().model_task {
            ModelTask::Loading(name) | ModelTask::Failed { name, .. } => {
                assert_eq!(name, "test-model")
            }
            ModelTask::Idle => panic!("the downloaded model was not chosen"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_download_that_fails_its_check_says_why_and_installs_nothing() {
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 241) as u8).collect();
        let model = test_model(&bytes);
        let mut wrong = bytes.clone();
        wrong[10] ^= 1;
        let url = mirror(wrong, false);
        let dir = scratch("wrong");
        let mut backend = backend();
        spawn_download(
            backend.background.clone(),
            model,
            ModelSource::Download(Downloader::direct().with_mirror(&url)),
            dir.clone(),
        );
        wait_for_download(&backend);
        match backend.model().download {
            DownloadTask::Failed { name, error } => {
                assert_eq!(name, "test-model");
                assert!(error.contains("SHA-256"), "{error}");
            }
            other => panic!("{other:?}"),
        }
        assert!(!dir.join("test-model.onnx").exists());
        assert_eq!(backend.model().model_task, ModelTask::Idle);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_cancelled_download_stops_without_installing_and_keeps_its_part() {
        let bytes: Vec<u8> = (0..400_000u32).map(|i| (i % 241) as u8).collect();
        let model = test_model(&bytes);
        let url = mirror(bytes, true);
        let dir = scratch("cancelled");
        let mut backend = backend();
        spawn_download(
            backend.background.clone(),
            model,
            ModelSource::Download(Downloader::direct().with_mirror(&url)),
            dir.clone(),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let DownloadTask::Running {
                progress: Some(progress),
                ..
            } = backend.model().download
            {
                if progress.done_bytes > 0 {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "no progress");
            std::thread::sleep(Duration::from_millis(2));
        }
        backend.perform(EditorAction::CancelDownload);
        assert!(matches!(
            backend.model().download,
            DownloadTask::Running {
                is_cancelling: true,
                ..
            } | DownloadTask::Idle
        ));
        wait_for_download(&backend);
        assert_eq!(backend.model().download, DownloadTask::Idle);
        assert!(!dir.join("test-model.onnx").exists());
        assert!(dir.join(".downloads/test-model.onnx.part").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
