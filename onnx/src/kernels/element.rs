//! Tensor element types (`TensorProto.DataType`) by the names ONNX Runtime's documentation uses,
//! and sets of them.

/// `(TensorProto.DataType, name)`: every tensor element type of ONNX 1.20.
const NAMES: [(i64, &str); 26] = [
    (1, "float"),
    (2, "uint8"),
    (3, "int8"),
    (4, "uint16"),
    (5, "int16"),
    (6, "int32"),
    (7, "int64"),
    (8, "string"),
    (9, "bool"),
    (10, "float16"),
    (11, "double"),
    (12, "uint32"),
    (13, "uint64"),
    (14, "complex64"),
    (15, "complex128"),
    (16, "bfloat16"),
    (17, "float8e4m3fn"),
    (18, "float8e4m3fnuz"),
    (19, "float8e5m2"),
    (20, "float8e5m2fnuz"),
    (21, "uint4"),
    (22, "int4"),
    (23, "float4e2m1"),
    (24, "float8e8m0"),
    (25, "uint2"),
    (26, "int2"),
];

/// The `TensorProto.DataType` of a tensor type name (`float`, `int64`); `None` for sequences,
/// optionals and names this table does not know.
pub fn element_type(name: &str) -> Option<i64> {
    NAMES
        .iter()
        .find(|(_, n)| *n == name)
        .map(|(code, _)| *code)
}

/// The name of element type `code` (`double` for 11), or `type N` for one not known here.
pub fn element_name(code: i64) -> String {
    NAMES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, n)| (*n).to_owned())
        .unwrap_or_else(|| format!("type {code}"))
}

/// Whether `code` is an integer or boolean type (what shape computations are made of).
pub fn is_integer_or_bool(code: i64) -> bool {
    matches!(code, 2..=7 | 9 | 12 | 13 | 21 | 22 | 25 | 26)
}

/// A set of element types (bit `code` set for each).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TypeSet(u64);

impl TypeSet {
    /// The set of one type.
    pub fn of(code: i64) -> Self {
        TypeSet::default().with(code)
    }

    fn with(self, code: i64) -> Self {
        match u32::try_from(code) {
            Ok(bit) if bit < 64 => TypeSet(self.0 | 1 << bit),
            _ => self,
        }
    }

    /// Whether it holds `code`.
    pub fn contains(self, code: i64) -> bool {
        u32::try_from(code).is_ok_and(|bit| bit < 64 && self.0 & (1 << bit) != 0)
    }

    /// Its only type, when it holds exactly one.
    pub fn single(self) -> Option<i64> {
        (self.0.count_ones() == 1).then(|| i64::from(self.0.trailing_zeros()))
    }

    /// Its types by name, as the documentation lists them (`float, float16`).
    pub fn names(self) -> String {
        let mut names: Vec<String> = (0..64)
            .filter(|&code| self.contains(code))
            .map(element_name)
            .collect();
        names.sort();
        names.join(", ")
    }
}

impl FromIterator<i64> for TypeSet {
    fn from_iter<I: IntoIterator<Item = i64>>(iter: I) -> Self {
        iter.into_iter().fold(TypeSet::default(), TypeSet::with)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::data_type;

    #[test]
    fn names_and_sets_agree_with_the_data_type_codes() {
        assert_eq!(element_type("double"), Some(data_type::DOUBLE));
        assert_eq!(element_type("float16"), Some(data_type::FLOAT16));
        assert_eq!(element_type("seq(float)"), None);
        assert_eq!(element_name(data_type::BFLOAT16), "bfloat16");
        assert_eq!(element_name(99), "type 99");
        let set: TypeSet = [data_type::FLOAT, data_type::FLOAT16].into_iter().collect();
        assert!(set.contains(data_type::FLOAT) && !set.contains(data_type::DOUBLE));
        assert_eq!(set.names(), "float, float16");
        assert_eq!(set.single(), None);
        assert_eq!(
            TypeSet::of(data_type::INT64).single(),
            Some(data_type::INT64)
        );
        assert!(
            !TypeSet::of(-1).contains(-1),
            "codes out of range are never members"
        );
        assert!(is_integer_or_bool(data_type::INT64) && !is_integer_or_bool(data_type::FLOAT));
    }
}
