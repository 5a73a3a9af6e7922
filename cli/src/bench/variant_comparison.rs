//! `stemflow bench`: a model and its int8 or float16 version (`NAME` and `NAME.int8` or
//! `NAME.fp16`, as `stemflow quantize [--fp16]` writes them) side by side — speed, and what the
//! lower precision did to the stems: the SDR change against the demo song's own stems and the
//! variant's output scored against the float one.

use stemflow_engine::Stem;
use stemflow_kit::metrics::sdr_db;

use crate::memory::describe_bytes;

/// The four stems of a whole-path run, at the host rate, in [`Stem::FOUR`] order.
pub type StemAudio = [[Vec<f32>; 2]; 4];

/// What the comparison needs of one successful bench row.
pub struct Timed<'a> {
    /// The model's label (`NAME`, `NAME.int8`, `NAME.fp16`).
    pub model: &'a str,
    /// The device asked for.
    pub requested_device: &'a str,
    /// Whole-path seconds.
    pub total_s: f64,
    /// Pure inference seconds.
    pub inference_s: f64,
    /// Peak RSS during the row.
    pub peak_rss_bytes: Option<u64>,
    /// SDR per stem against the demo song's stems.
    pub sdr_db: [Option<f64>; 4],
    /// The whole path's output.
    pub stems: &'a StemAudio,
}

/// The suffixes `stemflow quantize` gives a model's versions, and what each is called.
const VARIANTS: [(&str, &str); 2] = [(".int8", "int8"), (".fp16", "fp16")];

/// One float / lower-precision pair on one device.
pub struct Comparison {
    model: String,
    /// `int8` or `fp16`.
    variant: &'static str,
    device: String,
    /// Whole-path seconds, float and variant.
    total_s: [f64; 2],
    /// Pure inference seconds, float and variant.
    inference_s: [f64; 2],
    /// Peak RSS, float and variant.
    peak_rss_bytes: [Option<u64>; 2],
    /// Per stem: the variant's SDR minus float's, both against the demo song's stems.
    sdr_change_db: [Option<f64>; 4],
    /// Per stem: the variant's output scored against the float output (higher: closer).
    sdr_vs_float_db: [Option<f64>; 4],
}

/// Every (float, variant) pair of rows on the same requested device.
pub fn compare(rows: &[Timed<'_>]) -> Vec<Comparison> {
    let mut comparisons = Vec::new();
    for q in rows {
        let Some((float_name, variant)) = VARIANTS
            .iter()
            .find_map(|&(suffix, variant)| Some((q.model.strip_suffix(suffix)?, variant)))
        else {
            continue;
        };
        let Some(f) = rows
            .iter()
            .find(|r| r.model == float_name && r.requested_device == q.requested_device)
        else {
            continue;
        };
        let sdr_change_db = std::array::from_fn(|i| Some(q.sdr_db[i]? - f.sdr_db[i]?));
        let sdr_vs_float_db = std::array::from_fn(|i| {
            let is_silent = f.stems[i].iter().flatten().all(|&x| x == 0.0);
            (!is_silent).then(|| sdr_db(&f.stems[i], &q.stems[i]))
        });
        comparisons.push(Comparison {
            model: float_name.to_owned(),
            variant,
            device: q.requested_device.to_owned(),
            total_s: [f.total_s, q.total_s],
            inference_s: [f.inference_s, q.inference_s],
            peak_rss_bytes: [f.peak_rss_bytes, q.peak_rss_bytes],
            sdr_change_db,
            sdr_vs_float_db,
        });
    }
    comparisons
}

/// Prints the comparisons after the bench table (nothing when there are none).
pub fn print_table(comparisons: &[Comparison]) {
    if comparisons.is_empty() {
        return;
    }
    for variant in VARIANTS.map(|(_, variant)| variant) {
        let rows: Vec<&Comparison> = comparisons
            .iter()
            .filter(|c| c.variant == variant)
            .collect();
        if !rows.is_empty() {
            print_variant_table(variant, &rows);
        }
    }
}

fn print_variant_table(variant: &str, comparisons: &[&Comparison]) {
    crate::output::say!(
        "\n{variant} against float (time ratio below 1: {variant} is faster; SDR change against the demo's stems, then the {variant} output scored against the float output, per stem V/D/B/O):"
    );
    crate::output::say!(
        "{:<24} {:<8} {:>17} {:>17} {:>10} {:>19} {:>29} {:>31}",
        "MODEL",
        "DEVICE",
        format!("WHOLE s fp32/{variant}"),
        format!("INFER s fp32/{variant}"),
        "TIME RATIO",
        format!("PEAK RSS fp32/{variant}"),
        "SDR CHANGE dB",
        "SDR vs FLOAT dB"
    );
    for c in comparisons {
        crate::output::say!(
            "{:<24} {:<8} {:>17} {:>17} {:>10.2} {:>19} {:>29} {:>31}",
            c.model,
            c.device,
            format!("{:.2} / {:.2}", c.total_s[0], c.total_s[1]),
            format!("{:.2} / {:.2}", c.inference_s[0], c.inference_s[1]),
            c.total_s[1] / c.total_s[0].max(1e-12),
            format!(
                "{} / {}",
                describe_bytes(c.peak_rss_bytes[0]),
                describe_bytes(c.peak_rss_bytes[1])
            ),
            per_stem(&c.sdr_change_db, |v| format!("{v:+.2}")),
            per_stem(&c.sdr_vs_float_db, |v| format!("{v:.1}")),
        );
    }
}

fn per_stem(values: &[Option<f64>; 4], show: impl Fn(f64) -> String) -> String {
    values
        .iter()
        .map(|v| v.map_or_else(|| "–".to_owned(), &show))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Comparison {
    /// The comparison for `stemflow bench --json`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "model": self.model,
            "variant": self.variant,
            "requested_device": self.device,
            "total_s": {"float": self.total_s[0], "variant": self.total_s[1]},
            "inference_s": {"float": self.inference_s[0], "variant": self.inference_s[1]},
            "time_ratio": self.total_s[1] / self.total_s[0].max(1e-12),
            "peak_rss_bytes": {"float": self.peak_rss_bytes[0], "variant": self.peak_rss_bytes[1]},
            "sdr_change_db": stem_values(&self.sdr_change_db),
            "sdr_vs_float_db": stem_values(&self.sdr_vs_float_db),
        })
    }
}

/// Per-stem values as a JSON object keyed by stem name (`null` where absent).
pub fn stem_values(values: &[Option<f64>; 4]) -> serde_json::Value {
    Stem::FOUR
        .into_iter()
        .zip(values)
        .map(|(stem, value)| (stem.file_name().to_owned(), serde_json::json!(value)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_print_in_order_with_dashes_for_absent_ones() {
        let text = per_stem(&[Some(-0.123), None, Some(0.5), None], |v| {
            format!("{v:+.2}")
        });
        assert_eq!(text, "-0.12 – +0.50 –");
    }
}
