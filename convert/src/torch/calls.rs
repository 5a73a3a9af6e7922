//! The calls the machine interprets (`REDUCE`): numpy's `_reconstruct`, `dtype` and
//! `_codecs.encode`, `collections.OrderedDict()`, torch's `_rebuild_tensor_v2` and
//! `_rebuild_parameter`, and `fractions.Fraction`, each with the arguments torch's and numpy's
//! pickles give it; and the refusal for anything else.

use std::mem::size_of;

use super::item::{as_flag, as_size, DtypeState, GlobalRef, Item, Known, Object};
use super::latin1::{latin1_len_bytes, utf8};
use super::machine::{Machine, MAX_NUM_DIMS};
use super::storage_refs::TensorRef;
use super::tensor::StridedLayout;

/// What the allow-list says the pickle may call, in the words of the refusal message.
const ALLOWED_CALLS: &str = "collections.OrderedDict, torch._utils._rebuild_tensor_v2, \
     torch._utils._rebuild_parameter, fractions.Fraction, numpy's _reconstruct and dtype, \
     _codecs.encode";

impl<'a> Machine<'a> {
    /// The refusal for calling, instantiating or setting the state of `item`.
    pub(super) fn refused(&self, item: &Item<'a>, action: &str) -> String {
        match item {
            Item::Global(global) => {
                let why = if matches!(global.name, "bytes")
                    && matches!(global.module, "__builtin__" | "builtins")
                {
                    "CPython pickles empty bytes this way, so the checkpoint holds a \
                     zero-element array, which is not supported"
                        .to_string()
                } else {
                    format!("only {ALLOWED_CALLS} may be called; this checkpoint may be malicious")
                };
                format!(
                    "refused global {}.{}: {action}, and {why}",
                    global.module, global.name
                )
            }
            other => format!(
                "{action} on {}, which is not an allowed global",
                self.describe(other)
            ),
        }
    }

    /// `callable(*arguments)` for the calls torch's and numpy's pickles make.
    pub(super) fn reduce(
        &mut self,
        callable: Item<'a>,
        arguments: Item<'a>,
    ) -> Result<Item<'a>, String> {
        let Item::Global(global) = callable else {
            return Err(self.refused(&callable, "REDUCE would call it"));
        };
        let Some(known) = global.known else {
            return Err(self.refused(&callable, "REDUCE would call it"));
        };
        let Item::Tuple(arguments) = arguments else {
            return Err(format!(
                "REDUCE passes {} to {}.{}, not an argument tuple",
                self.describe(&arguments),
                global.module,
                global.name
            ));
        };
        let unexpected = |machine: &Self| {
            let described: Vec<String> = arguments
                .iter()
                .map(|item| machine.describe(item))
                .collect();
            format!(
                "{}.{}({}) is not a call torch's or numpy's pickles make",
                global.module,
                global.name,
                described.join(", ")
            )
        };
        match known {
            Known::Reconstruct => match &arguments[..] {
                [Item::Global(GlobalRef {
                    known: Some(Known::NdArrayType),
                    ..
                }), Item::Tuple(base_shape), base]
                    if matches!(&base_shape[..], [Item::Int(0)])
                        && matches!(
                            base,
                            Item::Latin1Bytes { utf8: b"b", .. } | Item::Bytes(b"b")
                        ) =>
                {
                    self.new_object(Object::Array(None))
                }
                _ => Err(unexpected(self)),
            },
            Known::NumpyDtype => match &arguments[..] {
                [Item::Str(kind), align, copy]
                    if as_flag(align) == Some(false) && as_flag(copy) == Some(true) =>
                {
                    let dtype = DtypeState {
                        kind: utf8(kind, "the dtype kind")?,
                        byte_order: None,
                    };
                    self.new_object(Object::Dtype(dtype))
                }
                _ => Err(unexpected(self)),
            },
            Known::CodecsEncode => match &arguments[..] {
                [Item::Str(text), Item::Str(b"latin1")] => Ok(Item::Latin1Bytes {
                    utf8: text,
                    len_bytes: latin1_len_bytes(text)?,
                }),
                _ => Err(unexpected(self)),
            },
            Known::NdArrayType => Err(format!(
                "REDUCE calls numpy.ndarray directly; it is only accepted as the first argument \
                 of _reconstruct ({})",
                unexpected(self)
            )),
            Known::OrderedDict => match &arguments[..] {
                [] => self.new_object(Object::Dict {
                    items: Vec::new(),
                    is_ordered: true,
                }),
                _ => Err(unexpected(self)),
            },
            Known::RebuildTensorV2 => self
                .rebuild_tensor(&arguments)
                .map_err(|why| format!("{why}, in {}", unexpected(self))),
            Known::RebuildParameter => match &arguments[..] {
                [Item::Tensor(tensor), requires_grad, hooks]
                    if as_flag(requires_grad).is_some() && self.is_empty_hooks(hooks) =>
                {
                    Ok(Item::Tensor(*tensor))
                }
                _ => Err(unexpected(self)),
            },
            Known::Fraction => {
                let fraction = match &arguments[..] {
                    [Item::Int(numerator), Item::Int(denominator)] => {
                        reduce_fraction(*numerator, *denominator)
                    }
                    [Item::Int(numerator)] => reduce_fraction(*numerator, 1),
                    [Item::Str(text)] => parse_fraction(text),
                    _ => None,
                };
                let (numerator, denominator) = fraction.ok_or_else(|| unexpected(self))?;
                Ok(Item::Fraction(numerator, denominator))
            }
            Known::Storage(_) => Err(format!(
                "REDUCE calls the storage class {}.{}; storages come from persistent ids only",
                global.module, global.name
            )),
        }
    }

    /// `_rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
    /// backward_hooks[, metadata])`, checked against the storage's length.
    fn rebuild_tensor(&mut self, arguments: &[Item<'a>]) -> Result<Item<'a>, String> {
        let (storage, offset, size, stride, requires_grad, hooks, metadata) = match arguments {
            [storage, offset, size, stride, requires_grad, hooks] => {
                (storage, offset, size, stride, requires_grad, hooks, None)
            }
            [storage, offset, size, stride, requires_grad, hooks, metadata] => (
                storage,
                offset,
                size,
                stride,
                requires_grad,
                hooks,
                Some(metadata),
            ),
            _ => return Err(format!("{} arguments instead of 6 or 7", arguments.len())),
        };
        let Item::Storage(view) = storage else {
            return Err(format!("the storage is {}", self.describe(storage)));
        };
        let view = self.storage_views[*view].clone();
        let offset = as_size(offset).ok_or("the storage offset is not a size")?;
        let shape = self.sizes(size).ok_or("the size is not a tuple of sizes")?;
        let stride = self
            .sizes(stride)
            .ok_or("the stride is not a tuple of sizes")?;
        if shape.len() != stride.len() {
            return Err(format!(
                "the size has {} dimensions and the stride {}",
                shape.len(),
                stride.len()
            ));
        }
        if as_flag(requires_grad).is_none() {
            return Err("requires_grad is not a bool".to_string());
        }
        if !self.is_empty_hooks(hooks) {
            return Err("the tensor has backward hooks".to_string());
        }
        if let Some(metadata) = metadata {
            if !self.is_plain_metadata(metadata) {
                return Err(
                    "the tensor's metadata sets a conjugate or negative bit (not supported)"
                        .to_string(),
                );
            }
        }
        let dtype = self.storages[view.storage].dtype;
        // A window of a legacy storage: check against the window, store from the storage.
        let layout = StridedLayout::new(dtype, offset, shape, stride, view.len)?;
        let layout = StridedLayout {
            offset: layout.offset + view.offset,
            ..layout
        };
        self.budget.charge_each(
            1,
            size_of::<TensorRef>() + 2 * layout.shape.len() * size_of::<usize>(),
            "the pickle's tensors",
        )?;
        self.tensors.push(TensorRef {
            storage: view.storage,
            layout,
        });
        Ok(Item::Tensor(self.tensors.len() - 1))
    }

    /// A tuple of non-negative ints, at most [`MAX_NUM_DIMS`] of them.
    fn sizes(&self, item: &Item<'a>) -> Option<Vec<usize>> {
        let Item::Tuple(items) = item else {
            return None;
        };
        if items.len() > MAX_NUM_DIMS {
            return None;
        }
        items.iter().map(as_size).collect()
    }

    /// Whether `item` is `None` or an empty dict (a tensor's `backward_hooks`).
    fn is_empty_hooks(&self, item: &Item<'a>) -> bool {
        match item {
            Item::None => true,
            Item::Object(id) => matches!(
                self.objects.get(*id),
                Some(Object::Dict { items, .. }) if items.is_empty()
            ),
            _ => false,
        }
    }

    /// Whether a tensor's metadata (`{'conj': bool, 'neg': bool}`) sets no bit.
    fn is_plain_metadata(&self, item: &Item<'a>) -> bool {
        match item {
            Item::None => true,
            Item::Object(id) => match self.objects.get(*id) {
                Some(Object::Dict { items, .. }) => {
                    items.iter().all(|(_, value)| as_flag(value) == Some(false))
                }
                _ => false,
            },
            _ => false,
        }
    }
}

/// `numerator / denominator` in lowest terms with a positive denominator, or `None` for a zero
/// denominator or an overflow.
fn reduce_fraction(numerator: i64, denominator: i64) -> Option<(i64, i64)> {
    if denominator == 0 {
        return None;
    }
    let (mut a, mut b) = (numerator.unsigned_abs(), denominator.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    let divisor = i64::try_from(a.max(1)).ok()?;
    let sign = if denominator < 0 { -1 } else { 1 };
    Some((
        (numerator / divisor).checked_mul(sign)?,
        (denominator / divisor).checked_mul(sign)?,
    ))
}

/// `Fraction('n/d')` or `Fraction('n')`, as `str(Fraction)` writes them (older Pythons pickle
/// a fraction as its string).
fn parse_fraction(text: &[u8]) -> Option<(i64, i64)> {
    let text = std::str::from_utf8(text).ok()?;
    let (numerator, denominator) = text.split_once('/').unwrap_or((text, "1"));
    reduce_fraction(numerator.parse().ok()?, denominator.parse().ok()?)
}
