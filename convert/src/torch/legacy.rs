//! The legacy layout of `torch.save` (torch < 1.6, or `_use_new_zipfile_serialization=False`):
//! a sequence of pickles (the magic number `0x1950a86a20f9469cfc6c`, the protocol version 1001,
//! a `sys_info` dict, the object, whose persistent ids are `('storage', <storage class>, key,
//! location, numel, view)`, then the list of storage keys), followed for each key by an 8-byte
//! little-endian element count and the storage's raw bytes.

use std::borrow::Cow;
use std::collections::HashMap;

use super::checkpoint::{materialise, storage_bytes, unpickle, CheckpointLayout, TorchCheckpoint};
use super::item::Item;
use super::machine::{Machine, PersistentIds};
use super::value::Value;
use crate::budget::ReadBudget;
use crate::error::ConvertError;

/// The first pickle of a legacy checkpoint (`torch.serialization.MAGIC_NUMBER`).
const LEGACY_MAGIC_NUMBER: i128 = 0x1950_a86a_20f9_469c_fc6c;
/// The second (`torch.serialization.PROTOCOL_VERSION`).
const LEGACY_PROTOCOL_VERSION: i64 = 1001;

/// Reads a legacy checkpoint; its storages are borrowed from `bytes`, and its pickles and copied
/// views charge `budget`.
pub(super) fn load_legacy<'a>(
    bytes: &'a [u8],
    budget: &ReadBudget,
) -> Result<TorchCheckpoint<'a>, ConvertError> {
    let not_legacy = |what: String| {
        ConvertError::Layout(format!(
            "not a torch checkpoint: a pickle stream whose {what}"
        ))
    };
    let (magic, position) = header_item(bytes, 0, budget)?;
    if !matches!(magic, Item::BigInt(LEGACY_MAGIC_NUMBER)) {
        return Err(not_legacy(
            "first pickle is not torch's magic number".to_string(),
        ));
    }
    let (version, position) = header_item(bytes, position, budget)?;
    if !matches!(version, Item::Int(LEGACY_PROTOCOL_VERSION)) {
        return Err(not_legacy(format!(
            "protocol version is not {LEGACY_PROTOCOL_VERSION}"
        )));
    }
    let sys_info = unpickle(bytes, position, PersistentIds::Refused, budget)?;
    if sys_info.root.get("little_endian") == Some(&Value::Bool(false)) {
        return Err(ConvertError::Layout(
            "the checkpoint was saved on a big-endian machine; only little-endian checkpoints \
             are supported"
                .to_string(),
        ));
    }
    let main = unpickle(bytes, sys_info.end, PersistentIds::TorchLegacy, budget)?;
    let keys = unpickle(bytes, main.end, PersistentIds::Refused, budget)?;
    let key_list = keys
        .root
        .as_items()
        .filter(|_| matches!(keys.root, Value::List(_)))
        .ok_or_else(|| {
            ConvertError::Layout(format!(
                "the storage key list is {}, not a list",
                keys.root.describe()
            ))
        })?;
    if key_list.len() != main.storages.len() {
        return Err(ConvertError::Layout(format!(
            "the checkpoint lists {} storages, but its pickle names {}",
            key_list.len(),
            main.storages.len()
        )));
    }
    let index_by_key: HashMap<&str, usize> = main
        .storages
        .iter()
        .enumerate()
        .map(|(index, (key, _, _))| (key.as_str(), index))
        .collect();
    let mut storages: Vec<Option<Cow<'_, [u8]>>> = vec![None; main.storages.len()];
    let mut position = keys.end;
    for key in key_list {
        let key = key.as_str().ok_or_else(|| {
            ConvertError::Layout(format!("a storage key is {}, not a str", key.describe()))
        })?;
        let index = index_by_key
            .get(key)
            .copied()
            .filter(|&index| storages[index].is_none())
            .ok_or_else(|| {
                ConvertError::Layout(format!(
                    "the storage list names {key}, which the pickle does not name (or names \
                     twice)"
                ))
            })?;
        let (_, dtype, len) = &main.storages[index];
        let truncated = || {
            ConvertError::Layout(format!(
                "the checkpoint ends inside storage {key} (at byte {position} of {})",
                bytes.len()
            ))
        };
        let count = bytes.get(position..position + 8).ok_or_else(truncated)?;
        let count = u64::from_le_bytes(count.try_into().map_err(|_| truncated())?);
        if count != *len as u64 {
            return Err(ConvertError::Layout(format!(
                "storage {key} holds {count} elements, but the pickle says {len}"
            )));
        }
        let len_bytes = storage_bytes(key, *dtype, *len)?;
        let data = position
            .checked_add(8 + len_bytes)
            .and_then(|end| bytes.get(position + 8..end))
            .ok_or_else(truncated)?;
        storages[index] = Some(Cow::Borrowed(data));
        position += 8 + len_bytes;
    }
    if position != bytes.len() {
        return Err(ConvertError::Layout(format!(
            "{} bytes follow the last storage: damaged checkpoint",
            bytes.len() - position
        )));
    }
    // Every key was matched once and the counts are equal, so every slot is filled.
    let storages: Vec<Cow<'_, [u8]>> = storages.into_iter().flatten().collect();
    Ok(TorchCheckpoint {
        root: main.root,
        tensors: materialise(main.pending, &storages, budget)?,
        layout: CheckpointLayout::Legacy,
    })
}

/// The raw item of the plain pickle at `start` and the offset after it (the magic number and
/// the protocol version).
fn header_item<'a>(
    input: &'a [u8],
    start: usize,
    budget: &'a ReadBudget,
) -> Result<(Item<'a>, usize), ConvertError> {
    let mut machine = Machine::new(input, start, PersistentIds::Refused, budget);
    let item = machine.run().map_err(ConvertError::Pickle)?;
    Ok((item, machine.position()))
}
