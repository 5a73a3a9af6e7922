//! The committed table of ONNX Runtime's kernel registrations (`onnx/data/ort_kernels.txt`,
//! written by `onnx/data/ort_kernels.py`; its README names the sources and versions), read once.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::element::{element_type, TypeSet};
use super::provider::Provider;

/// The table's text, as committed.
const TABLE_TEXT: &str = include_str!("../../data/ort_kernels.txt");

/// What an input or output of a registration is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Bound {
    /// A type constraint of the registration (`T`).
    Constraint(String),
    /// One element type (`tensor(int64)`); `None` when it is no tensor type read here.
    Literal(Option<i64>),
}

/// One kernel registration: an operator's version range on one provider, its inputs and outputs
/// bound to type constraints, and the element types each constraint allows.
#[derive(Debug, Clone)]
pub(crate) struct Registration {
    /// First operator-set version it serves.
    pub since: i64,
    /// Last version it serves (`i64::MAX`: open).
    pub until: i64,
    /// Inputs in order (name, binding); a variadic last input binds the ones after it too.
    pub inputs: Vec<(String, Bound)>,
    /// Outputs in order.
    pub outputs: Vec<(String, Bound)>,
    /// Each constraint's allowed element types.
    pub constraints: HashMap<String, TypeSet>,
}

impl Registration {
    /// Whether it serves operator-set version `version`.
    pub fn covers(&self, version: i64) -> bool {
        (self.since..=self.until).contains(&version)
    }

    /// The binding of input `index` (a variadic last input serves every later index).
    pub fn input(&self, index: usize) -> Option<&(String, Bound)> {
        self.inputs
            .get(index.min(self.inputs.len().checked_sub(1)?))
    }

    /// The binding of output `index`.
    pub fn output(&self, index: usize) -> Option<&(String, Bound)> {
        self.outputs
            .get(index.min(self.outputs.len().checked_sub(1)?))
    }

    /// The element types `bound` allows, `None` when the table says nothing of it.
    pub fn allowed(&self, bound: &Bound) -> Option<TypeSet> {
        match bound {
            Bound::Constraint(name) => self.constraints.get(name).copied(),
            Bound::Literal(Some(code)) => Some(TypeSet::of(*code)),
            Bound::Literal(None) => None,
        }
    }

    /// `13+` or `[7, 12]`, as ONNX Runtime's documentation writes a version range.
    pub fn range_text(&self) -> String {
        if self.until == i64::MAX {
            format!("{}+", self.since)
        } else if self.until == self.since {
            self.since.to_string()
        } else {
            format!("[{}, {}]", self.since, self.until)
        }
    }
}

/// One operator's schema versions, and which of them ONNX defines by a function body.
#[derive(Debug, Clone, Default)]
pub(crate) struct SchemaVersions {
    /// `(since_version, is_function)`, ascending.
    pub versions: Vec<(i64, bool)>,
}

impl SchemaVersions {
    /// The schema version a node of operator-set `version` resolves to, and whether ONNX
    /// defines that one by a function body.
    pub fn resolve(&self, version: i64) -> Option<(i64, bool)> {
        self.versions
            .iter()
            .rev()
            .find(|(since, _)| *since <= version)
            .copied()
    }
}

/// The whole table.
#[derive(Debug, Default)]
pub(crate) struct KernelTable {
    registrations: HashMap<(Provider, String, String), Vec<Registration>>,
    schemas: HashMap<(String, String), SchemaVersions>,
    /// The table's header lines (its sources), without the `# `.
    pub sources: Vec<String>,
}

impl KernelTable {
    /// The committed table, read on first use.
    pub fn get() -> Result<&'static KernelTable, String> {
        static TABLE: OnceLock<Result<KernelTable, String>> = OnceLock::new();
        TABLE
            .get_or_init(|| KernelTable::parse(TABLE_TEXT))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The registrations of `op` in `domain` (`ai.onnx` for the default one) on `provider`.
    pub fn registrations(&self, provider: Provider, domain: &str, op: &str) -> &[Registration] {
        self.registrations
            .get(&(provider, domain.to_owned(), op.to_owned()))
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The operator's schema versions, if ONNX Runtime knows the operator.
    pub fn schema(&self, domain: &str, op: &str) -> Option<&SchemaVersions> {
        self.schemas.get(&(domain.to_owned(), op.to_owned()))
    }

    /// Reads the table's text.
    pub fn parse(text: &str) -> Result<KernelTable, String> {
        let mut table = KernelTable::default();
        let mut sets: Vec<TypeSet> = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let fail = |what: &str| format!("ort_kernels.txt line {}: {what}", number + 1);
            if let Some(comment) = line.strip_prefix("# ") {
                table.sources.push(comment.to_owned());
                continue;
            }
            let fields: Vec<&str> = line.split(' ').collect();
            match fields.as_slice() {
                [""] => {}
                [set, types @ ..] if set.starts_with('%') => {
                    if set[1..] != sets.len().to_string() {
                        return Err(fail("type sets out of order"));
                    }
                    sets.push(types.iter().filter_map(|t| element_type(t)).collect());
                }
                ["v", domain, op, versions] => {
                    let parsed = parse_versions(versions).ok_or_else(|| fail("bad versions"))?;
                    table
                        .schemas
                        .insert(((*domain).to_owned(), (*op).to_owned()), parsed);
                }
                [provider, domain, op, since, until, inputs, outputs, constraints] => {
                    let provider = Provider::from_table_name(provider)
                        .ok_or_else(|| fail("unknown provider"))?;
                    let registration =
                        parse_registration(since, until, inputs, outputs, constraints, &sets)
                            .ok_or_else(|| fail("unreadable registration"))?;
                    table
                        .registrations
                        .entry((provider, (*domain).to_owned(), (*op).to_owned()))
                        .or_default()
                        .push(registration);
                }
                _ => return Err(fail("unreadable line")),
            }
        }
        Ok(table)
    }
}

/// `1,6,13*` → versions with their function marks.
fn parse_versions(text: &str) -> Option<SchemaVersions> {
    let mut versions = text
        .split(',')
        .map(|v| match v.strip_suffix('*') {
            Some(v) => v.parse().ok().map(|v| (v, true)),
            None => v.parse().ok().map(|v| (v, false)),
        })
        .collect::<Option<Vec<(i64, bool)>>>()?;
    versions.sort_unstable();
    Some(SchemaVersions { versions })
}

/// One registration line's fields after the operator.
fn parse_registration(
    since: &str,
    until: &str,
    inputs: &str,
    outputs: &str,
    constraints: &str,
    sets: &[TypeSet],
) -> Option<Registration> {
    let bindings = |list: &str| -> Option<Vec<(String, Bound)>> {
        if list == "-" {
            return Some(Vec::new());
        }
        list.split(',')
            .map(|item| {
                let (name, bound) = item.split_once(':')?;
                let bound = match bound.strip_prefix('=') {
                    Some(literal) => Bound::Literal(element_type(literal)),
                    None => Bound::Constraint(bound.to_owned()),
                };
                Some((name.to_owned(), bound))
            })
            .collect()
    };
    let constraints = if constraints == "-" {
        HashMap::new()
    } else {
        constraints
            .split(',')
            .map(|item| {
                let (name, set) = item.split_once("=%")?;
                Some((name.to_owned(), *sets.get(set.parse::<usize>().ok()?)?))
            })
            .collect::<Option<HashMap<_, _>>>()?
    };
    Some(Registration {
        since: since.parse().ok()?,
        until: match until {
            "*" => i64::MAX,
            until => until.parse().ok()?,
        },
        inputs: bindings(inputs)?,
        outputs: bindings(outputs)?,
        constraints,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::data_type;

    #[test]
    fn the_committed_table_reads_and_holds_what_the_documentation_says() {
        let table = KernelTable::get().unwrap();
        assert!(table
            .sources
            .iter()
            .any(|s| s.contains("onnxruntime 1.31.0")));
        // CUDA: Add registers double (OperatorKernels.md); DirectML registers no double Add.
        let add = table.registrations(Provider::Cuda, "ai.onnx", "Add");
        let add14 = add.iter().find(|r| r.covers(17)).unwrap();
        assert_eq!(add14.range_text(), "14+");
        let t = add14.allowed(&Bound::Constraint("T".into())).unwrap();
        assert!(t.contains(data_type::DOUBLE) && t.contains(data_type::FLOAT16));
        let dml_add = table.registrations(Provider::DirectMl, "ai.onnx", "Add");
        let dml_t = dml_add.iter().find(|r| r.covers(17)).unwrap().constraints["T"];
        assert!(dml_t.contains(data_type::FLOAT) && !dml_t.contains(data_type::DOUBLE));
        // DirectML's `N+` registrations are closed by the next one.
        assert!(dml_add.iter().any(|r| r.since == 7 && r.until == 12));
        // No ONNX STFT on CUDA; on DirectML float and float16 only.
        assert!(table
            .registrations(Provider::Cuda, "ai.onnx", "STFT")
            .is_empty());
        assert!(!table
            .registrations(Provider::DirectMl, "ai.onnx", "STFT")
            .is_empty());
        // The CPU rows come from the 1.31.0 wheel: MultiHeadAttention is a contrib kernel.
        assert!(!table
            .registrations(Provider::Cpu, "com.microsoft", "MultiHeadAttention")
            .is_empty());
        let group_norm = table.schema("ai.onnx", "GroupNormalization").unwrap();
        assert_eq!(group_norm.resolve(17), None);
        assert_eq!(group_norm.resolve(21), Some((21, true)));
        assert_eq!(
            table.schema("ai.onnx", "Clip").unwrap().resolve(12),
            Some((12, false))
        );
    }

    #[test]
    fn bad_lines_are_errors_naming_the_line() {
        assert!(KernelTable::parse("%1 float\n")
            .unwrap_err()
            .contains("line 1"));
        let bad = "%0 float\ncpu ai.onnx Abs x * X:T Y:T T=%0\n";
        assert!(KernelTable::parse(bad).unwrap_err().contains("line 2"));
        let unknown = "%0 float\ngpu ai.onnx Abs 1 * X:T Y:T T=%0\n";
        assert!(KernelTable::parse(unknown)
            .unwrap_err()
            .contains("provider"));
        let good =
            "# source\n%0 float double\ncpu ai.onnx Abs 6 * X:T Y:T T=%0\nv ai.onnx Abs 1,6\n";
        let table = KernelTable::parse(good).unwrap();
        let abs = &table.registrations(Provider::Cpu, "ai.onnx", "Abs")[0];
        assert_eq!(
            abs.input(3).unwrap().0,
            "X",
            "a last input serves the ones after it"
        );
        assert_eq!(table.sources, ["source"]);
    }
}
