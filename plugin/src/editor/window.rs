//! [`StemflowEditor`]: the window plumbing around nice-plug-egui's editor — rebuilt when the saved
//! size changes — and the open flag the audio thread reads for the meters.

use std::sync::Arc;

use nice_plug::context::gui::GuiContext;
use nice_plug::editor::dpi::{LogicalSize, NativeSize};
use nice_plug::editor::{
    Editor, EditorHandle, HostMethods, Modifiers, ParentWindowHandle, ResizeHint, SizeConstraints,
    SpawnedEditor, VirtualKeyCode,
};
use nice_plug::plugin::TrackInfo;
use nice_plug_egui::{
    create_egui_editor, EguiEditor, EguiEditorHandle, EguiEditorState, EguiNiceSettings,
    RepaintNotifier,
};
use parking_lot::Mutex;

use super::app::EditorApp;
use super::theme;
use super::view_state::ViewState;
use crate::params::StemflowParams;
use crate::shared::PluginShared;

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
