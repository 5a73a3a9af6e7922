//! The zip layout of `torch.save` (torch ≥ 1.6): `<archive>/data.pkl` is the pickle; its
//! persistent ids `('storage', <storage class>, key, location, numel)` name the entries
//! `<archive>/data/<key>`, each a storage's raw little-endian bytes (`<archive>/byteorder`, when
//! present, must say `little`). torch stores every entry, so storages are borrowed from the
//! file; deflated ones (another zip tool) are inflated within the read's budget.

use super::checkpoint::{materialise, storage_bytes, unpickle, CheckpointLayout, TorchCheckpoint};
use super::machine::PersistentIds;
use crate::budget::ReadBudget;
use crate::error::ConvertError;
use crate::zip::ZipArchive;

/// Reads a zip checkpoint, charging `budget` for the inflated pickle and storages (torch stores
/// them; another zip tool may deflate them) and every copied view.
pub(super) fn load_zip<'a>(
    bytes: &'a [u8],
    budget: &ReadBudget,
) -> Result<TorchCheckpoint<'a>, ConvertError> {
    let archive = ZipArchive::parse(bytes)?;
    let pickle_entry = archive
        .entries()
        .iter()
        .filter(|entry| {
            entry
                .name
                .strip_suffix("/data.pkl")
                .is_some_and(|folder| !folder.is_empty() && !folder.contains('/'))
        })
        .collect::<Vec<_>>();
    let [pickle_entry] = pickle_entry[..] else {
        return Err(ConvertError::Layout(format!(
            "a zip archive with {} <archive>/data.pkl entries, not one: not a torch checkpoint",
            pickle_entry.len()
        )));
    };
    let prefix = &pickle_entry.name[..pickle_entry.name.len() - "data.pkl".len()];
    if let Some(entry) = archive.find(&format!("{prefix}byteorder")) {
        let order = archive.read(entry, 16)?;
        if &order[..] != b"little" {
            return Err(ConvertError::Layout(format!(
                "the checkpoint's byte order is {:?}; only little-endian checkpoints are \
                 supported",
                String::from_utf8_lossy(&order)
            )));
        }
    }
    let pickle = archive.read_within(pickle_entry, budget, "the pickle")?;
    let unpickled = unpickle(&pickle, 0, PersistentIds::TorchZip, budget)?;
    let trailing = pickle.len() - unpickled.end;
    if trailing > 0 {
        return Err(ConvertError::Pickle(format!(
            "{trailing} bytes follow STOP at byte {} of {}: damaged pickle",
            unpickled.end - 1,
            pickle_entry.name
        )));
    }
    let storages = unpickled
        .storages
        .iter()
        .map(|(key, dtype, len)| {
            let name = format!("{prefix}data/{key}");
            let entry = archive.find(&name).ok_or_else(|| {
                ConvertError::Layout(format!(
                    "the pickle names storage {key}, but the archive has no {name}"
                ))
            })?;
            let expected = storage_bytes(key, *dtype, *len)?;
            if entry.uncompressed_size != expected as u64 {
                return Err(ConvertError::Layout(format!(
                    "{name} holds {} bytes, but the pickle says {len} {dtype} elements \
                     ({expected} bytes)",
                    entry.uncompressed_size
                )));
            }
            archive.read_within(entry, budget, &format!("storage {key}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(TorchCheckpoint {
        root: unpickled.root,
        tensors: materialise(unpickled.pending, &storages, budget)?,
        layout: CheckpointLayout::Zip {
            archive_name: prefix.trim_end_matches('/').to_string(),
        },
    })
}
