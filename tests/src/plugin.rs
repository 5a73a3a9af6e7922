//! [`TestPlugin`]: one instance of the built plugin, driven through its CLAP interface.

use std::collections::HashMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use clack_extensions::audio_ports::{AudioPortFlags, AudioPortInfoBuffer, PluginAudioPorts};
use clack_extensions::audio_ports_config::{AudioPortsConfigBuffer, PluginAudioPortsConfig};
use clack_extensions::latency::PluginLatency;
use clack_extensions::params::{ParamInfoBuffer, ParamInfoFlags, PluginParams};
use clack_extensions::render::{PluginRender, RenderMode};
use clack_extensions::state::PluginState;
use clack_host::events::event_types::ParamValueEvent;
use clack_host::extensions::{Extension, PluginExtensionSide};
use clack_host::prelude::*;

use crate::artefacts::{plugin_path, PLUGIN_ID};
use crate::host::{TestHost, TestHostMainThread, TestHostShared};
use crate::signal::{nan_ports, BlockSizes};
use crate::state::{decode_state, encode_state};

/// One audio port as the host sees it through the audio-ports extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// The port's stable CLAP id.
    pub id: u32,
    /// Display name.
    pub name: String,
    /// Number of channels.
    pub channel_count: u32,
    /// Whether the port carries `CLAP_AUDIO_PORT_IS_MAIN`.
    pub is_main: bool,
}

/// All audio ports of the current configuration, each described by a `P` (the fuzzer's hosts
/// describe them in their own way, see [`crate::fuzz::clap_instance::Ports`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortLayout<P = PortInfo> {
    /// Input ports, main first.
    pub inputs: Vec<P>,
    /// Output ports, main first.
    pub outputs: Vec<P>,
}

/// No ports.
impl<P> Default for PortLayout<P> {
    fn default() -> Self {
        Self {
            inputs: Vec::new(),
            outputs: Vec::new(),
        }
    }
}

/// One entry of the audio-ports-config extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConfigInfo {
    /// Id to pass to [`TestPlugin::select_port_config`].
    pub id: u32,
    /// Display name.
    pub name: String,
    /// Number of input ports.
    pub input_port_count: u32,
    /// Number of output ports.
    pub output_port_count: u32,
    /// Channels of the main input, if there is one.
    pub main_input_channels: Option<u32>,
    /// Channels of the main output, if there is one.
    pub main_output_channels: Option<u32>,
}

/// One parameter as listed by the params extension.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamDesc {
    /// CLAP parameter id (nice-plug: [`param_hash`] of the string id).
    pub clap_id: u32,
    /// Display name.
    pub name: String,
    /// Module (nice-plug: the parameter group path).
    pub module: String,
    /// Lowest CLAP value (nice-plug: always 0).
    pub min_value: f64,
    /// Highest CLAP value (nice-plug: 1 for continuous parameters, the step count otherwise).
    pub max_value: f64,
    /// Default CLAP value.
    pub default_value: f64,
    /// CLAP parameter flags.
    pub flags: ParamInfoFlags,
}

/// A parameter change delivered as a `CLAP_EVENT_PARAM_VALUE` inside a `process()` call, made by
/// [`TestPlugin::param_event`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamEvent {
    /// Absolute frame of the stream at which the change happens.
    pub frame: usize,
    /// CLAP parameter id.
    pub clap_id: u32,
    /// The CLAP value (nice-plug: normalized value × step count).
    pub clap_value: f64,
}

/// What one `process_buffer` run produced.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// Sample rate of the activation.
    pub sample_rate_hz: f64,
    /// Latency the plugin reported after activation, in samples.
    pub latency_samples: usize,
    /// `outputs[port][channel][frame]`, ports in the order of [`PortLayout::outputs`].
    pub outputs: Vec<Vec<Vec<f32>>>,
    /// Whether the plugin called `request_restart` while processing (restarts requested by the
    /// activation itself are honoured by [`TestPlugin::activate`]).
    pub restart_requested: bool,
    /// The plugin's latency after processing (should equal `latency_samples`).
    pub latency_after_samples: usize,
}

impl Rendered {
    /// The main output port's channels.
    pub fn main(&self) -> &[Vec<f32>] {
        &self.outputs[0]
    }

    /// Output port `index` (0 is the main output; 1..=4 are the stems in the default config).
    pub fn port(&self, index: usize) -> &[Vec<f32>] {
        &self.outputs[index]
    }

    /// Number of frames rendered.
    pub fn num_frames(&self) -> usize {
        self.outputs
            .first()
            .and_then(|p| p.first())
            .map_or(0, Vec::len)
    }

    /// Every output sample of every port and channel.
    pub fn all_samples(&self) -> impl Iterator<Item = f32> + '_ {
        self.outputs.iter().flatten().flatten().copied()
    }
}

/// How [`TestPlugin::render`] drives one activation.
#[derive(Debug, Clone)]
pub struct RenderSettings {
    /// Sample rate given to `activate`.
    pub sample_rate_hz: f64,
    /// How the input is cut into `process()` calls.
    pub block_sizes: BlockSizes,
    /// `max_frames_count` given to `activate`; `None`: the largest block of `block_sizes`.
    pub max_block_frames: Option<usize>,
    /// Render mode, set before activation.
    pub mode: RenderMode,
    /// Audio-ports-config to select before activation; `None` keeps the plugin's current one.
    pub port_config: Option<u32>,
    /// `(string id, plain value)` set through `params.flush` before activation.
    pub initial_params: Vec<(String, f64)>,
    /// `(frame, string id, plain value)` sent as events inside `process()`.
    pub param_changes: Vec<(usize, String, f64)>,
    /// Pace `process()` calls at this multiple of real time (`Some(1.0)`: real time); `None`: as
    /// fast as possible.
    pub realtime_speed: Option<f64>,
}

impl Default for RenderSettings {
    fn default() -> Self {
        Self {
            sample_rate_hz: 44_100.0,
            block_sizes: BlockSizes::Fixed(512),
            max_block_frames: None,
            mode: RenderMode::Offline,
            port_config: None,
            initial_params: Vec::new(),
            param_changes: Vec::new(),
            realtime_speed: None,
        }
    }
}

/// The nice-plug CLAP parameter id of a string parameter id: a 31-multiplier string hash with the
/// top bit cleared (`nice_plug::wrapper::util::hash_param_id`).
pub fn param_hash(id: &str) -> u32 {
    let mut hash: u32 = 0;
    for byte in id.bytes() {
        hash = hash.wrapping_mul(31).wrapping_add(byte as u32);
    }
    hash & !(1 << 31)
}

/// Entries stay loaded for the whole test process: unloading a Rust `cdylib` that has spawned
/// threads or registered thread-local destructors is not safe.
fn entry_for(path: &Path) -> PluginEntry {
    static ENTRIES: OnceLock<Mutex<HashMap<PathBuf, PluginEntry>>> = OnceLock::new();
    let mut entries = ENTRIES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    entries
        .entry(path.to_path_buf())
        .or_insert_with(|| {
            // SAFETY: loading a library runs its initialisers; this is the plugin under test, built
            // from this workspace, and CLAP entries are designed to be loaded this way.
            unsafe { PluginEntry::load(path) }.unwrap_or_else(|e| {
                panic!("cannot load the CLAP plugin at {}: {e}", path.display())
            })
        })
        .clone()
}

/// One instance of the built plugin (main thread side), with a test host around it.
///
/// The thread that calls [`TestPlugin::load`] is the plugin's main thread; `process()` runs on a
/// separate, scoped audio thread inside [`TestPlugin::process_buffer`], as in a real host.
pub struct TestPlugin {
    /// The audio processor while the plugin is active (stopped between `process_buffer` runs).
    processor: Option<StoppedPluginAudioProcessor<TestHost>>,
    instance: PluginInstance<TestHost>,
    params: Vec<ParamDesc>,
    /// `(sample rate, min frames, max frames)` of the current activation.
    activation: Option<(f64, u32, u32)>,
    /// Plain-to-CLAP conversions already probed, keyed by (clap id, plain value bits).
    clap_value_cache: HashMap<(u32, u64), f64>,
}

/// Reads items `0..count` of a plugin's list through `read`; panics, naming the item by `what`
/// and index, if one cannot be read.
fn read_each<T>(what: &str, count: u32, mut read: impl FnMut(u32) -> Option<T>) -> Vec<T> {
    (0..count)
        .map(|index| read(index).unwrap_or_else(|| panic!("{what} {index} cannot be read")))
        .collect()
}

impl TestPlugin {
    /// Loads the plugin from [`plugin_path`] and creates an instance of `audio.stemflow.stemflow`.
    /// Panics (telling how to build it) if the bundle is missing.
    pub fn load() -> Self {
        Self::load_from(&plugin_path())
    }

    /// Loads the plugin from `path` and creates an instance of `audio.stemflow.stemflow`.
    pub fn load_from(path: &Path) -> Self {
        Self::load_id(path, PLUGIN_ID)
    }

    /// Loads the bundle at `path` and creates an instance of the plugin `plugin_id` in it
    /// (`audio.stemflow.stemflow` or `audio.stemflow.stemflow-single-bus`).
    pub fn load_id(path: &Path, plugin_id: &str) -> Self {
        let entry = entry_for(path);
        let factory = entry
            .get_plugin_factory()
            .expect("the plugin has no plugin factory");
        let ids: Vec<String> = factory
            .plugin_descriptors()
            .filter_map(|d| d.id().map(|id| id.to_string_lossy().into_owned()))
            .collect();
        assert!(
            ids.iter().any(|id| id == plugin_id),
            "plugin id {plugin_id} not in {ids:?}"
        );

        let host_info = HostInfo::new(
            "Stemflow host tests",
            "Stemflow developers",
            "https://stemflow.audio",
            env!("CARGO_PKG_VERSION"),
        )
        .expect("host info");
        let plugin_id = CString::new(plugin_id).expect("plugin id");
        let instance = PluginInstance::<TestHost>::new(
            |_| TestHostShared::default(),
            |_| TestHostMainThread::default(),
            &entry,
            &plugin_id,
            &host_info,
        )
        .unwrap_or_else(|e| panic!("cannot instantiate {plugin_id:?}: {e}"));

        let mut plugin = Self {
            processor: None,
            instance,
            params: Vec::new(),
            activation: None,
            clap_value_cache: HashMap::new(),
        };
        plugin.pump_main_thread();
        plugin.params = plugin.read_param_infos();
        plugin
    }

    /// `(id, name)` of every plugin in the loaded bundle.
    pub fn descriptors(&self) -> Vec<(String, String)> {
        let factory = self
            .instance
            .entry()
            .get_plugin_factory()
            .expect("plugin factory");
        factory
            .plugin_descriptors()
            .map(|d| {
                let text = |s: Option<&std::ffi::CStr>| {
                    s.map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default()
                };
                (text(d.id()), text(d.name()))
            })
            .collect()
    }

    /// Answers pending `request_callback`s by calling `on_main_thread`, as a host's event loop
    /// would. Called after every main-thread interaction.
    pub fn pump_main_thread(&mut self) {
        for _ in 0..16 {
            let requested = self
                .instance
                .access_shared_handler(|h| TestHostShared::take(&h.callback_requested));
            if !requested {
                break;
            }
            self.instance.call_on_main_thread_callback();
        }
    }

    /// Reads a main-thread counter of the host, e.g. `|h| h.latency_changed_count.get()`.
    pub fn host_counter(&self, read: impl FnOnce(&TestHostMainThread) -> u32) -> u32 {
        self.instance.access_handler(|h| read(h))
    }

    /// Reads and clears the host's "restart requested" flag.
    pub fn take_restart_request(&self) -> bool {
        self.instance
            .access_shared_handler(|h| TestHostShared::take(&h.restart_requested))
    }

    /// Whether the plugin is activated.
    pub fn is_active(&self) -> bool {
        self.instance.is_active()
    }

    fn extension<E: Extension<ExtensionSide = PluginExtensionSide>>(&mut self, name: &str) -> E {
        self.instance
            .plugin_handle()
            .get_extension::<E>()
            .unwrap_or_else(|| panic!("the plugin does not implement the CLAP {name} extension"))
    }

    // --- audio ports ---------------------------------------------------------------------------

    /// The configurations of the audio-ports-config extension (empty if it is not implemented).
    pub fn port_configs(&mut self) -> Vec<PortConfigInfo> {
        let handle = self.instance.plugin_handle();
        let Some(ext) = handle.get_extension::<PluginAudioPortsConfig>() else {
            return Vec::new();
        };
        let mut buffer = AudioPortsConfigBuffer::new();
        read_each("audio-ports-config", ext.count(&handle), |index| {
            let config = ext.get(&handle, index, &mut buffer)?;
            Some(PortConfigInfo {
                id: config.id.get(),
                name: String::from_utf8_lossy(config.name).into_owned(),
                input_port_count: config.input_port_count,
                output_port_count: config.output_port_count,
                main_input_channels: config.main_input.map(|p| p.channel_count),
                main_output_channels: config.main_output.map(|p| p.channel_count),
            })
        })
    }

    /// Selects an audio-ports-config by id. The plugin must be inactive.
    pub fn select_port_config(&mut self, config_id: u32) {
        assert!(
            !self.is_active(),
            "port configs can only be selected while inactive"
        );
        let ext: PluginAudioPortsConfig = self.extension("audio-ports-config");
        let handle = self.instance.plugin_handle();
        ext.select(&handle, ClapId::new(config_id))
            .unwrap_or_else(|_| panic!("the plugin refused audio-ports-config {config_id}"));
        self.pump_main_thread();
    }

    /// The audio ports of the current configuration, as the audio-ports extension reports them.
    pub fn audio_ports(&mut self) -> PortLayout {
        let ext: PluginAudioPorts = self.extension("audio-ports");
        let handle = self.instance.plugin_handle();
        let mut buffer = AudioPortInfoBuffer::new();
        let mut read = |is_input: bool| -> Vec<PortInfo> {
            let what = format!("audio port (input: {is_input})");
            read_each(&what, ext.count(&handle, is_input), |index| {
                let info = ext.get(&handle, index, is_input, &mut buffer)?;
                Some(PortInfo {
                    id: info.id.get(),
                    name: String::from_utf8_lossy(info.name).into_owned(),
                    channel_count: info.channel_count,
                    is_main: info.flags.contains(AudioPortFlags::IS_MAIN),
                })
            })
        };
        let inputs = read(true);
        let outputs = read(false);
        PortLayout { inputs, outputs }
    }

    // --- render mode and latency ---------------------------------------------------------------

    /// Sets the CLAP render mode (do it before activation: a change while active makes nice-plug
    /// request a restart).
    pub fn set_render_mode(&mut self, mode: RenderMode) {
        let ext: PluginRender = self.extension("render");
        let handle = self.instance.plugin_handle();
        ext.set(&handle, mode)
            .unwrap_or_else(|_| panic!("the plugin refused render mode {mode:?}"));
        self.pump_main_thread();
    }

    /// The latency the plugin reports now, in samples.
    pub fn latency_samples(&mut self) -> usize {
        let ext: PluginLatency = self.extension("latency");
        let handle = self.instance.plugin_handle();
        ext.get(&handle) as usize
    }

    // --- parameters ------------------------------------------------------------------------------

    fn read_param_infos(&mut self) -> Vec<ParamDesc> {
        let ext: PluginParams = self.extension("params");
        let handle = self.instance.plugin_handle();
        let mut buffer = ParamInfoBuffer::new();
        read_each("parameter info", ext.count(&handle), |index| {
            let info = ext.get_info(&handle, index, &mut buffer)?;
            Some(ParamDesc {
                clap_id: info.id.get(),
                name: String::from_utf8_lossy(info.name).into_owned(),
                module: String::from_utf8_lossy(info.module).into_owned(),
                min_value: info.min_value,
                max_value: info.max_value,
                default_value: info.default_value,
                flags: info.flags,
            })
        })
    }

    /// Every parameter the plugin lists.
    pub fn params(&self) -> &[ParamDesc] {
        &self.params
    }

    /// The parameter with nice-plug string id `id`. Panics, listing what exists, if there is none.
    pub fn param(&self, id: &str) -> &ParamDesc {
        let hash = param_hash(id);
        self.params
            .iter()
            .find(|p| p.clap_id == hash)
            .unwrap_or_else(|| {
                let names: Vec<&str> = self.params.iter().map(|p| p.name.as_str()).collect();
                panic!("no parameter with string id {id:?} (CLAP id {hash}); it lists {names:?}")
            })
    }

    /// The current CLAP value of parameter `id` (`clap_plugin_params::get_value`).
    pub fn param_value(&mut self, id: &str) -> f64 {
        let clap_id = self.param(id).clap_id;
        let ext: PluginParams = self.extension("params");
        let handle = self.instance.plugin_handle();
        ext.get_value(&handle, ClapId::new(clap_id))
            .unwrap_or_else(|| panic!("get_value({id}) failed"))
    }

    /// The display text of CLAP value `clap_value` of parameter `id`.
    pub fn param_text(&mut self, id: &str, clap_value: f64) -> String {
        let clap_id = self.param(id).clap_id;
        let ext: PluginParams = self.extension("params");
        let handle = self.instance.plugin_handle();
        let mut buffer = [0u8; 256];
        let text = ext
            .value_to_text(&handle, ClapId::new(clap_id), clap_value, &mut buffer)
            .unwrap_or_else(|_| panic!("value_to_text({id}, {clap_value}) failed"));
        String::from_utf8_lossy(text).into_owned()
    }

    /// The CLAP value the plugin parses `text` of parameter `id` as; `None` when it cannot.
    pub fn param_value_for_text(&mut self, id: &str, text: &str) -> Option<f64> {
        let clap_id = self.param(id).clap_id;
        let ext: PluginParams = self.extension("params");
        let handle = self.instance.plugin_handle();
        let text = CString::new(text).ok()?;
        ext.text_to_value(&handle, ClapId::new(clap_id), &text)
    }

    /// The plain values of all parameters as nice-plug stores them in the state
    /// (`{"vocals_gain": {"f32": 1.0}, "bypass": {"bool": false}, …}`).
    pub fn saved_params(&mut self) -> serde_json::Map<String, serde_json::Value> {
        let state = decode_state(&self.save_state()).expect("the plugin's own state is valid");
        state["params"]
            .as_object()
            .cloned()
            .expect("state has a params object")
    }

    /// The CLAP value that means plain value `plain` for parameter `id`.
    ///
    /// Stepped parameters (bools) take their plain value. For continuous parameters the mapping
    /// (possibly skewed) is known only to the plugin, so it is probed exactly: the state is saved,
    /// reloaded with `params[id] = {"f32": plain}`, `get_value` is read, and the saved state is
    /// restored. Needs the plugin to be inactive; results are cached.
    pub fn clap_value_for_plain(&mut self, id: &str, plain: f64) -> f64 {
        let desc = self.param(id).clone();
        if desc.flags.contains(ParamInfoFlags::IS_STEPPED) {
            assert!(
                plain >= desc.min_value && plain <= desc.max_value,
                "{id}: {plain} out of range"
            );
            return plain;
        }
        let key = (desc.clap_id, plain.to_bits());
        if let Some(&value) = self.clap_value_cache.get(&key) {
            return value;
        }
        assert!(
            !self.is_active(),
            "probing parameter ranges needs an inactive plugin"
        );
        let saved = self.save_state();
        let mut state = decode_state(&saved).expect("the plugin's own state is valid");
        let params_text = state["params"].to_string();
        let slot = state["params"]
            .get_mut(id)
            .unwrap_or_else(|| panic!("the saved state has no parameter {id:?}: {params_text}"));
        assert!(
            slot.get("f32").is_some(),
            "{id} is not saved as an f32 parameter: {slot}"
        );
        *slot = serde_json::json!({ "f32": plain });
        self.load_state(&encode_state(&state))
            .expect("loading a probe state");
        let value = self.param_value(id);
        self.load_state(&saved)
            .expect("restoring the state after a probe");
        self.clap_value_cache.insert(key, value);
        value
    }

    /// Sets parameter `id` to plain value `plain` through `clap_plugin_params::flush` (the way a
    /// host changes parameters while not processing). The plugin must be inactive.
    pub fn set_param(&mut self, id: &str, plain: f64) {
        let clap_value = self.clap_value_for_plain(id, plain);
        let clap_id = self.param(id).clap_id;
        let ext: PluginParams = self.extension("params");
        let mut events = EventBuffer::with_capacity(1);
        events.push(&ParamValueEvent::new(
            0,
            ClapId::new(clap_id),
            Pckn::match_all(),
            clap_value,
        ));
        let mut output_events = EventBuffer::with_capacity(16);
        {
            let mut handle = self
                .instance
                .inactive_plugin_handle()
                .expect("set_param needs an inactive plugin");
            ext.flush(
                &mut handle,
                &events.as_input(),
                &mut output_events.as_output(),
            );
        }
        self.pump_main_thread();
    }

    /// A `process()` event setting parameter `id` to plain value `plain` at absolute `frame`.
    /// Make events before activating (continuous parameters are probed, see
    /// [`TestPlugin::clap_value_for_plain`]).
    pub fn param_event(&mut self, frame: usize, id: &str, plain: f64) -> ParamEvent {
        let clap_value = self.clap_value_for_plain(id, plain);
        ParamEvent {
            frame,
            clap_id: self.param(id).clap_id,
            clap_value,
        }
    }

    // --- state ----------------------------------------------------------------------------------

    /// The plugin's state as `clap_plugin_state::save` writes it.
    pub fn save_state(&mut self) -> Vec<u8> {
        let ext: PluginState = self.extension("state");
        let mut bytes = Vec::new();
        {
            let handle = self.instance.plugin_handle();
            ext.save(&handle, &mut bytes).expect("state save failed");
        }
        self.pump_main_thread();
        bytes
    }

    /// Loads a state with `clap_plugin_state::load`; `Err` if the plugin returned false.
    pub fn load_state(&mut self, bytes: &[u8]) -> Result<(), clack_extensions::state::StateError> {
        let ext: PluginState = self.extension("state");
        let mut reader: &[u8] = bytes;
        let result = {
            let handle = self.instance.plugin_handle();
            ext.load(&handle, &mut reader)
        };
        self.pump_main_thread();
        result
    }

    // --- activation and processing --------------------------------------------------------------

    /// Activates at `sample_rate_hz` for blocks of `min_block_frames..=max_block_frames` frames
    /// and returns the latency reported afterwards.
    ///
    /// Like a real host, this honours a restart request made during activation by deactivating
    /// and activating again: nice-plug 0.4.2 turns a latency set in `Plugin::activate` into
    /// `request_restart` (and reports `clap_host_latency::changed` on the next activation) when
    /// the latency differs from the previous activation's. Panics if the plugin still asks for a
    /// restart after that.
    pub fn activate(
        &mut self,
        sample_rate_hz: f64,
        min_block_frames: usize,
        max_block_frames: usize,
    ) -> usize {
        self.take_restart_request();
        self.activate_once(sample_rate_hz, min_block_frames, max_block_frames);
        if self.take_restart_request() {
            self.deactivate();
            self.activate_once(sample_rate_hz, min_block_frames, max_block_frames);
            assert!(
                !self.take_restart_request(),
                "the plugin asks for a restart on every activation ({sample_rate_hz} Hz, \
                 {min_block_frames}..={max_block_frames} frames)"
            );
        }
        self.latency_samples()
    }

    fn activate_once(
        &mut self,
        sample_rate_hz: f64,
        min_block_frames: usize,
        max_block_frames: usize,
    ) {
        assert!(self.processor.is_none(), "already active");
        let config = PluginAudioConfiguration {
            sample_rate: sample_rate_hz,
            min_frames_count: min_block_frames as u32,
            max_frames_count: max_block_frames as u32,
        };
        let processor = self
            .instance
            .activate(|_, _| (), config)
            .unwrap_or_else(|e| {
                panic!(
                    "activate({sample_rate_hz} Hz, {min_block_frames}..={max_block_frames} frames) \
                     failed: {e}"
                )
            });
        self.processor = Some(processor);
        self.activation = Some((
            sample_rate_hz,
            min_block_frames as u32,
            max_block_frames as u32,
        ));
        self.pump_main_thread();
    }

    /// Deactivates (no-op if inactive).
    pub fn deactivate(&mut self) {
        if let Some(processor) = self.processor.take() {
            self.instance.deactivate(processor);
            self.activation = None;
        }
        self.pump_main_thread();
    }

    /// Runs one `start_processing … process × N … stop_processing` sequence on a scoped audio
    /// thread over the whole `input` (channels of the main input port; other input ports get
    /// silence), cut into blocks by `block_sizes`, with `events` delivered in the blocks that
    /// contain their frames. Returns `outputs[port][channel][frame]`.
    ///
    /// Output buffers are pre-filled with NaN, so a sample the plugin does not write shows up.
    /// nice-plug calls `Plugin::reset` in `start_processing`, so every call starts a fresh stream.
    /// With `realtime_speed`, blocks are paced at that multiple of real time.
    pub fn process_buffer(
        &mut self,
        input: &[Vec<f32>],
        block_sizes: BlockSizes,
        events: &[ParamEvent],
        realtime_speed: Option<f64>,
    ) -> Vec<Vec<Vec<f32>>> {
        let (sample_rate_hz, _, max_block) = self.activation.expect("activate before processing");
        assert!(
            block_sizes.max_block_frames() <= max_block as usize,
            "blocks of up to {} frames exceed the activated maximum {max_block}",
            block_sizes.max_block_frames()
        );
        let layout = self.audio_ports();
        let main_input_channels = layout
            .inputs
            .first()
            .map_or(0, |p| p.channel_count as usize);
        assert_eq!(
            input.len(),
            main_input_channels,
            "input channels vs the main input port's"
        );
        let num_frames = input.first().map_or(0, Vec::len);
        assert!(
            input.iter().all(|c| c.len() == num_frames),
            "input channels differ in length"
        );

        let mut inputs: Vec<Vec<Vec<f32>>> = layout
            .inputs
            .iter()
            .enumerate()
            .map(|(index, port)| {
                if index == 0 {
                    input.to_vec()
                } else {
                    vec![vec![0.0; num_frames]; port.channel_count as usize]
                }
            })
            .collect();
        let mut outputs = nan_ports(layout.outputs.iter().map(|p| p.channel_count), num_frames);
        // Capacity for every channel pointer up front: clack-host 0.2.0 mis-rebuilds its pointer
        // lists when they grow.
        let total_in: usize = inputs.iter().map(Vec::len).sum();
        let total_out: usize = outputs.iter().map(Vec::len).sum();
        let mut input_ports = AudioPorts::with_capacity(total_in, inputs.len());
        let mut output_ports = AudioPorts::with_capacity(total_out, outputs.len());

        let mut events = events.to_vec();
        events.sort_by_key(|e| e.frame);
        let blocks = block_sizes.blocks(num_frames);
        let processor = self.processor.take().expect("active");

        let (processor, result) = std::thread::scope(|scope| {
            let inputs = &mut inputs;
            let outputs = &mut outputs;
            let input_ports = &mut input_ports;
            let output_ports = &mut output_ports;
            let events = &events;
            let blocks = &blocks;
            scope
                .spawn(move || {
                    let mut started = match processor.start_processing() {
                        Ok(started) => started,
                        Err(e) => {
                            return (
                                e.into_stopped_processor(),
                                Err("start_processing failed".to_string()),
                            )
                        }
                    };
                    let mut input_events = EventBuffer::with_capacity(events.len().max(1));
                    let mut output_events = EventBuffer::with_capacity(256);
                    let mut next_event = 0;
                    let start_time = Instant::now();
                    for (block_index, &(start, len)) in blocks.iter().enumerate() {
                        input_events.clear();
                        while next_event < events.len() && events[next_event].frame < start + len {
                            let e = events[next_event];
                            let time = e.frame.saturating_sub(start) as u32;
                            input_events.push(&ParamValueEvent::new(
                                time,
                                ClapId::new(e.clap_id),
                                Pckn::match_all(),
                                e.clap_value,
                            ));
                            next_event += 1;
                        }
                        output_events.clear();
                        let input_buffers =
                            input_ports.with_input_buffers(inputs.iter_mut().map(|port| {
                                AudioPortBuffer {
                                    latency: 0,
                                    channels: AudioPortBufferType::f32_input_only(
                                        port.iter_mut().map(|c| {
                                            InputChannel::variable(&mut c[start..start + len])
                                        }),
                                    ),
                                }
                            }));
                        let mut output_buffers =
                            output_ports.with_output_buffers(outputs.iter_mut().map(|port| {
                                AudioPortBuffer {
                                    latency: 0,
                                    channels: AudioPortBufferType::f32_output_only(
                                        port.iter_mut().map(|c| &mut c[start..start + len]),
                                    ),
                                }
                            }));
                        let status = started.process(
                            &input_buffers,
                            &mut output_buffers,
                            &input_events.as_input(),
                            &mut output_events.as_output(),
                            Some(start as u64),
                            None,
                        );
                        if let Err(e) = status {
                            let message = format!(
                                "process() failed in block {block_index} (frames {start}..{}): {e}",
                                start + len
                            );
                            return (started.stop_processing(), Err(message));
                        }
                        if let Some(speed) = realtime_speed {
                            let due = Duration::from_secs_f64(
                                (start + len) as f64 / sample_rate_hz / speed,
                            );
                            let elapsed = start_time.elapsed();
                            if due > elapsed {
                                std::thread::sleep(due - elapsed);
                            }
                        }
                    }
                    (started.stop_processing(), Ok(()))
                })
                .join()
                .expect("the audio thread panicked")
        });
        self.processor = Some(processor);
        self.pump_main_thread();
        if let Err(message) = result {
            panic!("{message}");
        }
        outputs
    }

    /// Everything for one offline or realtime render on this instance: select the port config,
    /// set the render mode, flush `initial_params`, activate, process `input` once, deactivate.
    pub fn render(&mut self, input: &[Vec<f32>], settings: &RenderSettings) -> Rendered {
        if self.is_active() {
            self.deactivate();
        }
        if let Some(config) = settings.port_config {
            self.select_port_config(config);
        }
        self.set_render_mode(settings.mode);
        for (id, plain) in &settings.initial_params {
            self.set_param(id, *plain);
        }
        let events: Vec<ParamEvent> = settings
            .param_changes
            .iter()
            .map(|(frame, id, plain)| self.param_event(*frame, id, *plain))
            .collect();
        let max_block = settings
            .max_block_frames
            .unwrap_or_else(|| settings.block_sizes.max_block_frames());
        let min_block = settings.block_sizes.min_block_frames().min(max_block);
        let latency_samples = self.activate(settings.sample_rate_hz, min_block, max_block);
        let outputs = self.process_buffer(
            input,
            settings.block_sizes,
            &events,
            settings.realtime_speed,
        );
        let latency_after_samples = self.latency_samples();
        let restart_requested = self.take_restart_request();
        self.deactivate();
        Rendered {
            sample_rate_hz: settings.sample_rate_hz,
            latency_samples,
            outputs,
            restart_requested,
            latency_after_samples,
        }
    }
}

impl Drop for TestPlugin {
    fn drop(&mut self) {
        // The processor must go back to the instance before the instance is destroyed, or
        // clack-host leaks the plugin.
        if let Some(processor) = self.processor.take() {
            self.instance.deactivate(processor);
        }
    }
}

/// Loads a fresh instance and renders `input` with `settings` (see [`TestPlugin::render`]).
pub fn render(input: &[Vec<f32>], settings: &RenderSettings) -> Rendered {
    TestPlugin::load().render(input, settings)
}
