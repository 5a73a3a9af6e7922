//! The built CLAP library, loaded once per path and process, its entry initialised once (as
//! CLAP requires), and never unloaded (a Rust plugin that has spawned threads cannot safely be).
//! Both bare-C hosts use it: [`crate::raw_host`] and the fuzzer's
//! [`crate::fuzz::clap_instance`].

use std::ffi::{CStr, CString};
use std::path::Path;
use std::ptr::null;

use clap_sys::entry::clap_plugin_entry;
use clap_sys::factory::plugin_factory::{clap_plugin_factory, CLAP_PLUGIN_FACTORY_ID};

use crate::load_once::LoadOnce;

/// A loaded plugin library with its entry initialised (once per path and process; never
/// unloaded, as a Rust plugin with threads cannot safely be).
pub struct Library {
    _library: libloading::Library,
    entry: *const clap_plugin_entry,
}

// SAFETY: the entry is an immutable static of a library that stays loaded for the process; CLAP
// allows its factory to be used from any host main thread.
unsafe impl Send for Library {}
// SAFETY: as above.
unsafe impl Sync for Library {}

/// The library at `path`, loaded and initialised once per process.
pub fn library(path: &Path) -> Result<&'static Library, String> {
    static LIBRARIES: LoadOnce<Library> = LoadOnce::new();
    LIBRARIES.get(path, || load(path))
}

/// Loads the library at `path` and initialises its entry.
fn load(path: &Path) -> Result<Library, String> {
    // SAFETY: loading the plugin under test runs its initialisers (nice-plug's).
    let loaded = unsafe { libloading::Library::new(path) }
        .map_err(|e| format!("cannot load {}: {e}", path.display()))?;
    // SAFETY: every CLAP plugin exports `clap_entry` as a `clap_plugin_entry`.
    let entry: *const clap_plugin_entry = unsafe {
        *loaded
            .get::<*const clap_plugin_entry>(b"clap_entry\0")
            .map_err(|e| format!("{} has no clap_entry: {e}", path.display()))?
    };
    let c_path = CString::new(path.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: `init` is called once per process, with the library's path, before anything else.
    let is_initialised = unsafe { (*entry).init.is_some_and(|init| init(c_path.as_ptr())) };
    if !is_initialised {
        return Err(format!("{}: clap_entry.init failed", path.display()));
    }
    Ok(Library {
        _library: loaded,
        entry,
    })
}

/// The CLAP ids of the plugins in the library at `path`.
pub fn plugin_ids(path: &Path) -> Result<Vec<String>, String> {
    let factory = factory(path)?;
    let mut ids = Vec::new();
    // SAFETY: a factory from `factory()`; descriptors are valid for the library's lifetime.
    unsafe {
        let count = (*factory).get_plugin_count.map_or(0, |f| f(factory));
        for index in 0..count {
            let descriptor = (*factory)
                .get_plugin_descriptor
                .map_or(null(), |f| f(factory, index));
            if !descriptor.is_null() && !(*descriptor).id.is_null() {
                ids.push(
                    CStr::from_ptr((*descriptor).id)
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    Ok(ids)
}

/// The plugin factory of the library at `path`.
pub fn factory(path: &Path) -> Result<*const clap_plugin_factory, String> {
    let library = library(path)?;
    // SAFETY: the entry was initialised; the plugin factory id is a NUL-terminated constant.
    let factory = unsafe {
        (*library.entry)
            .get_factory
            .map_or(null(), |f| f(CLAP_PLUGIN_FACTORY_ID.as_ptr()))
    } as *const clap_plugin_factory;
    if factory.is_null() {
        return Err(format!("{} has no plugin factory", path.display()));
    }
    Ok(factory)
}
