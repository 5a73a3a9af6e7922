//! The values the pickle machine works with: [`Item`]s on its stack and in its memo, the mutable
//! [`Object`]s they point to, the globals it knows ([`Known`]), and the small conversions its
//! opcodes share.

use std::rc::Rc;

use super::tensor::DType;

/// Deepest tuples may nest (numpy's pickles nest 2 deep, torch's 3).
pub const MAX_TUPLE_NESTING: usize = 16;
/// Longest `module` or `name` of a global.
pub(super) const MAX_GLOBAL_NAME_BYTES: usize = 256;

/// The globals the machine interprets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// `numpy.core.multiarray._reconstruct` (or numpy 2's `numpy._core.multiarray`).
    Reconstruct,
    /// `numpy.ndarray`.
    NdArrayType,
    /// `numpy.dtype`.
    NumpyDtype,
    /// `_codecs.encode`.
    CodecsEncode,
    /// `collections.OrderedDict`.
    OrderedDict,
    /// `torch._utils._rebuild_tensor_v2`.
    RebuildTensorV2,
    /// `torch._utils._rebuild_parameter`.
    RebuildParameter,
    /// `fractions.Fraction`.
    Fraction,
    /// A storage class (`torch.FloatStorage`, `torch.cuda.HalfStorage`, `torch.UntypedStorage`
    /// …): only meaningful inside a persistent id.
    Storage(DType),
}

impl Known {
    /// The allowed global `module.name`, or `None`.
    fn from_names(module: &str, name: &str) -> Option<Self> {
        Some(match (module, name) {
            ("numpy.core.multiarray" | "numpy._core.multiarray", "_reconstruct") => {
                Self::Reconstruct
            }
            ("numpy", "ndarray") => Self::NdArrayType,
            ("numpy", "dtype") => Self::NumpyDtype,
            ("_codecs", "encode") => Self::CodecsEncode,
            ("collections", "OrderedDict") => Self::OrderedDict,
            ("torch._utils", "_rebuild_tensor_v2") => Self::RebuildTensorV2,
            ("torch._utils", "_rebuild_parameter") => Self::RebuildParameter,
            ("fractions", "Fraction") => Self::Fraction,
            ("torch" | "torch.cuda", storage) => Self::Storage(DType::from_storage_class(storage)?),
            _ => return None,
        })
    }
}

/// A global the pickle named.
#[derive(Debug, Clone, Copy)]
pub struct GlobalRef<'a> {
    /// Module, e.g. `torch._utils`.
    pub module: &'a str,
    /// Name in the module, e.g. `_rebuild_tensor_v2`.
    pub name: &'a str,
    /// What it is when the machine interprets it.
    pub known: Option<Known>,
}

/// A value on the stack or in the memo. Cheap to clone (strings borrow the input).
#[derive(Debug, Clone)]
pub enum Item<'a> {
    None,
    Bool(bool),
    Int(i64),
    /// A `LONG1` int that does not fit an `i64`.
    BigInt(i128),
    Float(f64),
    /// A str's UTF-8 bytes, checked where the string is used, so that a 13 MB latin-1 data
    /// string is scanned once.
    Str(&'a [u8]),
    /// A `bytes` object (`BINBYTES`, protocol 3 and above).
    Bytes(&'a [u8]),
    /// A `bytes` object from `_codecs.encode(text, 'latin1')` (protocol 2): `utf8` is `text`,
    /// checked to be UTF-8 whose code points are all < 256; those are the `len_bytes` bytes.
    Latin1Bytes {
        utf8: &'a [u8],
        len_bytes: usize,
    },
    Tuple(Rc<TupleItems<'a>>),
    Global(GlobalRef<'a>),
    /// `fractions.Fraction(numerator, denominator)`, reduced, denominator > 0.
    Fraction(i64, i64),
    /// Index into [`Machine::objects`]: objects are shared (memo) and mutated (`SETITEMS`,
    /// `APPENDS`, `BUILD`).
    Object(usize),
    /// Index into [`Machine::storage_views`].
    Storage(usize),
    /// Index into [`Machine::tensors`].
    Tensor(usize),
}

/// A tuple's items and how deeply tuples nest in it (bounded, so that dropping a value never
/// recurses deeply).
#[derive(Debug)]
pub struct TupleItems<'a> {
    /// The items.
    pub items: Vec<Item<'a>>,
    /// 1 + the deepest nesting among the items (0 for non-tuples).
    nesting: usize,
}

impl<'a> std::ops::Deref for TupleItems<'a> {
    type Target = [Item<'a>];

    fn deref(&self) -> &[Item<'a>] {
        &self.items
    }
}

/// A mutable object.
#[derive(Debug)]
pub enum Object<'a> {
    /// A `dict` or `collections.OrderedDict`: keys and values in insertion order (duplicate
    /// keys are found when the tree is read).
    Dict {
        /// The items.
        items: Vec<(Item<'a>, Item<'a>)>,
        /// Made by `collections.OrderedDict()`.
        is_ordered: bool,
    },
    /// A `list`.
    List(Vec<Item<'a>>),
    /// From numpy's `_reconstruct`; `None` until `BUILD` gives it its state.
    Array(Option<ArrayState<'a>>),
    /// From `numpy.dtype(kind, False, True)`.
    Dtype(DtypeState<'a>),
}

/// A numpy array's `BUILD` state, checked for shape but not yet for dtype or length.
#[derive(Debug)]
pub struct ArrayState<'a> {
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Product of `shape` (checked for overflow, also times 8).
    pub num_elements: usize,
    /// Index of the [`Object::Dtype`].
    pub dtype: usize,
    /// Column-major order.
    pub is_fortran: bool,
    /// The data.
    pub data: ArrayData<'a>,
}

/// A numpy array's data bytes.
#[derive(Debug, Clone, Copy)]
pub enum ArrayData<'a> {
    /// Protocol 2: UTF-8 of code points < 256 (checked) standing for `len_bytes` bytes.
    Latin1 {
        /// The text.
        utf8: &'a [u8],
        /// The number of bytes it stands for.
        len_bytes: usize,
    },
    /// Protocol 3 and above: the bytes.
    Raw(&'a [u8]),
}

impl ArrayData<'_> {
    /// Number of bytes.
    pub fn len_bytes(&self) -> usize {
        match self {
            Self::Latin1 { len_bytes, .. } => *len_bytes,
            Self::Raw(bytes) => bytes.len(),
        }
    }
}

/// A numpy dtype: its kind from the constructor, its byte order from `BUILD`.
#[derive(Debug)]
pub struct DtypeState<'a> {
    /// numpy's type code without byte order, e.g. `f4`.
    pub kind: &'a str,
    /// `<`, `>`, `|` or `=`; `None` until `BUILD`.
    pub byte_order: Option<&'a str>,
}

/// The global `module.name`, classified.
pub(super) fn global<'a>(module: &'a str, name: &'a str) -> GlobalRef<'a> {
    GlobalRef {
        module,
        name,
        known: Known::from_names(module, name),
    }
}

/// A global's module or name: ASCII (Python identifiers and dots), at most
/// [`MAX_GLOBAL_NAME_BYTES`] long.
pub(super) fn global_name(bytes: &[u8]) -> Result<&str, String> {
    if bytes.len() > MAX_GLOBAL_NAME_BYTES {
        return Err(format!(
            "a global's name is longer than {MAX_GLOBAL_NAME_BYTES} bytes"
        ));
    }
    std::str::from_utf8(bytes)
        .ok()
        .filter(|name| name.is_ascii())
        .ok_or_else(|| "a global's name is not ASCII".to_string())
}

/// A `LONG1` int from its little-endian two's-complement bytes (at most 16).
pub(super) fn long_item(bytes: &[u8]) -> Item<'static> {
    let mut value: i128 = 0;
    for (index, &byte) in bytes.iter().enumerate() {
        value |= i128::from(byte) << (8 * index);
    }
    // Sign-extend from the last byte's top bit.
    let bits = 8 * bytes.len() as u32;
    if (1..128).contains(&bits) && value >> (bits - 1) & 1 == 1 {
        value -= 1i128 << bits;
    }
    match i64::try_from(value) {
        Ok(value) => Item::Int(value),
        Err(_) => Item::BigInt(value),
    }
}

/// Key-value pairs from a flat list (`SETITEMS`, `DICT`).
pub(super) fn pairs(items: Vec<Item<'_>>) -> Result<Vec<(Item<'_>, Item<'_>)>, String> {
    if !items.len().is_multiple_of(2) {
        return Err(format!(
            "an odd number of items ({}): a key without a value",
            items.len()
        ));
    }
    let mut pairs = Vec::with_capacity(items.len() / 2);
    let mut items = items.into_iter();
    while let (Some(key), Some(value)) = (items.next(), items.next()) {
        pairs.push((key, value));
    }
    Ok(pairs)
}

/// A tuple of `items`, refusing nesting deeper than [`MAX_TUPLE_NESTING`].
pub(super) fn make_tuple(items: Vec<Item<'_>>) -> Result<Item<'_>, String> {
    let deepest = items
        .iter()
        .map(|item| match item {
            Item::Tuple(tuple) => tuple.nesting,
            _ => 0,
        })
        .max()
        .unwrap_or(0);
    if deepest >= MAX_TUPLE_NESTING {
        return Err(format!("tuples nest deeper than {MAX_TUPLE_NESTING}"));
    }
    Ok(Item::Tuple(Rc::new(TupleItems {
        items,
        nesting: deepest + 1,
    })))
}

/// `True`/`False` or the ints 1/0 (older numpy and torch) as a bool.
pub fn as_flag(item: &Item<'_>) -> Option<bool> {
    match item {
        Item::Bool(flag) => Some(*flag),
        Item::Int(0) => Some(false),
        Item::Int(1) => Some(true),
        _ => None,
    }
}

/// A non-negative int as a `usize`.
pub(super) fn as_size(item: &Item<'_>) -> Option<usize> {
    match item {
        Item::Int(value) => usize::try_from(*value).ok(),
        _ => None,
    }
}
