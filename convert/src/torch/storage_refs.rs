//! What torch's persistent ids name: which ids a pickle may hold ([`PersistentIds`]), the
//! storages ([`StorageRef`]), windows of them ([`StorageView`]) and the tensors made on them
//! ([`TensorRef`]). `persistent.rs` reads them; the machine keeps them.

use super::tensor::{DType, StridedLayout};

/// Which persistent ids (`BINPERSID`) a pickle may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersistentIds {
    /// None: a plain pickle (a numpy dict, a legacy checkpoint's header pickles).
    Refused,
    /// `('storage', type, key, location, numel)`: a zip checkpoint's `data.pkl`.
    TorchZip,
    /// `('storage', type, key, location, numel, view)` and `('module', class, file, source)`:
    /// the main pickle of a legacy checkpoint.
    TorchLegacy,
}

/// A storage a persistent id named: its key, element type and length in elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageRef<'a> {
    /// The key: `data/<key>` in a zip checkpoint, the order key of a legacy one.
    pub key: &'a str,
    /// Element type.
    pub dtype: DType,
    /// Length in elements.
    pub len: usize,
}

/// What a persistent id gives a tensor: a storage, or (legacy) a window of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageView {
    /// Index into [`Machine::storages`](super::machine::Machine::storages).
    pub storage: usize,
    /// First element of the window.
    pub offset: usize,
    /// Elements in the window.
    pub len: usize,
}

/// A tensor made by `_rebuild_tensor_v2`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorRef {
    /// Index into [`Machine::storages`](super::machine::Machine::storages).
    pub storage: usize,
    /// Where its elements lie in the storage (offset from the storage's start, not the
    /// view's), checked against the view.
    pub layout: StridedLayout,
}
