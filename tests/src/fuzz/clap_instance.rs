//! A CLAP host for the fuzzer, on the bare C interface: which host extensions exist is chosen
//! per instance, every callback the plugin makes is counted and checked for its thread, and the
//! plugin's extensions are called with whatever the fuzzer chose (buffers that alias, buffers
//! missing, events out of order, streams that deliver a byte at a time).
//!
//! Threads: the thread that creates a [`ClapInstance`] is its main thread; [`ClapAudio`] is the
//! part of the interface a host calls from its audio thread, handed to another thread while the
//! main thread goes on (state saved and loaded while processing, as a host does).

use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr, CString};
use std::path::Path;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use clap_sys::audio_buffer::clap_audio_buffer;
use clap_sys::events::{clap_event_header, clap_input_events, clap_output_events};
use clap_sys::ext::audio_ports::{
    clap_audio_port_info, clap_host_audio_ports, clap_plugin_audio_ports, CLAP_EXT_AUDIO_PORTS,
};
use clap_sys::ext::audio_ports_config::{
    clap_audio_ports_config, clap_host_audio_ports_config, clap_plugin_audio_ports_config,
    CLAP_EXT_AUDIO_PORTS_CONFIG,
};
use clap_sys::ext::latency::{clap_host_latency, clap_plugin_latency, CLAP_EXT_LATENCY};
use clap_sys::ext::params::{
    clap_host_params, clap_param_clear_flags, clap_param_info, clap_param_rescan_flags,
    clap_plugin_params, CLAP_EXT_PARAMS,
};
use clap_sys::ext::render::{clap_plugin_render, CLAP_EXT_RENDER};
use clap_sys::ext::state::{clap_host_state, clap_plugin_state, CLAP_EXT_STATE};
use clap_sys::ext::tail::{clap_host_tail, clap_plugin_tail, CLAP_EXT_TAIL};
use clap_sys::ext::thread_check::{clap_host_thread_check, CLAP_EXT_THREAD_CHECK};
use clap_sys::host::clap_host;
use clap_sys::id::clap_id;
use clap_sys::plugin::clap_plugin;
use clap_sys::process::{clap_process, clap_process_status};
use clap_sys::stream::{clap_istream, clap_ostream};
use clap_sys::version::CLAP_VERSION;

use super::events::EventList;
use crate::clap_library::factory;
pub use crate::clap_library::plugin_ids;

/// Which host extensions the host offers the plugin (the plugin must cope with any subset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostCapabilities {
    /// `clap.latency`.
    pub latency: bool,
    /// `clap.tail`.
    pub tail: bool,
    /// `clap.state`.
    pub state: bool,
    /// `clap.params`.
    pub params: bool,
    /// `clap.audio-ports` (rescan).
    pub audio_ports: bool,
    /// `clap.audio-ports-config` (rescan).
    pub audio_ports_config: bool,
    /// `clap.thread-check`.
    pub thread_check: bool,
    /// A broken host: `request_restart`, `request_process`, `request_callback` and every function
    /// of the host extensions it offers are null pointers (CLAP forbids it; the plugin must not
    /// crash on it).
    pub null_callbacks: bool,
}

impl HostCapabilities {
    /// Every extension offered.
    pub const ALL: Self = Self {
        latency: true,
        tail: true,
        state: true,
        params: true,
        audio_ports: true,
        audio_ports_config: true,
        thread_check: true,
        null_callbacks: false,
    };
}

thread_local! {
    /// The token of the instances this thread is the main thread of (0: none). A thread-local
    /// `Cell` needs no allocation to read, so the plugin may ask from its audio thread.
    static MAIN_THREAD_TOKEN: Cell<u64> = const { Cell::new(0) };
    /// Whether this thread is an audio thread of the fuzzer.
    static IS_AUDIO_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as a fuzzer audio thread (for `clap.thread-check`).
pub fn mark_audio_thread() {
    IS_AUDIO_THREAD.with(|flag| flag.set(true));
}

fn main_thread_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    MAIN_THREAD_TOKEN.with(|token| {
        if token.get() == 0 {
            token.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        token.get()
    })
}

fn is_main_thread_of(token: u64) -> bool {
    MAIN_THREAD_TOKEN.with(|t| t.get() == token)
}

/// What the host saw of the plugin's callbacks. Atomics: the plugin may call from any thread.
#[derive(Debug, Default)]
pub struct HostRecord {
    /// `clap_host::request_restart` calls not yet answered.
    pub restart_requested: AtomicBool,
    /// `clap_host::request_callback` calls not yet answered.
    pub callback_requested: AtomicBool,
    /// `clap_host_params::request_flush` calls not yet answered.
    pub flush_requested: AtomicBool,
    /// `clap_host_latency::changed` calls.
    pub latency_changes: AtomicU32,
    /// Calls into the host on a thread the CLAP specification does not allow for them (a
    /// main-thread callback from another thread).
    pub wrong_thread_calls: AtomicU32,
    /// The first callback that came on the wrong thread (its name), for the report.
    pub first_wrong_thread_call: Mutex<Option<&'static str>>,
}

/// The host side of one instance: the `clap_host` the plugin holds and what it points at.
struct HostData {
    capabilities: HostCapabilities,
    main_thread: u64,
    record: HostRecord,
}

impl HostData {
    fn main_thread_only(&self, callback: &'static str) {
        if !is_main_thread_of(self.main_thread) {
            self.record
                .wrong_thread_calls
                .fetch_add(1, Ordering::SeqCst);
            if let Ok(mut first) = self.record.first_wrong_thread_call.try_lock() {
                first.get_or_insert(callback);
            }
        }
    }
}

/// The host data behind a host pointer.
///
/// # Safety
///
/// `host` must be a [`ClapInstance`]'s host, whose `host_data` points at its live [`HostData`].
unsafe fn host_data<'a>(host: *const clap_host) -> &'a HostData {
    // SAFETY: see the function's contract.
    unsafe { &*((*host).host_data as *const HostData) }
}

unsafe extern "C" fn host_get_extension(
    host: *const clap_host,
    id: *const c_char,
) -> *const c_void {
    static LATENCY: clap_host_latency = clap_host_latency {
        changed: Some(host_latency_changed),
    };
    static TAIL: clap_host_tail = clap_host_tail {
        changed: Some(host_tail_changed),
    };
    static STATE: clap_host_state = clap_host_state {
        mark_dirty: Some(host_state_mark_dirty),
    };
    static PARAMS: clap_host_params = clap_host_params {
        rescan: Some(host_params_rescan),
        clear: Some(host_params_clear),
        request_flush: Some(host_params_request_flush),
    };
    static AUDIO_PORTS: clap_host_audio_ports = clap_host_audio_ports {
        is_rescan_flag_supported: Some(host_audio_ports_is_rescan_flag_supported),
        rescan: Some(host_audio_ports_rescan),
    };
    static AUDIO_PORTS_CONFIG: clap_host_audio_ports_config = clap_host_audio_ports_config {
        rescan: Some(host_audio_ports_config_rescan),
    };
    static THREAD_CHECK: clap_host_thread_check = clap_host_thread_check {
        is_main_thread: Some(host_is_main_thread),
        is_audio_thread: Some(host_is_audio_thread),
    };
    // A broken host's extensions: every function a null pointer.
    static NULL_LATENCY: clap_host_latency = clap_host_latency { changed: None };
    static NULL_TAIL: clap_host_tail = clap_host_tail { changed: None };
    static NULL_STATE: clap_host_state = clap_host_state { mark_dirty: None };
    static NULL_PARAMS: clap_host_params = clap_host_params {
        rescan: None,
        clear: None,
        request_flush: None,
    };
    static NULL_AUDIO_PORTS: clap_host_audio_ports = clap_host_audio_ports {
        is_rescan_flag_supported: None,
        rescan: None,
    };
    static NULL_AUDIO_PORTS_CONFIG: clap_host_audio_ports_config =
        clap_host_audio_ports_config { rescan: None };
    static NULL_THREAD_CHECK: clap_host_thread_check = clap_host_thread_check {
        is_main_thread: None,
        is_audio_thread: None,
    };
    if host.is_null() || id.is_null() {
        return null();
    }
    // SAFETY: only our hosts are handed to the plugin; the id is NUL-terminated.
    let (data, id) = unsafe { (host_data(host), CStr::from_ptr(id)) };
    let caps = data.capabilities;
    // (offered, id, the working extension, a broken host's with null functions)
    let offered: &[(bool, &CStr, *const c_void, *const c_void)] = &[
        (
            caps.latency,
            CLAP_EXT_LATENCY,
            ptr(&LATENCY),
            ptr(&NULL_LATENCY),
        ),
        (caps.tail, CLAP_EXT_TAIL, ptr(&TAIL), ptr(&NULL_TAIL)),
        (caps.state, CLAP_EXT_STATE, ptr(&STATE), ptr(&NULL_STATE)),
        (
            caps.params,
            CLAP_EXT_PARAMS,
            ptr(&PARAMS),
            ptr(&NULL_PARAMS),
        ),
        (
            caps.audio_ports,
            CLAP_EXT_AUDIO_PORTS,
            ptr(&AUDIO_PORTS),
            ptr(&NULL_AUDIO_PORTS),
        ),
        (
            caps.audio_ports_config,
            CLAP_EXT_AUDIO_PORTS_CONFIG,
            ptr(&AUDIO_PORTS_CONFIG),
            ptr(&NULL_AUDIO_PORTS_CONFIG),
        ),
        (
            caps.thread_check,
            CLAP_EXT_THREAD_CHECK,
            ptr(&THREAD_CHECK),
            ptr(&NULL_THREAD_CHECK),
        ),
    ];
    offered
        .iter()
        .find(|(is_offered, ext_id, _, _)| *is_offered && *ext_id == id)
        .map_or(
            null(),
            |&(_, _, working, broken)| {
                if caps.null_callbacks {
                    broken
                } else {
                    working
                }
            },
        )
}

/// A static extension struct as the `void*` CLAP passes around.
fn ptr<T>(extension: &'static T) -> *const c_void {
    extension as *const T as *const c_void
}

unsafe extern "C" fn host_request_restart(host: *const clap_host) {
    // SAFETY: only our hosts are handed to the plugin.
    let data = unsafe { host_data(host) };
    data.record.restart_requested.store(true, Ordering::SeqCst);
}

unsafe extern "C" fn host_request_process(_: *const clap_host) {}

unsafe extern "C" fn host_request_callback(host: *const clap_host) {
    // SAFETY: only our hosts are handed to the plugin.
    let data = unsafe { host_data(host) };
    data.record.callback_requested.store(true, Ordering::SeqCst);
}

unsafe extern "C" fn host_latency_changed(host: *const clap_host) {
    // SAFETY: only our hosts are handed to the plugin.
    let data = unsafe { host_data(host) };
    data.main_thread_only("clap_host_latency.changed");
    data.record.latency_changes.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn host_tail_changed(host: *const clap_host) {
    // SAFETY: only our hosts are handed to the plugin.
    unsafe { host_data(host) }.main_thread_only("clap_host_tail.changed");
}

unsafe extern "C" fn host_state_mark_dirty(host: *const clap_host) {
    // SAFETY: only our hosts are handed to the plugin.
    unsafe { host_data(host) }.main_thread_only("clap_host_state.mark_dirty");
}

unsafe extern "C" fn host_params_rescan(host: *const clap_host, _: clap_param_rescan_flags) {
    // SAFETY: only our hosts are handed to the plugin.
    unsafe { host_data(host) }.main_thread_only("clap_host_params.rescan");
}

unsafe extern "C" fn host_params_clear(
    host: *const clap_host,
    _: clap_id,
    _: clap_param_clear_flags,
) {
    // SAFETY: only our hosts are handed to the plugin.
    unsafe { host_data(host) }.main_thread_only("clap_host_params.clear");
}

unsafe extern "C" fn host_params_request_flush(host: *const clap_host) {
    // SAFETY: only our hosts are handed to the plugin.
    let data = unsafe { host_data(host) };
    data.record.flush_requested.store(true, Ordering::SeqCst);
}

unsafe extern "C" fn host_audio_ports_is_rescan_flag_supported(
    host: *const clap_host,
    _: u32,
) -> bool {
    // SAFETY: only our hosts are handed to the plugin.
    unsafe { host_data(host) }.main_thread_only("clap_host_audio_ports.is_rescan_flag_supported");
    true
}

unsafe extern "C" fn host_audio_ports_rescan(host: *const clap_host, _: u32) {
    // SAFETY: only our hosts are handed to the plugin.
    unsafe { host_data(host) }.main_thread_only("clap_host_audio_ports.rescan");
}

unsafe extern "C" fn host_audio_ports_config_rescan(host: *const clap_host) {
    // SAFETY: only our hosts are handed to the plugin.
    unsafe { host_data(host) }.main_thread_only("clap_host_audio_ports_config.rescan");
}

unsafe extern "C" fn host_is_main_thread(host: *const clap_host) -> bool {
    // SAFETY: only our hosts are handed to the plugin.
    is_main_thread_of(unsafe { host_data(host) }.main_thread)
}

unsafe extern "C" fn host_is_audio_thread(_: *const clap_host) -> bool {
    IS_AUDIO_THREAD.with(Cell::get)
}

/// Asks the factory of the library at `path` for `plugin_id` with a null host pointer (a host
/// bug). Returns whether the plugin refused (returned null) — the only right answer.
pub fn create_with_null_host_is_refused(path: &Path, plugin_id: &str) -> Result<bool, String> {
    let factory = factory(path)?;
    let id = CString::new(plugin_id).map_err(|e| e.to_string())?;
    // SAFETY: the factory is valid; a null host is what is being tested; a plugin that is
    // created anyway is destroyed at once.
    unsafe {
        let plugin = (*factory)
            .create_plugin
            .map_or(null(), |f| f(factory, null(), id.as_ptr()));
        if plugin.is_null() {
            return Ok(true);
        }
        if let Some(destroy) = (*plugin).destroy {
            destroy(plugin);
        }
        Ok(false)
    }
}

/// The plugin's extensions, looked up once after `init` (null where it has none).
#[derive(Clone, Copy)]
struct PluginExtensions {
    params: *const clap_plugin_params,
    state: *const clap_plugin_state,
    latency: *const clap_plugin_latency,
    tail: *const clap_plugin_tail,
    audio_ports: *const clap_plugin_audio_ports,
    audio_ports_config: *const clap_plugin_audio_ports_config,
    render: *const clap_plugin_render,
}

/// One parameter as `clap_plugin_params.get_info` describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamInfo {
    /// CLAP id.
    pub id: u32,
    /// Lowest value.
    pub min_value: f64,
    /// Highest value.
    pub max_value: f64,
    /// `CLAP_PARAM_IS_STEPPED`.
    pub is_stepped: bool,
    /// The cookie the plugin gave (passed back in events, or left null).
    pub cookie: usize,
}

/// One audio port.
#[derive(Debug, Clone, PartialEq)]
pub struct PortInfo {
    /// Number of channels.
    pub channel_count: u32,
    /// Whether the port declares an in-place partner.
    pub has_in_place_pair: bool,
}

/// The ports of the current configuration.
pub type Ports = crate::PortLayout<PortInfo>;

/// One plugin instance and its host. Main-thread calls only: see the module docs.
pub struct ClapInstance {
    plugin: *const clap_plugin,
    extensions: PluginExtensions,
    /// Boxed: the plugin keeps pointers to both.
    host: Box<clap_host>,
    data: Box<HostData>,
    is_active: bool,
}

impl ClapInstance {
    /// Creates and initialises an instance of `plugin_id` from the library at `path`, offering
    /// `capabilities`. The calling thread becomes its main thread.
    pub fn create(
        path: &Path,
        plugin_id: &str,
        capabilities: HostCapabilities,
    ) -> Result<Self, String> {
        let factory = factory(path)?;
        let data = Box::new(HostData {
            capabilities,
            main_thread: main_thread_token(),
            record: HostRecord::default(),
        });
        let host = Box::new(clap_host {
            clap_version: CLAP_VERSION,
            host_data: &*data as *const HostData as *mut c_void,
            name: c"Stemflow fuzzer".as_ptr(),
            vendor: c"Stemflow developers".as_ptr(),
            url: c"https://stemflow.audio".as_ptr(),
            version: c"1".as_ptr(),
            get_extension: Some(host_get_extension),
            request_restart: (!capabilities.null_callbacks).then_some(host_request_restart as _),
            request_process: (!capabilities.null_callbacks).then_some(host_request_process as _),
            request_callback: (!capabilities.null_callbacks).then_some(host_request_callback as _),
        });
        let id = CString::new(plugin_id).map_err(|e| e.to_string())?;
        // SAFETY: the factory is valid; the host (boxed, owned by the instance) outlives the
        // plugin, which is destroyed first in `Drop`.
        let plugin = unsafe {
            (*factory)
                .create_plugin
                .map_or(null(), |f| f(factory, &*host, id.as_ptr()))
        };
        if plugin.is_null() {
            return Err(format!("create_plugin({plugin_id}) returned null"));
        }
        // SAFETY: a freshly created plugin; `init` is its first call.
        let is_initialised = unsafe { (*plugin).init.is_some_and(|init| init(plugin)) };
        if !is_initialised {
            // SAFETY: a plugin whose init failed is destroyed and nothing else (CLAP).
            unsafe {
                if let Some(destroy) = (*plugin).destroy {
                    destroy(plugin);
                }
            }
            return Err(format!("{plugin_id}: init failed"));
        }
        let extension = |id: &CStr| -> *const c_void {
            // SAFETY: an initialised plugin; the id is NUL-terminated.
            unsafe {
                (*plugin)
                    .get_extension
                    .map_or(null(), |f| f(plugin, id.as_ptr()))
            }
        };
        let extensions = PluginExtensions {
            params: extension(CLAP_EXT_PARAMS).cast(),
            state: extension(CLAP_EXT_STATE).cast(),
            latency: extension(CLAP_EXT_LATENCY).cast(),
            tail: extension(CLAP_EXT_TAIL).cast(),
            audio_ports: extension(CLAP_EXT_AUDIO_PORTS).cast(),
            audio_ports_config: extension(CLAP_EXT_AUDIO_PORTS_CONFIG).cast(),
            render: extension(CLAP_EXT_RENDER).cast(),
        };
        Ok(Self {
            plugin,
            extensions,
            host,
            data,
            is_active: false,
        })
    }

    /// What the host saw of the plugin's callbacks.
    pub fn record(&self) -> &HostRecord {
        &self.data.record
    }

    /// Answers a pending `request_callback` with `on_main_thread`, as a host's event loop does.
    pub fn pump(&self) {
        if self
            .data
            .record
            .callback_requested
            .swap(false, Ordering::SeqCst)
        {
            // SAFETY: a main-thread call on an initialised plugin.
            unsafe {
                if let Some(on_main_thread) = (*self.plugin).on_main_thread {
                    on_main_thread(self.plugin);
                }
            }
        }
    }

    /// Whether the plugin is activated.
    pub fn is_active(&self) -> bool {
        self.is_active
    }

    /// `clap_plugin.activate`. Returns what the plugin returned.
    pub fn activate(&mut self, sample_rate_hz: f64, min_frames: u32, max_frames: u32) -> bool {
        assert!(!self.is_active, "the fuzzer activated an active plugin");
        // SAFETY: a main-thread call on an inactive, initialised plugin.
        let is_activated = unsafe {
            (*self.plugin)
                .activate
                .is_some_and(|f| f(self.plugin, sample_rate_hz, min_frames, max_frames))
        };
        self.is_active = is_activated;
        is_activated
    }

    /// `clap_plugin.deactivate` (nothing if inactive).
    pub fn deactivate(&mut self) {
        if self.is_active {
            // SAFETY: a main-thread call on an active plugin that is not processing (the audio
            // thread has been joined by the caller).
            unsafe {
                if let Some(f) = (*self.plugin).deactivate {
                    f(self.plugin);
                }
            }
            self.is_active = false;
        }
    }

    /// The audio-thread interface, to hand to an audio thread while this instance is active.
    pub fn audio(&self) -> ClapAudio {
        ClapAudio {
            plugin: self.plugin,
        }
    }

    /// `clap_plugin_latency.get`; `None` without the extension.
    pub fn latency(&self) -> Option<u32> {
        // SAFETY: a main-thread call; the extension pointer came from the plugin.
        unsafe {
            self.extensions
                .latency
                .as_ref()
                .and_then(|ext| ext.get)
                .map(|get| get(self.plugin))
        }
    }

    /// `clap_plugin_tail.get`; `None` without the extension.
    pub fn tail(&self) -> Option<u32> {
        // SAFETY: as for `latency`.
        unsafe {
            self.extensions
                .tail
                .as_ref()
                .and_then(|ext| ext.get)
                .map(|get| get(self.plugin))
        }
    }

    /// `clap_plugin_render.set`; `None` without the extension.
    pub fn set_render_offline(&self, is_offline: bool) -> Option<bool> {
        let mode = if is_offline {
            clap_sys::ext::render::CLAP_RENDER_OFFLINE
        } else {
            clap_sys::ext::render::CLAP_RENDER_REALTIME
        };
        // SAFETY: a main-thread call; the extension pointer came from the plugin.
        unsafe {
            self.extensions
                .render
                .as_ref()
                .and_then(|ext| ext.set)
                .map(|set| set(self.plugin, mode))
        }
    }

    /// The parameters `clap_plugin_params` lists.
    pub fn params(&self) -> Vec<ParamInfo> {
        // SAFETY: main-thread calls; the extension pointer came from the plugin; `info` is a
        // valid, writable struct.
        unsafe {
            let Some(ext) = self.extensions.params.as_ref() else {
                return Vec::new();
            };
            let count = ext.count.map_or(0, |f| f(self.plugin));
            (0..count)
                .filter_map(|index| {
                    let mut info: clap_param_info = std::mem::zeroed();
                    let is_read = ext
                        .get_info
                        .is_some_and(|f| f(self.plugin, index, &mut info));
                    is_read.then_some(ParamInfo {
                        id: info.id,
                        min_value: info.min_value,
                        max_value: info.max_value,
                        is_stepped: info.flags & clap_sys::ext::params::CLAP_PARAM_IS_STEPPED != 0,
                        cookie: info.cookie as usize,
                    })
                })
                .collect()
        }
    }

    /// `clap_plugin_params.get_value`.
    pub fn param_value(&self, id: u32) -> Option<f64> {
        let mut value = 0.0;
        // SAFETY: a main-thread call; `value` is writable.
        let is_read = unsafe {
            self.extensions
                .params
                .as_ref()
                .and_then(|ext| ext.get_value)
                .is_some_and(|f| f(self.plugin, id, &mut value))
        };
        is_read.then_some(value)
    }

    /// `value_to_text` into a buffer of `capacity` bytes (0 is allowed: the plugin must cope).
    pub fn value_to_text(&self, id: u32, value: f64, capacity: usize) -> Option<String> {
        let mut buffer = vec![0 as c_char; capacity.max(1)];
        // SAFETY: a main-thread call; the buffer holds `capacity` bytes (at least one).
        let is_written = unsafe {
            self.extensions
                .params
                .as_ref()
                .and_then(|ext| ext.value_to_text)
                .is_some_and(|f| f(self.plugin, id, value, buffer.as_mut_ptr(), capacity as u32))
        };
        if !is_written {
            return None;
        }
        let bytes: Vec<u8> = buffer
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// `text_to_value`.
    pub fn text_to_value(&self, id: u32, text: &CStr) -> Option<f64> {
        let mut value = 0.0;
        // SAFETY: a main-thread call; the text is NUL-terminated; `value` is writable.
        let is_read = unsafe {
            self.extensions
                .params
                .as_ref()
                .and_then(|ext| ext.text_to_value)
                .is_some_and(|f| f(self.plugin, id, text.as_ptr(), &mut value))
        };
        is_read.then_some(value)
    }

    /// `clap_plugin_params.flush` with `events`, on the main thread while not processing.
    pub fn flush(&self, events: &EventList) {
        let input = events.input();
        let output = EventList::output_sink(true);
        // SAFETY: a main-thread call while not processing; the lists live for the call.
        unsafe {
            if let Some(flush) = self.extensions.params.as_ref().and_then(|ext| ext.flush) {
                flush(self.plugin, &input, &output);
            }
        }
    }

    /// The audio ports of the current configuration.
    pub fn ports(&self) -> Ports {
        // SAFETY: main-thread calls; `info` is a valid, writable struct.
        unsafe {
            let Some(ext) = self.extensions.audio_ports.as_ref() else {
                return Ports::default();
            };
            let read = |is_input: bool| -> Vec<PortInfo> {
                let count = ext.count.map_or(0, |f| f(self.plugin, is_input));
                (0..count)
                    .filter_map(|index| {
                        let mut info: clap_audio_port_info = std::mem::zeroed();
                        let is_read = ext
                            .get
                            .is_some_and(|f| f(self.plugin, index, is_input, &mut info));
                        is_read.then_some(PortInfo {
                            channel_count: info.channel_count,
                            has_in_place_pair: info.in_place_pair != clap_sys::id::CLAP_INVALID_ID,
                        })
                    })
                    .collect()
            };
            Ports {
                inputs: read(true),
                outputs: read(false),
            }
        }
    }

    /// The ids of the audio-ports-config configurations.
    pub fn port_configs(&self) -> Vec<u32> {
        // SAFETY: main-thread calls; `config` is a valid, writable struct.
        unsafe {
            let Some(ext) = self.extensions.audio_ports_config.as_ref() else {
                return Vec::new();
            };
            let count = ext.count.map_or(0, |f| f(self.plugin));
            (0..count)
                .filter_map(|index| {
                    let mut config: clap_audio_ports_config = std::mem::zeroed();
                    ext.get
                        .is_some_and(|f| f(self.plugin, index, &mut config))
                        .then_some(config.id)
                })
                .collect()
        }
    }

    /// Selects configuration `id` (the plugin must be inactive); what the plugin returned.
    pub fn select_port_config(&self, id: u32) -> bool {
        // SAFETY: a main-thread call on an inactive plugin.
        unsafe {
            self.extensions
                .audio_ports_config
                .as_ref()
                .and_then(|ext| ext.select)
                .is_some_and(|f| f(self.plugin, id))
        }
    }

    /// `clap_plugin_state.save`, written `chunk_bytes` at most per `write` call (0: unlimited);
    /// `None` if the plugin failed or has no state extension.
    pub fn save_state(&self, chunk_bytes: usize) -> Option<Vec<u8>> {
        let ext = self.extensions.state;
        let mut sink = StreamSink {
            bytes: Vec::new(),
            chunk_bytes,
        };
        let stream = clap_ostream {
            ctx: &mut sink as *mut StreamSink as *mut c_void,
            write: Some(stream_write),
        };
        // SAFETY: a main-thread call; the stream and its context live for the call.
        let is_saved = unsafe {
            ext.as_ref()
                .and_then(|ext| ext.save)
                .is_some_and(|save| save(self.plugin, &stream))
        };
        is_saved.then_some(sink.bytes)
    }

    /// `clap_plugin_state.load` of `bytes`, read `chunk_bytes` at most per `read` call (0:
    /// unlimited); what the plugin returned (`None`: no state extension).
    pub fn load_state(&self, bytes: &[u8], chunk_bytes: usize) -> Option<bool> {
        let ext = self.extensions.state;
        let mut source = StreamSource {
            bytes,
            position: 0,
            chunk_bytes,
        };
        let stream = clap_istream {
            ctx: &mut source as *mut StreamSource as *mut c_void,
            read: Some(stream_read),
        };
        // SAFETY: a main-thread call; the stream and its context live for the call.
        unsafe {
            ext.as_ref()
                .and_then(|ext| ext.load)
                .map(|load| load(self.plugin, &stream))
        }
    }
}

impl Drop for ClapInstance {
    fn drop(&mut self) {
        self.deactivate();
        // SAFETY: the plugin is inactive and not processing; destroy is its last call. The host
        // it points at is dropped after this.
        unsafe {
            if let Some(destroy) = (*self.plugin).destroy {
                destroy(self.plugin);
            }
        }
        let _ = &self.host;
    }
}

/// The audio-thread calls of an active instance. `Send`, so it can go to an audio thread.
#[derive(Clone, Copy)]
pub struct ClapAudio {
    plugin: *const clap_plugin,
}

// SAFETY: CLAP's audio-thread functions may be called from any one thread at a time; the fuzzer
// hands a `ClapAudio` to one audio thread and joins it before the instance deactivates.
unsafe impl Send for ClapAudio {}

impl ClapAudio {
    /// `start_processing`.
    pub fn start_processing(&self) -> bool {
        // SAFETY: an audio-thread call on an active plugin.
        unsafe {
            (*self.plugin)
                .start_processing
                .is_some_and(|f| f(self.plugin))
        }
    }

    /// `stop_processing`.
    pub fn stop_processing(&self) {
        // SAFETY: an audio-thread call on a processing plugin.
        unsafe {
            if let Some(f) = (*self.plugin).stop_processing {
                f(self.plugin);
            }
        }
    }

    /// `reset`.
    pub fn reset(&self) {
        // SAFETY: an audio-thread call on an active plugin.
        unsafe {
            if let Some(f) = (*self.plugin).reset {
                f(self.plugin);
            }
        }
    }

    /// `process` with `process` as built by the caller.
    ///
    /// # Safety
    ///
    /// Every buffer and event list `process` points at must be valid for its frame count for
    /// the call.
    pub unsafe fn process(&self, process: &clap_process) -> clap_process_status {
        // SAFETY: the caller's contract; an audio-thread call on a processing plugin.
        unsafe {
            (*self.plugin)
                .process
                .map_or(0, |f| f(self.plugin, process))
        }
    }
}

/// Where `clap_ostream.write` puts the bytes.
struct StreamSink {
    bytes: Vec<u8>,
    chunk_bytes: usize,
}

/// What `clap_istream.read` hands out.
struct StreamSource<'a> {
    bytes: &'a [u8],
    position: usize,
    chunk_bytes: usize,
}

unsafe extern "C" fn stream_write(
    stream: *const clap_ostream,
    buffer: *const c_void,
    size: u64,
) -> i64 {
    if stream.is_null() || (buffer.is_null() && size > 0) {
        return -1;
    }
    // SAFETY: the context is the `StreamSink` of `save_state`, alive for the call; the plugin
    // passes `size` readable bytes.
    unsafe {
        let sink = &mut *((*stream).ctx as *mut StreamSink);
        let mut size = size as usize;
        if sink.chunk_bytes > 0 {
            size = size.min(sink.chunk_bytes);
        }
        if size > 0 {
            sink.bytes
                .extend_from_slice(std::slice::from_raw_parts(buffer as *const u8, size));
        }
        size as i64
    }
}

unsafe extern "C" fn stream_read(
    stream: *const clap_istream,
    buffer: *mut c_void,
    size: u64,
) -> i64 {
    if stream.is_null() || (buffer.is_null() && size > 0) {
        return -1;
    }
    // SAFETY: the context is the `StreamSource` of `load_state`, alive for the call; the plugin
    // passes `size` writable bytes.
    unsafe {
        let source = &mut *((*stream).ctx as *mut StreamSource);
        let left = source.bytes.len() - source.position;
        let mut size = (size as usize).min(left);
        if source.chunk_bytes > 0 {
            size = size.min(source.chunk_bytes);
        }
        std::ptr::copy_nonoverlapping(
            source.bytes[source.position..].as_ptr(),
            buffer as *mut u8,
            size,
        );
        source.position += size;
        size as i64
    }
}

/// A `clap_audio_buffer` over channel pointers (32-bit unless `data64` is set).
pub fn audio_buffer(
    data32: *mut *mut f32,
    data64: *mut *mut f64,
    channel_count: u32,
    constant_mask: u64,
) -> clap_audio_buffer {
    clap_audio_buffer {
        data32,
        data64,
        channel_count,
        latency: 0,
        constant_mask,
    }
}

/// Pointers to each channel of each port's buffers (`ports[port][channel]`), the tables a
/// `clap_audio_buffer` or a VST3 bus points into.
pub fn channel_pointers<T>(ports: &mut [Vec<Vec<T>>]) -> Vec<Vec<*mut T>> {
    ports
        .iter_mut()
        .map(|port| port.iter_mut().map(|c| c.as_mut_ptr()).collect())
        .collect()
}

/// One 32-bit `clap_audio_buffer` per port over `pointers` (from [`channel_pointers`]), none
/// marked constant.
pub fn audio_buffers32(pointers: &mut [Vec<*mut f32>]) -> Vec<clap_audio_buffer> {
    pointers
        .iter_mut()
        .map(|port| {
            audio_buffer(
                port.as_mut_ptr(),
                std::ptr::null_mut(),
                port.len() as u32,
                0,
            )
        })
        .collect()
}

/// A `clap_process` for one call.
#[allow(clippy::too_many_arguments)]
pub fn process_call(
    steady_time: i64,
    frames_count: u32,
    transport: *const clap_sys::events::clap_event_transport,
    inputs: &[clap_audio_buffer],
    outputs: &mut [clap_audio_buffer],
    in_events: &clap_input_events,
    out_events: &clap_output_events,
) -> clap_process {
    clap_process {
        steady_time,
        frames_count,
        transport,
        audio_inputs: if inputs.is_empty() {
            null()
        } else {
            inputs.as_ptr()
        },
        audio_outputs: if outputs.is_empty() {
            null_mut()
        } else {
            outputs.as_mut_ptr()
        },
        audio_inputs_count: inputs.len() as u32,
        audio_outputs_count: outputs.len() as u32,
        in_events,
        out_events,
    }
}

/// The header type events are read through.
pub type EventHeader = clap_event_header;
