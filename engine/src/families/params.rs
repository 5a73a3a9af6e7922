//! Where a model's parameters come from: UVR's MDX-Net table (by the MD5 of the file's last
//! 10,240,000 bytes), or a sidecar next to the model (`<name>.json`, or an MSST config
//! `<name>.yaml` for RoFormer models).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use md5::{Digest, Md5};
use serde_json::Value;

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
            parse_msst_yaml(&text)
        };
        return Ok(Some(ModelParams {
            values,
            source: Some(format!("sidecar {name}")),
        }));
    }
    Ok(None)
}

/// Picks the keys Stemflow needs out of a Music-Source-Separation-Training YAML config (which
/// uses Python-specific tags a strict YAML parser refuses): `audio.{chunk_size, n_fft,
/// hop_length, sample_rate}`, `model.{stft_n_fft, stft_hop_length, zero_dc}`,
/// `training.{instruments, target_instrument}`, `inference.{num_overlap, chunk_size}`.
/// Keys come out flattened as `section.key`.
pub fn parse_msst_yaml(text: &str) -> HashMap<String, Value> {
    let mut values = HashMap::new();
    let mut section = String::new();
    let mut open_list: Option<(String, Vec<Value>)> = None;
    let scalar = |raw: &str| -> Value {
        let raw = raw.trim().trim_matches(|c| c == '\'' || c == '"');
        if let Ok(i) = raw.parse::<i64>() {
            Value::from(i)
        } else if let Ok(f) = raw.parse::<f64>() {
            Value::from(f)
        } else {
            match raw.to_ascii_lowercase().as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                "null" | "~" | "none" => Value::Null,
                _ => Value::from(raw),
            }
        }
    };
    for line in text.lines() {
        let without_comment = line.split(" #").next().unwrap_or("");
        if without_comment.trim().is_empty() || without_comment.trim_start().starts_with('#') {
            continue;
        }
        let indent = without_comment.len() - without_comment.trim_start().len();
        let content = without_comment.trim();
        if let Some(item) = content.strip_prefix("- ") {
            if let Some((_, items)) = open_list.as_mut() {
                items.push(scalar(item));
            }
            continue;
        }
        if let Some((key, items)) = open_list.take() {
            values.insert(key, Value::Array(items));
        }
        let Some((key, value)) = content.split_once(':') else {
            continue;
        };
        let key = key.trim();
        let value = value.trim();
        if indent == 0 {
            section = key.to_string();
            continue;
        }
        let full = format!("{section}.{key}");
        if value.is_empty() || value.starts_with("!!") {
            open_list = Some((full, Vec::new()));
        } else if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
            let items = inner
                .split(',')
                .filter(|s| !s.trim().is_empty())
                .map(scalar)
                .collect();
            values.insert(full, Value::Array(items));
        } else {
            values.insert(full, scalar(value));
        }
    }
    if let Some((key, items)) = open_list {
        values.insert(key, Value::Array(items));
    }
    values
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

    #[test]
    fn msst_yaml_keys_are_found_with_python_tags_and_both_list_styles() {
        let yaml = "audio:\n  chunk_size: 485100\n  n_fft: 2048\n  hop_length: 441 # comment\n\
                    model:\n  freqs_per_bands: !!python/tuple\n  - 2\n  - 4\n  stft_hop_length: 441\n  zero_dc: false\n\
                    training:\n  instruments: ['Drums', 'Bass', 'Other', 'Vocals']\n  target_instrument: null\n\
                    inference:\n  num_overlap: 2\n";
        let v = parse_msst_yaml(yaml);
        assert_eq!(v["audio.chunk_size"], 485100);
        assert_eq!(v["audio.hop_length"], 441);
        assert_eq!(v["model.zero_dc"], false);
        assert_eq!(v["model.freqs_per_bands"], serde_json::json!([2, 4]));
        assert_eq!(
            v["training.instruments"],
            serde_json::json!(["Drums", "Bass", "Other", "Vocals"])
        );
        assert_eq!(v["training.target_instrument"], Value::Null);
        assert_eq!(v["inference.num_overlap"], 2);
        let block = parse_msst_yaml("training:\n  instruments:\n  - vocals\n  - other\n");
        assert_eq!(
            block["training.instruments"],
            serde_json::json!(["vocals", "other"])
        );
    }
}
