//! The owners' terms: accepted once per model and models folder before anything is downloaded
//! ([`TERMS_RECORD_FILE`] holds a hash of the terms each acceptance was for, so changed terms
//! are asked again), and kept next to the model as `NAME.TERMS.txt`. Not realtime-safe: file
//! I/O.

use std::path::{Path, PathBuf};

use crate::catalogue::CatalogueModel;
use crate::error::FetchError;
use crate::files::{sha256_hex, write_atomically};

/// The file in the models folder recording whose terms were accepted (JSON: model name → SHA-256
/// of the terms' text).
pub const TERMS_RECORD_FILE: &str = ".terms-accepted.json";

/// The terms file kept next to `model`.
pub fn terms_file(model: &CatalogueModel, models_dir: &Path) -> PathBuf {
    models_dir.join(format!("{}.TERMS.txt", model.name))
}

/// The record of accepted terms in `models_dir`, as a JSON object.
fn read_terms_record(models_dir: &Path) -> serde_json::Map<String, serde_json::Value> {
    std::fs::read_to_string(models_dir.join(TERMS_RECORD_FILE))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// Whether `model`'s current terms were accepted for `models_dir` before.
pub fn terms_accepted(model: &CatalogueModel, models_dir: &Path) -> bool {
    read_terms_record(models_dir)
        .get(model.name)
        .and_then(|v| v.as_str())
        == Some(sha256_hex(model.terms.as_bytes()).as_str())
}

/// Records that `model`'s terms were accepted (creating `models_dir`).
pub fn record_terms_accepted(model: &CatalogueModel, models_dir: &Path) -> Result<(), FetchError> {
    if terms_accepted(model, models_dir) {
        return Ok(());
    }
    std::fs::create_dir_all(models_dir)
        .map_err(|e| FetchError::Io(format!("cannot create {}: {e}", models_dir.display())))?;
    let mut record = read_terms_record(models_dir);
    record.insert(
        model.name.to_owned(),
        serde_json::Value::String(sha256_hex(model.terms.as_bytes())),
    );
    let text = serde_json::to_string_pretty(&record).unwrap_or_default() + "\n";
    write_atomically(&models_dir.join(TERMS_RECORD_FILE), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::catalogue_model;

    #[test]
    fn terms_are_recorded_once_per_model_and_folder() {
        let dir = std::env::temp_dir().join(format!("stemflow-terms-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let kim = catalogue_model("Kim_Vocal_2").unwrap();
        let ht = catalogue_model("htdemucs").unwrap();
        assert!(!terms_accepted(kim, &dir));
        record_terms_accepted(kim, &dir).unwrap();
        record_terms_accepted(ht, &dir).unwrap();
        assert!(terms_accepted(kim, &dir) && terms_accepted(ht, &dir));
        // Changed terms are asked again.
        let changed = CatalogueModel {
            terms: "new terms",
            ..*kim
        };
        assert!(!terms_accepted(&changed, &dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
