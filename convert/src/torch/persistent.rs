//! torch's persistent ids (`BINPERSID`): the storages a checkpoint's tensors live in, each named
//! once with one element type and length, and (legacy layout) windows of them and `nn.Module`
//! classes kept as names.

use std::mem::size_of;

use super::item::{as_size, GlobalRef, Item, Known};
use super::latin1::utf8;
use super::machine::Machine;
use super::storage_refs::{PersistentIds, StorageRef, StorageView};

/// What a storage costs besides its entry (the key's slot in the index).
const STORAGE_INDEX_OVERHEAD_BYTES: usize = 32;

impl<'a> Machine<'a> {
    /// torch's `persistent_load`: a storage, or (legacy) an `nn.Module` class kept as a name.
    pub(super) fn persistent_load(&mut self, id: Item<'a>) -> Result<Item<'a>, String> {
        if self.persistent == PersistentIds::Refused {
            return Err(format!(
                "a persistent id ({}) outside a torch checkpoint's main pickle",
                self.describe(&id)
            ));
        }
        let Item::Tuple(fields) = &id else {
            return Err(format!(
                "the persistent id is {}, not a tuple",
                self.describe(&id)
            ));
        };
        match (&fields[..], self.persistent) {
            (
                [Item::Str(b"storage"), storage_type, Item::Str(key), Item::Str(location), numel],
                PersistentIds::TorchZip,
            ) => self.load_storage(storage_type, key, location, numel, &Item::None),
            (
                [Item::Str(b"storage"), storage_type, Item::Str(key), Item::Str(location), numel, view],
                PersistentIds::TorchLegacy,
            ) => self.load_storage(storage_type, key, location, numel, view),
            (
                [Item::Str(b"module"), module @ Item::Global(_), _source_file, _source],
                PersistentIds::TorchLegacy,
            ) => Ok(module.clone()),
            _ => {
                let described: Vec<String> =
                    fields.iter().map(|item| self.describe(item)).collect();
                Err(format!(
                    "the persistent id ({}) is not a torch storage's",
                    described.join(", ")
                ))
            }
        }
    }

    /// Registers the storage `key` (each key once, with one dtype and length) and returns the
    /// storage or the window of it that `view` names.
    fn load_storage(
        &mut self,
        storage_type: &Item<'a>,
        key: &'a [u8],
        location: &'a [u8],
        numel: &Item<'a>,
        view: &Item<'a>,
    ) -> Result<Item<'a>, String> {
        let dtype = match storage_type {
            Item::Global(GlobalRef {
                known: Some(Known::Storage(dtype)),
                ..
            }) => *dtype,
            other => {
                return Err(format!(
                    "the storage type is {}, not one of torch's storage classes (quantized \
                     storages are not supported)",
                    self.describe(other)
                ))
            }
        };
        let key = utf8(key, "a storage key")?;
        utf8(location, "a storage location")?;
        let len = as_size(numel).ok_or_else(|| {
            format!(
                "storage {key}'s length is {}, not a size",
                self.describe(numel)
            )
        })?;
        let storage = match self.storage_index.get(key) {
            Some(&index) => {
                let known = &self.storages[index];
                if (known.dtype, known.len) != (dtype, len) {
                    return Err(format!(
                        "storage {key} is named as {len} {dtype} elements and as {} {} elements",
                        known.len, known.dtype
                    ));
                }
                index
            }
            None => {
                self.budget.charge_each(
                    1,
                    size_of::<StorageRef<'a>>() + STORAGE_INDEX_OVERHEAD_BYTES,
                    "the pickle's storages",
                )?;
                self.storages.push(StorageRef { key, dtype, len });
                self.storage_index.insert(key, self.storages.len() - 1);
                self.storages.len() - 1
            }
        };
        let window = match view {
            Item::None => StorageView {
                storage,
                offset: 0,
                len,
            },
            Item::Tuple(fields) => match &fields[..] {
                [Item::Str(_), offset, view_len] => {
                    let (Some(offset), Some(view_len)) = (as_size(offset), as_size(view_len))
                    else {
                        return Err(format!("storage {key}'s view is not (key, offset, size)"));
                    };
                    if offset.checked_add(view_len).is_none_or(|end| end > len) {
                        return Err(format!(
                            "storage {key}'s view of {view_len} elements at {offset} lies past \
                             its {len} elements"
                        ));
                    }
                    StorageView {
                        storage,
                        offset,
                        len: view_len,
                    }
                }
                _ => return Err(format!("storage {key}'s view is not (key, offset, size)")),
            },
            other => {
                return Err(format!(
                    "storage {key}'s view is {}, not None or a tuple",
                    self.describe(other)
                ))
            }
        };
        self.budget
            .charge_each(1, size_of::<StorageView>(), "the pickle's storage views")?;
        self.storage_views.push(window);
        Ok(Item::Storage(self.storage_views.len() - 1))
    }
}
