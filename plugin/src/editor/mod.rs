//! The plugin's egui editor: model chooser, Device button, one strip per stem (fader, meter, mute,
//! solo) and a status line.
//!
//! - [`view::draw`] draws from a plain [`model::EditorModel`] and returns
//!   [`model::EditorAction`]s; parameters change through nice-plug's `ParamSetter`.
//! - [`model::EditorBackend`] supplies the model and carries out actions;
//!   [`backend::PluginBackend`] is the real one, tests use a fake.
//! - [`StemflowEditor`] wraps nice-plug-egui's editor so that the window size is saved with the
//!   project ([`EditorSizeField`]) and the audio thread knows when meters are wanted.

pub mod backend;
pub mod model;
pub mod theme;
pub mod view;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use nice_plug::context::gui::GuiContext;
use nice_plug::editor::dpi::{LogicalSize, NativeSize, Size};
use nice_plug::editor::{
    Editor, EditorHandle, HostMethods, Modifiers, ParentWindowHandle, ResizeHint, SizeConstraints,
    SpawnedEditor, VirtualKeyCode,
};
use nice_plug::plugin::TrackInfo;
use nice_plug_egui::{
    create_egui_editor, EguiEditor, EguiEditorHandle, EguiEditorState, EguiNiceSettings,
    NiceEguiApp, RepaintNotifier,
};
use parking_lot::{Mutex, RwLock};

use crate::params::StemflowParams;
use crate::shared::PluginShared;
use model::EditorBackend;
use view::ViewState;

/// How often the editor repaints for the meters.
const METER_REFRESH: std::time::Duration = std::time::Duration::from_millis(33);

/// One frame of the editor: gathers the model, draws it, carries out the actions and asks the
/// host for a restart when a new model is ready. Shared by the plugin's editor and the tests.
pub fn run_frame(
    ui: &mut egui::Ui,
    backend: &mut dyn EditorBackend,
    view: &mut ViewState,
    params: &StemflowParams,
    gui: &GuiContext,
) {
    let model = backend.model();
    let dt_s = ui.input(|i| i.stable_dt);
    view.update_meters(&model.meter_peaks, dt_s);
    let setter = gui.param_setter();
    let actions = view::draw(ui, &model, view, params, &setter);
    for action in actions {
        backend.perform(action);
    }
    if backend.take_restart_request() {
        gui.request_restart();
    }
    ui.ctx().request_repaint_after(METER_REFRESH);
}

/// The nice-plug-egui app: the backend, the parameters and the view state.
pub struct EditorApp {
    shared: Arc<PluginShared>,
    params: Arc<StemflowParams>,
    /// Created when the first window opens, so a plugin whose editor is never opened starts no
    /// discovery or scan threads.
    backend: Option<backend::PluginBackend>,
    view: ViewState,
    gui: Option<GuiContext>,
}

impl NiceEguiApp for EditorApp {
    fn build(
        &mut self,
        egui_ctx: egui::Context,
        nice_gui_ctx: GuiContext,
        _frame: &mut nice_plug_egui::Frame,
    ) -> Result<(), nice_plug_egui::baseview::HandlerError> {
        theme::apply(&egui_ctx);
        self.gui = Some(nice_gui_ctx);
        self.view = ViewState::default();
        match &mut self.backend {
            // Reopened: look for models added meanwhile.
            Some(backend) => backend.perform(model::EditorAction::RescanModels),
            None => {
                self.backend = Some(backend::PluginBackend::new(
                    self.shared.clone(),
                    self.params.clone(),
                ))
            }
        }
        Ok(())
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut nice_plug_egui::Frame) {
        if let (Some(gui), Some(backend)) = (&self.gui, &mut self.backend) {
            run_frame(ui, backend, &mut self.view, &self.params, gui);
        }
    }
}

/// The persisted editor size (`#[persist = "editor-size"]`), in logical points.
///
/// nice-plug-egui's [`EguiEditorState`] is not serializable and its size cannot be set after
/// creation, so this field owns it: loading state replaces it with one of the saved size, and
/// saving reads the size the window has now (egui keeps it up to date on every resize).
#[derive(Debug)]
pub struct EditorSizeField {
    state: RwLock<Arc<EguiEditorState>>,
}

impl Default for EditorSizeField {
    fn default() -> Self {
        Self::with_size(theme::DEFAULT_SIZE.0, theme::DEFAULT_SIZE.1)
    }
}

impl EditorSizeField {
    fn with_size(width: f32, height: f32) -> Self {
        Self {
            state: RwLock::new(new_state(width, height)),
        }
    }

    /// The editor state a new window uses.
    pub fn egui_state(&self) -> Arc<EguiEditorState> {
        self.state.read().clone()
    }

    /// The current size in logical points.
    pub fn logical_size(&self) -> (f32, f32) {
        let size = self.state.read().logical_size();
        (size.width, size.height)
    }
}

fn new_state(width: f32, height: f32) -> Arc<EguiEditorState> {
    let clamp = |v: f32, min: f32, max: f32| {
        if v.is_finite() {
            v.clamp(min, max)
        } else {
            min
        }
    };
    EguiEditorState::from_size(
        LogicalSize::new(
            clamp(width, theme::MIN_SIZE.0, theme::MAX_SIZE.0),
            clamp(height, theme::MIN_SIZE.1, theme::MAX_SIZE.1),
        ),
        1.0,
    )
}

impl<'a> nice_plug::params::persist::PersistentField<'a, serde_json::Value> for EditorSizeField {
    fn set(&self, new_value: serde_json::Value) {
        let dimension = |key: &str| new_value.get(key).and_then(serde_json::Value::as_f64);
        match (dimension("width"), dimension("height")) {
            (Some(width), Some(height)) => {
                *self.state.write() = new_state(width as f32, height as f32);
            }
            _ => nice_plug::nice_log!(
                "Stemflow: ignoring a saved editor size without width and height"
            ),
        }
    }

    fn map<F, R>(&self, f: F) -> R
    where
        F: Fn(&serde_json::Value) -> R,
    {
        let (width, height) = self.logical_size();
        f(&serde_json::json!({ "width": width.round(), "height": height.round() }))
    }
}

/// The plugin's [`Editor`]: nice-plug-egui's editor, rebuilt when the saved size changes, plus
/// the open flag the audio thread reads for the meters.
pub struct StemflowEditor {
    params: Arc<StemflowParams>,
    shared: Arc<PluginShared>,
    /// The egui editor and the state it was built with.
    inner: Mutex<(Arc<EguiEditorState>, EguiEditor<EditorApp>)>,
}

impl StemflowEditor {
    /// Creates the editor. Cheap: no window, no thread until the host opens it.
    pub fn new(params: Arc<StemflowParams>, shared: Arc<PluginShared>) -> Self {
        let state = params.editor_size.egui_state();
        let inner = build_egui_editor(state.clone(), &params, &shared);
        Self {
            params,
            shared,
            inner: Mutex::new((state, inner)),
        }
    }

    /// The egui editor for the current saved size, rebuilt if state was loaded since.
    fn with_inner<R>(&self, f: impl FnOnce(&EguiEditor<EditorApp>) -> R) -> R {
        let mut inner = self.inner.lock();
        let state = self.params.editor_size.egui_state();
        if !Arc::ptr_eq(&state, &inner.0) {
            *inner = (
                state.clone(),
                build_egui_editor(state, &self.params, &self.shared),
            );
        }
        f(&inner.1)
    }
}

fn build_egui_editor(
    state: Arc<EguiEditorState>,
    params: &Arc<StemflowParams>,
    shared: &Arc<PluginShared>,
) -> EguiEditor<EditorApp> {
    let app = EditorApp {
        shared: shared.clone(),
        backend: None,
        params: params.clone(),
        view: ViewState::default(),
        gui: None,
    };
    let settings = EguiNiceSettings::new()
        .with_tile("Stemflow")
        .with_resize_hint(ResizeHint {
            size_constraints: SizeConstraints::Logical {
                min_size: Some(LogicalSize::new(theme::MIN_SIZE.0, theme::MIN_SIZE.1)),
                max_size: Some(LogicalSize::new(theme::MAX_SIZE.0, theme::MAX_SIZE.1)),
            },
            ..ResizeHint::RESIZABLE
        });
    create_egui_editor(state, RepaintNotifier::new(), settings, app)
        .expect("nice-plug-egui always creates an editor")
}

impl Editor for StemflowEditor {
    type Handle = StemflowEditorHandle;

    fn spawn(
        &self,
        parent: Option<ParentWindowHandle>,
        wait_for_parent: bool,
        fallback_scale_factor: Option<f64>,
        gui_context: GuiContext,
        host: Option<HostMethods>,
    ) -> Result<SpawnedEditor<Self::Handle>, Box<dyn std::error::Error>> {
        let spawned = self.with_inner(|inner| {
            inner.spawn(
                parent,
                wait_for_parent,
                fallback_scale_factor,
                gui_context,
                host,
            )
        })?;
        Ok(SpawnedEditor {
            handle: StemflowEditorHandle {
                inner: spawned.handle,
                _open: OpenGuard::new(self.shared.clone()),
            },
            window: spawned.window,
        })
    }

    fn size(&self) -> NativeSize<u32> {
        self.with_inner(|inner| inner.size())
    }

    fn resize_hint(&self) -> ResizeHint {
        self.with_inner(|inner| inner.resize_hint())
    }

    fn track_info_updated(&self, info: TrackInfo) {
        self.with_inner(|inner| inner.track_info_updated(info));
    }
}

/// Sets the shared open flag while it lives: created when a window opens, dropped with its handle.
pub struct OpenGuard {
    shared: Arc<PluginShared>,
}

impl OpenGuard {
    /// Marks the editor open.
    pub fn new(shared: Arc<PluginShared>) -> Self {
        shared.set_editor_open(true);
        Self { shared }
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.shared.set_editor_open(false);
    }
}

/// The open editor. Dropping it closes the window (nice-plug-egui) and stops the meters.
pub struct StemflowEditorHandle {
    inner: EguiEditorHandle,
    _open: OpenGuard,
}

impl EditorHandle for StemflowEditorHandle {
    type Window = <EguiEditorHandle as EditorHandle>::Window;
    type Error = <EguiEditorHandle as EditorHandle>::Error;

    fn run_until_closed(window: Self::Window) -> Result<(), Self::Error> {
        EguiEditorHandle::run_until_closed(window)
    }

    fn set_parent(
        &self,
        parent: ParentWindowHandle,
        window: &Self::Window,
    ) -> Result<(), Self::Error> {
        self.inner.set_parent(parent, window)
    }

    fn show(&self, window: &Self::Window) -> Result<(), Self::Error> {
        self.inner.show(window)
    }

    fn hide(&self, window: &Self::Window) -> Result<(), Self::Error> {
        self.inner.hide(window)
    }

    fn set_size(
        &self,
        new_size: NativeSize<u32>,
        window: &Self::Window,
    ) -> Result<(), Self::Error> {
        self.inner.set_size(new_size, window)
    }

    fn host_main_thread_callback(&self, window: &Self::Window) {
        self.inner.host_main_thread_callback(window)
    }

    fn adjust_size(
        &self,
        new_size: NativeSize<u32>,
        window: &Self::Window,
    ) -> Option<NativeSize<u32>> {
        self.inner.adjust_size(new_size, window)
    }

    fn set_fallback_scale_factor(
        &self,
        scale_factor: f64,
        window: &Self::Window,
    ) -> Result<(), Self::Error> {
        self.inner.set_fallback_scale_factor(scale_factor, window)
    }

    fn on_virtual_key_from_host(
        &self,
        key_code: VirtualKeyCode,
        is_down: bool,
        modifiers: Modifiers,
    ) -> bool {
        self.inner
            .on_virtual_key_from_host(key_code, is_down, modifiers)
    }

    fn state_changed(&self) {
        self.inner.state_changed()
    }

    fn param_value_changed(&self, id: &str, normalized_value: f32) {
        self.inner.param_value_changed(id, normalized_value)
    }

    fn param_modulation_changed(&self, id: &str, modulation_offset: f32) {
        self.inner.param_modulation_changed(id, modulation_offset)
    }
}

/// Helper for tests and previews: the size a [`Size`] has in logical points at scale 1.
#[allow(dead_code)]
fn logical(size: Size) -> (f32, f32) {
    let size: LogicalSize<f32> = size.to_logical(1.0);
    (size.width, size.height)
}
