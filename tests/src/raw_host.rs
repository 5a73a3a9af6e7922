//! [`RawPlugin`]: the built plugin driven through the bare CLAP C interface, for what a safe host
//! API cannot express: output channel pointers that alias inputs or each other, null or missing
//! buses, and host callbacks counted exactly (restart requests, latency changes).
//!
//! Everything here is `unsafe` FFI with the plugin under test; each call documents the CLAP
//! contract it keeps.

use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};

use clap_sys::audio_buffer::clap_audio_buffer;
use clap_sys::events::{clap_event_header, clap_input_events, clap_output_events};
use clap_sys::ext::latency::{clap_host_latency, clap_plugin_latency, CLAP_EXT_LATENCY};
use clap_sys::ext::render::{
    clap_plugin_render, CLAP_EXT_RENDER, CLAP_RENDER_OFFLINE, CLAP_RENDER_REALTIME,
};
use clap_sys::host::clap_host;
use clap_sys::plugin::clap_plugin;
use clap_sys::process::clap_process;
use clap_sys::version::CLAP_VERSION;

/// What the host counted of the plugin's callbacks.
#[derive(Debug, Default)]
pub struct HostCounters {
    /// `clap_host::request_restart` calls.
    pub restart_requests: AtomicUsize,
    /// `clap_host_latency::changed` calls.
    pub latency_changes: AtomicUsize,
}

unsafe extern "C" fn host_get_extension(
    host: *const clap_host,
    id: *const c_char,
) -> *const c_void {
    static HOST_LATENCY: clap_host_latency = clap_host_latency {
        changed: Some(host_latency_changed),
    };
    let _ = host;
    // SAFETY: the plugin passes a NUL-terminated id.
    if unsafe { CStr::from_ptr(id) } == CLAP_EXT_LATENCY {
        &HOST_LATENCY as *const clap_host_latency as *const c_void
    } else {
        null()
    }
}

/// The counters behind a host pointer.
///
/// # Safety
///
/// `host` must be a [`RawPlugin`]'s host, whose `host_data` points at its live counters.
unsafe fn counters<'a>(host: *const clap_host) -> &'a HostCounters {
    // SAFETY: see the function's contract.
    unsafe { &*((*host).host_data as *const HostCounters) }
}

unsafe extern "C" fn host_latency_changed(host: *const clap_host) {
    // SAFETY: only our hosts are handed to the plugin.
    unsafe { counters(host) }
        .latency_changes
        .fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn host_request_restart(host: *const clap_host) {
    // SAFETY: only our hosts are handed to the plugin.
    unsafe { counters(host) }
        .restart_requests
        .fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn host_noop(_: *const clap_host) {}

unsafe extern "C" fn no_events_size(_: *const clap_input_events) -> u32 {
    0
}

unsafe extern "C" fn no_events_get(
    _: *const clap_input_events,
    _: u32,
) -> *const clap_event_header {
    null()
}

unsafe extern "C" fn drop_output_event(
    _: *const clap_output_events,
    _: *const clap_event_header,
) -> bool {
    true
}

static NO_INPUT_EVENTS: SyncEvents<clap_input_events> = SyncEvents(clap_input_events {
    ctx: null_mut(),
    size: Some(no_events_size),
    get: Some(no_events_get),
});
static NO_OUTPUT_EVENTS: SyncEvents<clap_output_events> = SyncEvents(clap_output_events {
    ctx: null_mut(),
    try_push: Some(drop_output_event),
});

/// Event lists without state, shareable between threads.
struct SyncEvents<T>(T);
// SAFETY: the lists hold no data (null contexts) and only function pointers.
unsafe impl<T> Sync for SyncEvents<T> {}

/// One plugin instance driven through raw CLAP calls on the calling thread (which acts as both
/// main and audio thread; the calls are never concurrent).
pub struct RawPlugin {
    plugin: *const clap_plugin,
    /// Boxed so the host's `host_data` pointer stays valid.
    counters: Box<HostCounters>,
    /// Boxed so the pointer the plugin keeps stays valid.
    host: Box<clap_host>,
    is_active: bool,
    is_processing: bool,
    steady_time: i64,
}

impl RawPlugin {
    /// Creates and initialises an instance of the plugin with CLAP id `plugin_id`.
    pub fn create(plugin_id: &str) -> Self {
        let factory = crate::clap_library::factory(&crate::artefacts::plugin_path())
            .unwrap_or_else(|e| panic!("{e}"));
        let counters = Box::new(HostCounters::default());
        let host = Box::new(clap_host {
            clap_version: CLAP_VERSION,
            host_data: &*counters as *const HostCounters as *mut c_void,
            name: c"stemflow raw test host".as_ptr(),
            vendor: c"stemflow".as_ptr(),
            url: c"".as_ptr(),
            version: c"1".as_ptr(),
            get_extension: Some(host_get_extension),
            request_restart: Some(host_request_restart),
            request_process: Some(host_noop),
            request_callback: Some(host_noop),
        });
        let id = CString::new(plugin_id).unwrap();
        // SAFETY: the entry was initialised; the factory is the standard plugin factory; the
        // host outlives the plugin (both are owned by the returned value, the plugin destroyed
        // first).
        let plugin = unsafe {
            let plugin = ((*factory).create_plugin.unwrap())(factory, &*host, id.as_ptr());
            assert!(
                !plugin.is_null(),
                "the plugin {plugin_id} could not be created"
            );
            assert!(((*plugin).init.unwrap())(plugin), "init failed");
            plugin
        };
        Self {
            plugin,
            counters,
            host,
            is_active: false,
            is_processing: false,
            steady_time: 0,
        }
    }

    /// What the host counted.
    pub fn counters(&self) -> &HostCounters {
        &self.counters
    }

    fn extension<T>(&self, id: &CStr) -> Option<&T> {
        // SAFETY: `get_extension` returns null or a pointer to the extension struct for `id`,
        // valid for the plugin's lifetime.
        unsafe {
            let ext = ((*self.plugin).get_extension.unwrap())(self.plugin, id.as_ptr());
            (ext as *const T).as_ref()
        }
    }

    /// Sets the CLAP render mode (the render extension): offline or real time.
    pub fn set_offline(&mut self, is_offline: bool) {
        let render: &clap_plugin_render = self
            .extension(CLAP_EXT_RENDER)
            .expect("no render extension");
        let mode = if is_offline {
            CLAP_RENDER_OFFLINE
        } else {
            CLAP_RENDER_REALTIME
        };
        // SAFETY: a main-thread call on an initialised plugin.
        assert!(unsafe { (render.set.unwrap())(self.plugin, mode) });
    }

    /// Activates and starts processing.
    pub fn activate(&mut self, sample_rate_hz: f64, max_block_frames: u32) {
        // SAFETY: main-thread activation of an inactive plugin, then start on the (same) audio
        // thread.
        unsafe {
            assert!(((*self.plugin).activate.unwrap())(
                self.plugin,
                sample_rate_hz,
                1,
                max_block_frames
            ));
            self.is_active = true;
            assert!(((*self.plugin).start_processing.unwrap())(self.plugin));
            self.is_processing = true;
        }
    }

    /// The latency the plugin reports now.
    pub fn latency_samples(&self) -> u32 {
        let latency: &clap_plugin_latency = self
            .extension(CLAP_EXT_LATENCY)
            .expect("no latency extension");
        // SAFETY: a main-thread call on an active plugin.
        unsafe { (latency.get.unwrap())(self.plugin) }
    }

    /// Processes one block of `num_frames` with raw channel pointers: one input port
    /// (`inputs`), and one output port per entry of `outputs` (`None`: a port the host passes
    /// with a null buffer and no channels). Pointers may alias in any way.
    ///
    /// # Safety
    ///
    /// Every pointer must be valid for `num_frames` reads and writes.
    pub unsafe fn process(
        &mut self,
        num_frames: u32,
        inputs: &mut [*mut f32],
        outputs: &mut [Option<Vec<*mut f32>>],
    ) {
        let buffer = |channels: Option<&mut Vec<*mut f32>>| clap_audio_buffer {
            data32: channels
                .as_ref()
                .map_or(null_mut(), |c| c.as_ptr() as *mut *mut f32),
            data64: null_mut(),
            channel_count: channels.map_or(0, |c| c.len() as u32),
            latency: 0,
            constant_mask: 0,
        };
        let input_buffers = [clap_audio_buffer {
            data32: inputs.as_mut_ptr(),
            data64: null_mut(),
            channel_count: inputs.len() as u32,
            latency: 0,
            constant_mask: 0,
        }];
        let mut output_buffers: Vec<clap_audio_buffer> =
            outputs.iter_mut().map(|o| buffer(o.as_mut())).collect();
        let process = clap_process {
            steady_time: self.steady_time,
            frames_count: num_frames,
            transport: null(),
            audio_inputs: input_buffers.as_ptr(),
            audio_outputs: output_buffers.as_mut_ptr(),
            audio_inputs_count: 1,
            audio_outputs_count: output_buffers.len() as u32,
            in_events: &NO_INPUT_EVENTS.0,
            out_events: &NO_OUTPUT_EVENTS.0,
        };
        // SAFETY: an active, processing plugin; the buffers are valid per this function's
        // contract and live until the call returns.
        unsafe { ((*self.plugin).process.unwrap())(self.plugin, &process) };
        self.steady_time += i64::from(num_frames);
    }
}

impl Drop for RawPlugin {
    fn drop(&mut self) {
        // SAFETY: the CLAP teardown order: stop, deactivate, destroy.
        unsafe {
            if self.is_processing {
                ((*self.plugin).stop_processing.unwrap())(self.plugin);
            }
            if self.is_active {
                ((*self.plugin).deactivate.unwrap())(self.plugin);
            }
            ((*self.plugin).destroy.unwrap())(self.plugin);
        }
        let _ = &self.host;
    }
}
