//! The host side of the CLAP conversation: the callbacks a plugin may make into the test host.
//!
//! The host records what the plugin asked for (restart, callback, flush, latency change, parameter
//! rescan) in flags that [`TestPlugin`](crate::TestPlugin) reads after each call into the plugin.
//! Nothing here allocates, so the callbacks are safe to receive on the audio thread.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

use clack_extensions::latency::{HostLatency, HostLatencyImpl};
use clack_extensions::params::{
    HostParams, HostParamsImplMainThread, HostParamsImplShared, ParamClearFlags, ParamRescanFlags,
};
use clack_extensions::state::{HostState, HostStateImpl};
use clack_host::prelude::*;

/// The [`HostHandlers`] of the test host: a shared part with atomic request flags, a main-thread
/// part with plain cells, and no audio-thread state.
pub struct TestHost;

impl HostHandlers for TestHost {
    type Shared<'a> = TestHostShared;
    type MainThread<'a> = TestHostMainThread;
    type AudioProcessor<'a> = ();

    fn declare_extensions(builder: &mut HostExtensions<Self>, _shared: &Self::Shared<'_>) {
        builder
            .register::<HostLatency>()
            .register::<HostParams>()
            .register::<HostState>();
    }
}

/// Requests a plugin may make from any thread. Atomics because the audio thread (the plugin's
/// `process()` running on the test's processing thread) and the main thread (the test thread) both
/// touch them.
#[derive(Default)]
pub struct TestHostShared {
    /// Set by `clap_host::request_restart` (deactivate and reactivate the plugin).
    pub restart_requested: AtomicBool,
    /// Set by `clap_host::request_process`.
    pub process_requested: AtomicBool,
    /// Set by `clap_host::request_callback`; the test host answers it by calling
    /// `on_main_thread` from the main thread after the current call returns.
    pub callback_requested: AtomicBool,
    /// Set by `clap_host_params::request_flush`.
    pub flush_requested: AtomicBool,
}

impl TestHostShared {
    /// Reads and clears one flag.
    pub(crate) fn take(flag: &AtomicBool) -> bool {
        flag.swap(false, Ordering::SeqCst)
    }
}

impl<'a> SharedHandler<'a> for TestHostShared {
    fn request_restart(&self) {
        self.restart_requested.store(true, Ordering::SeqCst);
    }

    fn request_process(&self) {
        self.process_requested.store(true, Ordering::SeqCst);
    }

    fn request_callback(&self) {
        self.callback_requested.store(true, Ordering::SeqCst);
    }
}

impl HostParamsImplShared for TestHostShared {
    fn request_flush(&self) {
        self.flush_requested.store(true, Ordering::SeqCst);
    }
}

/// Notifications the plugin sends on the main thread (the thread that created the instance, which
/// is the test's own thread). Counters rather than flags so a test can see that something
/// happened at all.
#[derive(Default)]
pub struct TestHostMainThread {
    /// How many times the plugin called `clap_host_latency::changed`.
    pub latency_changed_count: Cell<u32>,
    /// How many times the plugin called `clap_host_params::rescan`.
    pub params_rescan_count: Cell<u32>,
    /// How many times the plugin called `clap_host_params::clear`.
    pub params_clear_count: Cell<u32>,
    /// How many times the plugin called `clap_host_state::mark_dirty`.
    pub state_dirty_count: Cell<u32>,
}

fn increment(counter: &Cell<u32>) {
    counter.set(counter.get().saturating_add(1));
}

impl<'a> MainThreadHandler<'a> for TestHostMainThread {}

impl HostLatencyImpl for TestHostMainThread {
    fn changed(&self) {
        increment(&self.latency_changed_count);
    }
}

impl HostParamsImplMainThread for TestHostMainThread {
    fn rescan(&self, _flags: ParamRescanFlags) {
        increment(&self.params_rescan_count);
    }

    fn clear(&self, _param_id: ClapId, _flags: ParamClearFlags) {
        increment(&self.params_clear_count);
    }
}

impl HostStateImpl for TestHostMainThread {
    fn mark_dirty(&self) {
        increment(&self.state_dirty_count);
    }
}
