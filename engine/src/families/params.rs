//! Where a model's parameters come from: UVR's MDX-Net table (by the MD5 of the file's last
//! 10,240,000 bytes), or a sidecar next to the model (`<name>.json`, or an MSST config
//! `<name>.yaml` for RoFormer models).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use md5::{Digest, Md5};
use serde_json::Value;
use stemflow_yaml::read_msst_yaml;

/// UVR's `mdx_model_data/model_data_new.json` (TRvlvr/application_data, commit 3826b05).
const UVR_MDX_TABLE: &str = include_str!("../../data/uvr_mdx_model_data.json");

/// UVR hashes the last this-many bytes of a model file (the whole file when smaller).
pub const UVR_HASH_TAIL_BYTES: usize = 10_240_000;

/// The MD5 UVR keys its table with. Realtime-safe: no allocation beyond the hasher.
pub fn uvr_model_hash(bytes: &[u8]) -> String {
    let tail = &bytes[bytes.len().saturating_sub(UVR_HASH_TAIL_BYTES)..];
    format!("{:x}", Md5::digest(tail))
}

/// Parameters, as loose key/values from the table or a sidecar, with the source named.
#[derive(Debug, Clone, Default)]
pub struct ModelParams {
    /// The values.
    pub values: HashMap<String, Value>,
    /// Where they came from, for messages ("UVR table", "sidecar model.json").
    pub source: Option<String>,
}

impl ModelParams {
    /// An integer value.
    pub fn usize(&self, key: &str) -> Option<usize> {
        self.values
            .get(key)
            .and_then(|v| v.as_u64())
            .map(|v| v as usize)
    }

    /// A number.
    pub fn f64(&self, key: &str) -> Option<f64> {
        self.values.get(key).and_then(|v| v.as_f64())
    }

    /// A string.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.values.get(key).and_then(|v| v.as_str())
    }

    /// A boolean.
    pub fn bool(&self, key: &str) -> Option<bool> {
        self.values.get(key).and_then(|v| v.as_bool())
    }

    /// A list of strings.
    pub fn strings(&self, key: &str) -> Option<Vec<String>> {
        self.values.get(key).and_then(|v| v.as_array()).map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
    }
}

/// The UVR table entry for a model file, if it is a known UVR model.
pub fn uvr_table_entry(bytes: &[u8]) -> Option<ModelParams> {
    let hash = uvr_model_hash(bytes);
    let table: HashMap<String, HashMap<String, Value>> =
        serde_json::from_str(UVR_MDX_TABLE).ok()?;
    table.get(&hash).map(|values| ModelParams {
        values: values.clone(),
        source: Some(format!("UVR model table (MD5 {hash})")),
    })
}

/// The sidecar files looked for next to `model`, in order.
pub fn sidecar_candidates(model: &Path) -> Vec<PathBuf> {
    ["json", "yaml", "yml"]
        .iter()
        .map(|ext| model.with_extension(ext))
        .collect()
}

/// Reads the first sidecar next to `model`. A sidecar that exists but cannot be read or parsed
/// is an error that names it.
pub fn read_sidecar(model: &Path) -> Result<Option<ModelParams>, String> {
    for path in sidecar_candidates(model) {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let values = if path.extension().is_some_and(|e| e == "json") {
            let value: Value =
                serde_json::from_str(&text).map_err(|e| format!("sidecar {name}: {e}"))?;
            match value {
                Value::Object(map) => map.into_iter().collect(),
                _ => return Err(format!("sidecar {name}: expected a JSON object")),
            }
        } else {
            read_msst_yaml(&text)
                .map_err(|e| format!("sidecar {name}: {e}"))?
                .into_iter()
                .collect()
        };
        return Ok(Some(ModelParams {
            values,
            source: Some(format!("sidecar {name}")),
        }));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uvr_hash_covers_the_last_10_mb_or_the_whole_file() {
        let small = b"stemflow".to_vec();
        assert_eq!(uvr_model_hash(&small), format!("{:x}", Md5::digest(&small)));
        let mut big = vec![7u8; UVR_HASH_TAIL_BYTES + 5];
        big[0] = 1; // outside the tail: must not change the hash
        let tail_hash = uvr_model_hash(&big);
        big[0] = 2;
        assert_eq!(uvr_model_hash(&big), tail_hash);
        big[UVR_HASH_TAIL_BYTES] = 3;
        assert_ne!(uvr_model_hash(&big), tail_hash);
    }

    #[test]
    fn the_uvr_table_parses_and_has_mdx_parameters() {
        let table: HashMap<String, HashMap<String, Value>> =
            serde_json::from_str(UVR_MDX_TABLE).unwrap();
        let entry = &table["0ddfc0eb5792638ad5dc27850236c246"];
        assert_eq!(entry["mdx_n_fft_scale_set"], 6144);
        assert_eq!(entry["mdx_dim_f_set"], 2048);
        assert_eq!(entry["primary_stem"], "Vocals");
        assert!(table.len() > 20);
    }
}
