//! The real [`EditorBackend`]: reads the plugin's shared state and parameters, and runs
//! everything slow (device discovery, model scans, model loads, model downloads, opening the
//! file manager) on background threads so the GUI thread never waits and the audio thread is
//! never involved.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once, OnceLock};

use stemflow_engine::runtime::{devices, runtime, DeviceId, DeviceInfo, DeviceStatus, Provider};
use stemflow_engine::SeparatorChoice;

/// Model discovery.
use stemflow_engine::{models_dirs, scan_models};

mod downloads;
mod rtf_meter;
mod state;

use downloads::available_models;
use rtf_meter::RtfMeter;
pub use state::PluginBackend;

use super::model::{
    DownloadTask, EditorAction, EditorBackend, EditorModel, ModelList, ModelTask, RuntimeStatus,
    StreamStatus,
};
use crate::params::StemflowParams;
use crate::shared::{PluginShared, PreparedSeparator, SwapRefused};

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
                let dirs = models_dirs(&[]);
                let found = std::panic::catch_unwind(|| scan_models(&dirs)).unwrap_or_default();
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
        let result = match models_dirs(&[]).into_iter().next() {
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
            models_folder: models_dirs(&[]).into_iter().next(),
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
    models_dirs(&[])
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use stemflow_engine::runtime::DeviceChoice;
    use stemflow_engine::{LookAhead, Separator};

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

    /// A backend over `shared` and `params`, the saved separator the model at `model_path`,
    /// that has chosen the built-in separator (and seen the choice saved).
    fn backend_that_chose_the_builtin(
        shared: &Arc<PluginShared>,
        params: &Arc<StemflowParams>,
        model_path: &str,
    ) -> PluginBackend {
        let mut saved = params.saved.get();
        saved.separator = SeparatorChoice::Model(model_path.into());
        params.saved.set_state(saved);
        let mut backend = PluginBackend::new(shared.clone(), params.clone());
        backend.perform(EditorAction::ChooseSeparator(SeparatorChoice::Builtin));
        wait_until_chosen(&mut backend, params, &SeparatorChoice::Builtin);
        backend
    }

    #[test]
    fn choosing_a_separator_while_inactive_keeps_it_for_the_next_activation() {
        let shared = Arc::new(PluginShared::default());
        let params = Arc::new(StemflowParams::default());
        let _backend = backend_that_chose_the_builtin(&shared, &params, "/nowhere/model.onnx");
        assert!(shared.take_prepared_builtin().is_some());
    }

    #[test]
    fn choosing_a_separator_while_playing_swaps_the_stream_in_without_a_restart() {
        use crate::shared::{RunningStream, SeparatorFacts};
        use crate::swap::stream_swap_channel;
        use stemflow_engine::stream::{spawn_stream, ProcessingMode, StreamConfig};
        use stemflow_engine::{BuiltinSeparator, Stem};

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
        let mut backend = backend_that_chose_the_builtin(&shared, &params, "/running/model.onnx");
        assert!(
            shared.take_prepared_builtin().is_none(),
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
}
