//! A VST3 host for tests: loads the built bundle, creates its components, and hands them state
//! through an in-memory `IBStream` that may deliver a few bytes per read, as some hosts' streams
//! do. The fuzzer's VST3 seeds (`fuzz/vst3_seed.rs`) drive components made here.

use std::ffi::{c_void, CStr};
use std::path::{Path, PathBuf};
use std::ptr::null_mut;
use std::sync::Mutex;

use vst3::Steinberg::Vst::{IComponent, IComponentTrait};
use vst3::Steinberg::{
    kInvalidArgument, kResultFalse, kResultOk, tresult, IBStream, IBStreamTrait, IBStream_,
    IPluginBaseTrait, IPluginFactory, IPluginFactoryTrait, PClassInfo,
};
use vst3::{Class, ComPtr, ComWrapper, Interface};

use crate::load_once::LoadOnce;

/// A loaded VST3 module and its factory (never unloaded).
pub struct Module {
    _library: libloading::Library,
    factory: *mut IPluginFactory,
}

// SAFETY: the factory is thread-safe by the VST3 contract (hosts create components from any
// thread) and stays alive with the library, which is never unloaded.
unsafe impl Send for Module {}
// SAFETY: as above.
unsafe impl Sync for Module {}

/// The binary inside a `.vst3` bundle on this platform.
pub fn bundle_binary(bundle: &Path) -> PathBuf {
    let arch = std::env::consts::ARCH;
    if cfg!(windows) {
        let name = bundle.file_name().unwrap_or_default();
        bundle
            .join("Contents")
            .join(format!("{arch}-win"))
            .join(name)
    } else if cfg!(target_os = "macos") {
        let stem = bundle.file_stem().unwrap_or_default();
        bundle.join("Contents/MacOS").join(stem)
    } else {
        let stem = bundle
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        bundle
            .join("Contents")
            .join(format!("{arch}-linux"))
            .join(format!("{stem}.so"))
    }
}

/// The module in `bundle`, loaded once per process.
pub fn module(bundle: &Path) -> Result<&'static Module, String> {
    static MODULES: LoadOnce<Module> = LoadOnce::new();
    MODULES.get(bundle, || load(bundle))
}

/// Loads the module's binary in `bundle` and gets its factory.
fn load(bundle: &Path) -> Result<Module, String> {
    let binary = bundle_binary(bundle);
    // SAFETY: loading the plugin under test runs its initialisers (nice-plug's).
    let library = unsafe { libloading::Library::new(&binary) }
        .map_err(|e| format!("cannot load {}: {e}", binary.display()))?;
    // SAFETY: the symbols have these signatures in every VST3 module (ModuleEntry on Linux only).
    let factory = unsafe {
        if cfg!(target_os = "linux") {
            let entry = library
                .get::<unsafe extern "C" fn(*mut c_void) -> bool>(b"ModuleEntry\0")
                .map_err(|e| format!("{}: no ModuleEntry: {e}", binary.display()))?;
            if !entry(null_mut()) {
                return Err(format!("{}: ModuleEntry failed", binary.display()));
            }
        }
        let get_factory = library
            .get::<unsafe extern "system" fn() -> *mut IPluginFactory>(b"GetPluginFactory\0")
            .map_err(|e| format!("{}: no GetPluginFactory: {e}", binary.display()))?;
        get_factory()
    };
    if factory.is_null() {
        return Err(format!(
            "{}: GetPluginFactory returned null",
            binary.display()
        ));
    }
    Ok(Module {
        _library: library,
        factory,
    })
}

/// The class ids of the audio components the module offers.
pub fn component_classes(module: &Module) -> Vec<[i8; 16]> {
    // SAFETY: the factory is alive (see `Module`); `info` is a valid, writable struct. The
    // borrowed pointer is not released (the module keeps the factory's reference).
    unsafe {
        let Some(factory) = vst3::ComRef::from_raw(module.factory) else {
            return Vec::new();
        };
        (0..factory.countClasses())
            .filter_map(|index| {
                let mut info: PClassInfo = std::mem::zeroed();
                if factory.getClassInfo(index, &mut info) != kResultOk {
                    return None;
                }
                let category = CStr::from_ptr(info.category.as_ptr()).to_string_lossy();
                (category == "Audio Module Class").then_some(info.cid)
            })
            .collect()
    }
}

/// An `IBStream` over bytes in memory.
struct MemoryStream {
    data: Mutex<(Vec<u8>, usize)>,
    /// At most this many bytes per `read` call (0: unlimited), as some hosts stream state.
    chunk_bytes: usize,
}

impl Class for MemoryStream {
    type Interfaces = (IBStream,);
}

impl MemoryStream {
    /// A `read` or `write` of `num_bytes` at `buffer`: `kInvalidArgument` for a null buffer or a
    /// negative count; otherwise `transfer` moves bytes between the buffer and the stream's
    /// bytes at its position, and the count it returns goes to `num_bytes_moved` (if not null).
    ///
    /// # Safety
    /// `num_bytes_moved` is null or valid for a write.
    unsafe fn transfer(
        &self,
        buffer: *mut c_void,
        num_bytes: i32,
        num_bytes_moved: *mut i32,
        transfer: impl FnOnce(&mut Vec<u8>, &mut usize, usize) -> usize,
    ) -> tresult {
        if buffer.is_null() || num_bytes < 0 {
            return kInvalidArgument;
        }
        let mut data = self.data.lock().unwrap_or_else(|e| e.into_inner());
        let (bytes, position) = &mut *data;
        let count = transfer(bytes, position, num_bytes as usize);
        if !num_bytes_moved.is_null() {
            // SAFETY: a valid pointer from the plugin.
            unsafe { *num_bytes_moved = count as i32 };
        }
        kResultOk
    }
}

impl IBStreamTrait for MemoryStream {
    unsafe fn read(
        &self,
        buffer: *mut c_void,
        num_bytes: i32,
        num_bytes_read: *mut i32,
    ) -> tresult {
        // SAFETY: `num_bytes_read` comes from the plugin.
        unsafe {
            self.transfer(
                buffer,
                num_bytes,
                num_bytes_read,
                |bytes, position, num_bytes| {
                    let mut count = num_bytes.min(bytes.len().saturating_sub(*position));
                    if self.chunk_bytes > 0 {
                        count = count.min(self.chunk_bytes);
                    }
                    let to = buffer as *mut u8;
                    // SAFETY: the plugin passes `num_bytes` writable bytes; `count` is no more.
                    std::ptr::copy_nonoverlapping(bytes[*position..].as_ptr(), to, count);
                    *position += count;
                    count
                },
            )
        }
    }

    unsafe fn write(
        &self,
        buffer: *mut c_void,
        num_bytes: i32,
        num_bytes_written: *mut i32,
    ) -> tresult {
        // SAFETY: `num_bytes_written` comes from the plugin.
        unsafe {
            self.transfer(
                buffer,
                num_bytes,
                num_bytes_written,
                |bytes, position, num_bytes| {
                    // SAFETY: the plugin passes `num_bytes` readable bytes.
                    let source = std::slice::from_raw_parts(buffer as *const u8, num_bytes);
                    let end = *position + source.len();
                    if bytes.len() < end {
                        bytes.resize(end, 0);
                    }
                    bytes[*position..end].copy_from_slice(source);
                    *position = end;
                    num_bytes
                },
            )
        }
    }

    unsafe fn seek(&self, pos: i64, mode: i32, result: *mut i64) -> tresult {
        let mut data = self.data.lock().unwrap_or_else(|e| e.into_inner());
        let (bytes, position) = &mut *data;
        let base = match i64::from(mode) {
            m if m == IBStream_::IStreamSeekMode_::kIBSeekSet as i64 => 0,
            m if m == IBStream_::IStreamSeekMode_::kIBSeekCur as i64 => *position as i64,
            m if m == IBStream_::IStreamSeekMode_::kIBSeekEnd as i64 => bytes.len() as i64,
            _ => return kInvalidArgument,
        };
        let target = base + pos;
        if target < 0 {
            return kResultFalse;
        }
        *position = target as usize;
        if !result.is_null() {
            // SAFETY: a valid pointer from the plugin.
            unsafe { *result = target };
        }
        kResultOk
    }

    unsafe fn tell(&self, pos: *mut i64) -> tresult {
        if pos.is_null() {
            return kInvalidArgument;
        }
        let data = self.data.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: a valid pointer from the plugin.
        unsafe { *pos = data.1 as i64 };
        kResultOk
    }
}

/// An `IBStream` over `bytes` that returns at most `chunk_bytes` per read (0: unlimited).
pub fn stream(bytes: Vec<u8>, chunk_bytes: usize) -> ComPtr<IBStream> {
    ComWrapper::new(MemoryStream {
        data: Mutex::new((bytes, 0)),
        chunk_bytes,
    })
    .to_com_ptr::<IBStream>()
    .expect("MemoryStream implements IBStream")
}

/// Everything written to `stream`.
pub fn stream_bytes(stream: &ComPtr<IBStream>) -> Vec<u8> {
    let mut bytes = Vec::new();
    // SAFETY: our own stream object; reads into a local buffer.
    unsafe {
        let mut ignored = 0i64;
        stream.seek(
            0,
            IBStream_::IStreamSeekMode_::kIBSeekSet as i32,
            &mut ignored,
        );
        let mut chunk = [0u8; 4096];
        loop {
            let mut read = 0i32;
            if stream.read(
                chunk.as_mut_ptr() as *mut c_void,
                chunk.len() as i32,
                &mut read,
            ) != kResultOk
                || read <= 0
            {
                break;
            }
            bytes.extend_from_slice(&chunk[..read as usize]);
        }
    }
    bytes
}

/// A component of the bundle, created and initialised; terminated when dropped.
pub struct Vst3Component {
    component: ComPtr<IComponent>,
}

impl Vst3Component {
    /// Creates and initialises the component with class id `class` from `module`.
    pub fn create(module: &Module, class: &[i8; 16]) -> Result<Self, String> {
        let mut object: *mut c_void = null_mut();
        // SAFETY: the factory is alive (see `Module`); the ids are 16-byte ids; `object` receives
        // an owned reference.
        let result = unsafe {
            let factory = vst3::ComRef::from_raw(module.factory).ok_or("null factory")?;
            factory.createInstance(
                class.as_ptr(),
                IComponent::IID.as_ptr() as *const i8,
                &mut object,
            )
        };
        if result != kResultOk || object.is_null() {
            return Err(format!("createInstance returned {result}"));
        }
        // SAFETY: `object` is an owned IComponent reference from createInstance.
        let component =
            unsafe { ComPtr::from_raw(object as *mut IComponent) }.ok_or("null component")?;
        // SAFETY: the first call on a new component.
        if unsafe { component.initialize(null_mut()) } != kResultOk {
            return Err("initialize failed".into());
        }
        Ok(Self { component })
    }

    /// The component's interface.
    pub fn component(&self) -> &ComPtr<IComponent> {
        &self.component
    }

    /// `IComponent::getState`; `None` if it failed.
    pub fn state(&self) -> Option<Vec<u8>> {
        let out = stream(Vec::new(), 0);
        // SAFETY: an initialised component; the stream is our own object.
        (unsafe { self.component.getState(out.as_ptr()) } == kResultOk).then(|| stream_bytes(&out))
    }

    /// `IComponent::setState` from a stream that returns `chunk_bytes` per read (0: all).
    pub fn set_state(&self, bytes: &[u8], chunk_bytes: usize) -> tresult {
        let input = stream(bytes.to_vec(), chunk_bytes);
        // SAFETY: an initialised component; the stream is our own object.
        unsafe { self.component.setState(input.as_ptr()) }
    }
}

impl Drop for Vst3Component {
    fn drop(&mut self) {
        // SAFETY: the last call before the reference is released.
        unsafe { self.component.terminate() };
    }
}
