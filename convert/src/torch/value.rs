//! [`Value`]: the object a checkpoint pickles, as plain data, with tensors replaced by their
//! index in the checkpoint's tensor list; and the conversion from the machine's items.

use std::collections::{HashMap, HashSet};
use std::mem::size_of;

use super::item::{Item, Object};
use super::latin1::{decode_latin1, utf8};
use super::machine::Machine;

/// Deepest a value tree may nest (a demucs package nests 4 deep; a cycle made with the memo
/// hits this limit).
const MAX_VALUE_DEPTH: usize = 100;

/// A value from a checkpoint's pickle.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `None`.
    None,
    /// `True` or `False`.
    Bool(bool),
    /// An `int` (ints beyond 64 bits are refused).
    Int(i64),
    /// A `float`.
    Float(f64),
    /// A `str`.
    Str(String),
    /// A `bytes` object.
    Bytes(Vec<u8>),
    /// A `tuple`.
    Tuple(Vec<Value>),
    /// A `list`.
    List(Vec<Value>),
    /// A `dict` or `collections.OrderedDict`, in insertion order; keys are unique.
    Dict(Vec<(Value, Value)>),
    /// A `fractions.Fraction` in lowest terms, `denominator > 0` (demucs' `segment`).
    Fraction {
        /// Numerator.
        numerator: i64,
        /// Denominator.
        denominator: i64,
    },
    /// A class or function the pickle names as a value (demucs' `klass`), never imported or
    /// called.
    Global {
        /// Module, e.g. `demucs.htdemucs`.
        module: String,
        /// Name, e.g. `HTDemucs`.
        name: String,
    },
    /// A tensor: its index in the checkpoint's tensor list (a tensor the pickle shares, such
    /// as tied weights, appears under one index).
    Tensor(usize),
}

impl Value {
    /// The value for the `str` key `key` when this is a dict. Realtime-safe.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_dict()?
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, value)| value)
    }

    /// The items when this is a dict. Realtime-safe.
    pub fn as_dict(&self) -> Option<&[(Value, Value)]> {
        match self {
            Value::Dict(items) => Some(items),
            _ => None,
        }
    }

    /// The items when this is a list or a tuple. Realtime-safe.
    pub fn as_items(&self) -> Option<&[Value]> {
        match self {
            Value::List(items) | Value::Tuple(items) => Some(items),
            _ => None,
        }
    }

    /// The text when this is a `str`. Realtime-safe.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(text) => Some(text),
            _ => None,
        }
    }

    /// The value when this is an `int`. Realtime-safe.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(value) => Some(*value),
            _ => None,
        }
    }

    /// The value when this is a `float`, an `int` or a fraction. Realtime-safe.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(value) => Some(*value),
            Value::Int(value) => Some(*value as f64),
            Value::Fraction {
                numerator,
                denominator,
            } => Some(*numerator as f64 / *denominator as f64),
            _ => None,
        }
    }

    /// The value when this is a `bool`. Realtime-safe.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(value) => Some(*value),
            _ => None,
        }
    }

    /// What this is, in a few words, for error messages. Not realtime-safe: allocates.
    pub fn describe(&self) -> String {
        match self {
            Value::None => "None".to_string(),
            Value::Bool(value) => format!("the bool {}", if *value { "True" } else { "False" }),
            Value::Int(value) => format!("the int {value}"),
            Value::Float(value) => format!("the float {value}"),
            Value::Str(text) if text.len() <= 40 => format!("the str {text:?}"),
            Value::Str(text) => format!("a str of {} bytes", text.len()),
            Value::Bytes(bytes) => format!("a bytes object of {} bytes", bytes.len()),
            Value::Tuple(items) => format!("a tuple of {} items", items.len()),
            Value::List(items) => format!("a list of {} items", items.len()),
            Value::Dict(items) => format!("a dict of {} items", items.len()),
            Value::Fraction {
                numerator,
                denominator,
            } => format!("the fraction {numerator}/{denominator}"),
            Value::Global { module, name } => format!("the global {module}.{name}"),
            Value::Tensor(index) => format!("tensor {index}"),
        }
    }
}

/// Where a tree's tensor comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TensorSource {
    /// Index into the machine's tensors (a storage view).
    Torch(usize),
    /// Index of a numpy array object.
    Numpy(usize),
}

/// Converts a machine's items into [`Value`]s, numbering the tensors it meets; every value and
/// every copy of a string is charged to the machine's [`ReadBudget`](super::ReadBudget), which
/// bounds the tree a pickle that shares containers and strings through its memo unfolds into.
pub struct TreeBuilder<'m, 'a> {
    /// The machine that made the items.
    machine: &'m Machine<'a>,
    /// The tensors met, in order.
    pub tensors: Vec<TensorSource>,
    /// Index into `tensors` by source.
    tensor_index: HashMap<TensorSource, usize>,
}

impl<'m, 'a> TreeBuilder<'m, 'a> {
    /// A builder for `machine`'s items, charging the machine's budget.
    pub fn new(machine: &'m Machine<'a>) -> Self {
        Self {
            machine,
            tensors: Vec::new(),
            tensor_index: HashMap::new(),
        }
    }

    /// `item` as a [`Value`]. Refuses ints beyond 64 bits, strings that are not UTF-8, dict keys
    /// other than `str`, `int`, `bool` and `None` or given twice, numpy arrays without their
    /// state, numpy dtypes and bare storages as values, nesting deeper than
    /// [`MAX_VALUE_DEPTH`] (or a cycle), and a tree larger than the read's budget allows.
    pub fn convert(&mut self, item: &Item<'a>) -> Result<Value, String> {
        self.convert_at(item, 0)
    }

    fn convert_at(&mut self, item: &Item<'a>, depth: usize) -> Result<Value, String> {
        if depth > MAX_VALUE_DEPTH {
            return Err(format!(
                "values nest deeper than {MAX_VALUE_DEPTH} (or a container contains itself)"
            ));
        }
        self.charge(size_of::<Value>() + heap_bytes(item))?;
        Ok(match item {
            Item::None => Value::None,
            Item::Bool(value) => Value::Bool(*value),
            Item::Int(value) => Value::Int(*value),
            Item::BigInt(value) => return Err(format!("the int {value} does not fit 64 bits")),
            Item::Float(value) => Value::Float(*value),
            Item::Str(text) => Value::Str(utf8(text, "a str")?.to_string()),
            Item::Bytes(bytes) => Value::Bytes(bytes.to_vec()),
            Item::Latin1Bytes { utf8, len_bytes } => Value::Bytes(decode_latin1(utf8, *len_bytes)),
            Item::Tuple(items) => Value::Tuple(self.convert_all(&items.items, depth)?),
            Item::Global(global) => Value::Global {
                module: global.module.to_string(),
                name: global.name.to_string(),
            },
            Item::Fraction(numerator, denominator) => Value::Fraction {
                numerator: *numerator,
                denominator: *denominator,
            },
            Item::Tensor(index) => Value::Tensor(self.tensor(TensorSource::Torch(*index))),
            Item::Storage(_) => {
                return Err("a bare storage (not a tensor) is not supported".to_string())
            }
            Item::Object(id) => match self.machine.objects.get(*id) {
                Some(Object::List(items)) => Value::List(self.convert_all(items, depth)?),
                Some(Object::Dict { items, .. }) => self.dict(items, depth)?,
                Some(Object::Array(Some(_))) => {
                    Value::Tensor(self.tensor(TensorSource::Numpy(*id)))
                }
                Some(Object::Array(None)) => {
                    return Err("a numpy array never received its state (no BUILD)".to_string())
                }
                Some(Object::Dtype(_)) | None => {
                    return Err(format!(
                        "{} is not supported as a value",
                        self.machine.describe(item)
                    ))
                }
            },
        })
    }

    fn convert_all(&mut self, items: &[Item<'a>], depth: usize) -> Result<Vec<Value>, String> {
        items
            .iter()
            .map(|item| self.convert_at(item, depth + 1))
            .collect()
    }

    /// A dict, refusing unhashable-looking and duplicate keys.
    fn dict(&mut self, items: &[(Item<'a>, Item<'a>)], depth: usize) -> Result<Value, String> {
        self.charge(items.len() * size_of::<KeyIdentity<'a>>() * 2)?;
        let mut seen = HashSet::with_capacity(items.len());
        let mut converted = Vec::with_capacity(items.len());
        for (key, value) in items {
            let identity = match key {
                // Python's True == 1 and False == 0 as keys.
                Item::Bool(flag) => KeyIdentity::Int(i64::from(*flag)),
                Item::Int(number) => KeyIdentity::Int(*number),
                Item::Str(text) => KeyIdentity::Str(text),
                Item::None => KeyIdentity::None,
                other => {
                    return Err(format!(
                        "a dict key is {}, not a str, int, bool or None",
                        self.machine.describe(other)
                    ))
                }
            };
            let key_value = self.convert_at(key, depth + 1)?;
            if !seen.insert(identity) {
                return Err(format!(
                    "a dict holds the key {} twice",
                    key_value.describe()
                ));
            }
            let value = self.convert_at(value, depth + 1)?;
            converted.push((key_value, value));
        }
        Ok(Value::Dict(converted))
    }

    /// Charges `bytes` of the tree to the read's budget.
    fn charge(&self, bytes: usize) -> Result<(), String> {
        self.machine
            .budget()
            .charge(bytes as u64, "the pickle's value tree (containers and strings the memo shares are copied each time they are used)")
    }

    /// The tree's index for the tensor from `source`.
    fn tensor(&mut self, source: TensorSource) -> usize {
        *self.tensor_index.entry(source).or_insert_with(|| {
            self.tensors.push(source);
            self.tensors.len() - 1
        })
    }
}

/// A dict key as Python compares it, borrowed from the pickle.
#[derive(PartialEq, Eq, Hash)]
enum KeyIdentity<'a> {
    /// An int or a bool.
    Int(i64),
    /// A str's bytes.
    Str(&'a [u8]),
    /// `None`.
    None,
}

/// The bytes `item` copies onto the heap when converted (a string's text, a global's names).
fn heap_bytes(item: &Item<'_>) -> usize {
    match item {
        Item::Str(text) => text.len(),
        Item::Bytes(bytes) => bytes.len(),
        Item::Latin1Bytes { len_bytes, .. } => *len_bytes,
        Item::Global(global) => global.module.len() + global.name.len(),
        _ => 0,
    }
}
