//! [`Tensor`]: a checkpoint's tensor as C-order little-endian bytes, borrowed from the file when
//! it is a contiguous run of its storage and gathered by its strides otherwise; [`DType`]: its
//! element type.

use std::borrow::Cow;

use crate::error::ConvertError;

/// A tensor's element type, named after torch's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// `torch.float64` (`DoubleStorage`).
    F64,
    /// `torch.float32` (`FloatStorage`).
    F32,
    /// `torch.float16` (`HalfStorage`).
    F16,
    /// `torch.bfloat16` (`BFloat16Storage`).
    BF16,
    /// `torch.int64` (`LongStorage`).
    I64,
    /// `torch.int32` (`IntStorage`).
    I32,
    /// `torch.int16` (`ShortStorage`).
    I16,
    /// `torch.int8` (`CharStorage`).
    I8,
    /// `torch.uint8` (`ByteStorage`, and `UntypedStorage`'s bytes).
    U8,
    /// `torch.bool` (`BoolStorage`), one byte per element.
    Bool,
    /// `torch.complex64` (`ComplexFloatStorage`).
    Complex64,
    /// `torch.complex128` (`ComplexDoubleStorage`).
    Complex128,
}

impl DType {
    /// The element type of torch's storage class `name` (e.g. `FloatStorage`), if it is one.
    pub(crate) fn from_storage_class(name: &str) -> Option<Self> {
        Some(match name {
            "DoubleStorage" => Self::F64,
            "FloatStorage" => Self::F32,
            "HalfStorage" => Self::F16,
            "BFloat16Storage" => Self::BF16,
            "LongStorage" => Self::I64,
            "IntStorage" => Self::I32,
            "ShortStorage" => Self::I16,
            "CharStorage" => Self::I8,
            "ByteStorage" | "UntypedStorage" => Self::U8,
            "BoolStorage" => Self::Bool,
            "ComplexFloatStorage" => Self::Complex64,
            "ComplexDoubleStorage" => Self::Complex128,
            _ => return None,
        })
    }

    /// Bytes per element. Realtime-safe.
    pub fn size_bytes(self) -> usize {
        match self {
            Self::F64 | Self::I64 | Self::Complex64 => 8,
            Self::F32 | Self::I32 => 4,
            Self::F16 | Self::BF16 | Self::I16 => 2,
            Self::I8 | Self::U8 | Self::Bool => 1,
            Self::Complex128 => 16,
        }
    }

    /// torch's name, e.g. `float16`. Realtime-safe.
    pub fn torch_name(self) -> &'static str {
        match self {
            Self::F64 => "float64",
            Self::F32 => "float32",
            Self::F16 => "float16",
            Self::BF16 => "bfloat16",
            Self::I64 => "int64",
            Self::I32 => "int32",
            Self::I16 => "int16",
            Self::I8 => "int8",
            Self::U8 => "uint8",
            Self::Bool => "bool",
            Self::Complex64 => "complex64",
            Self::Complex128 => "complex128",
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.torch_name())
    }
}

/// A tensor from a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor<'a> {
    /// Element type.
    pub dtype: DType,
    /// Dimensions, outermost first; empty for a 0-d (scalar) tensor.
    pub shape: Vec<usize>,
    /// `shape.iter().product() * dtype.size_bytes()` bytes, elements in C (row-major) order,
    /// little-endian: borrowed from the checkpoint when the tensor is a contiguous run of its
    /// storage (what `state_dict()` holds), gathered by its strides into a copy otherwise (a
    /// transposed or sliced view).
    pub data: Cow<'a, [u8]>,
}

impl Tensor<'_> {
    /// Number of elements (1 for a scalar). Realtime-safe.
    pub fn num_elements(&self) -> usize {
        self.shape.iter().product()
    }

    /// The values as `f32`, converting float16 and bfloat16 exactly.
    ///
    /// Fails with [`ConvertError::Layout`] naming the dtype for anything but float32, float16
    /// and bfloat16. Not realtime-safe: allocates.
    pub fn to_f32(&self) -> Result<Vec<f32>, ConvertError> {
        let words = |size: usize| self.data.chunks_exact(size);
        Ok(match self.dtype {
            DType::F32 => words(4)
                .map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                .collect(),
            DType::F16 => words(2)
                .map(|w| half::f16::from_le_bytes([w[0], w[1]]).to_f32())
                .collect(),
            DType::BF16 => words(2)
                .map(|w| half::bf16::from_le_bytes([w[0], w[1]]).to_f32())
                .collect(),
            other => {
                return Err(ConvertError::Layout(format!(
                    "a tensor of shape {:?} has dtype {other}; only float32, float16 and \
                     bfloat16 convert to float32",
                    self.shape
                )))
            }
        })
    }

    /// The same tensor owning its bytes. Not realtime-safe: copies borrowed data.
    pub fn into_owned(self) -> Tensor<'static> {
        Tensor {
            dtype: self.dtype,
            shape: self.shape,
            data: Cow::Owned(self.data.into_owned()),
        }
    }
}

/// Where a tensor's elements lie in its storage, in elements (torch's `set_(storage,
/// storage_offset, size, stride)`), checked against the storage's length when it was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StridedLayout {
    /// Element type (the storage's).
    pub dtype: DType,
    /// Offset of element `[0, …, 0]`.
    pub offset: usize,
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Elements between neighbours along each dimension.
    pub stride: Vec<usize>,
}

impl StridedLayout {
    /// Checks that every element lies in a storage of `storage_len` elements and that the byte
    /// counts fit a `usize`; returns the layout. `shape` and `stride` have equal lengths.
    pub fn new(
        dtype: DType,
        offset: usize,
        shape: Vec<usize>,
        stride: Vec<usize>,
        storage_len: usize,
    ) -> Result<Self, String> {
        let overflow = || format!("tensor of shape {shape:?} and stride {stride:?}: overflow");
        let num_elements = shape
            .iter()
            .try_fold(1usize, |product, &size| product.checked_mul(size))
            .filter(|count| count.checked_mul(dtype.size_bytes()).is_some())
            .ok_or_else(overflow)?;
        if num_elements > 0 {
            // The last element lies at offset + sum((size - 1) * stride).
            let last = shape
                .iter()
                .zip(&stride)
                .try_fold(offset, |at, (&size, &step)| {
                    at.checked_add((size - 1).checked_mul(step)?)
                })
                .ok_or_else(overflow)?;
            if last >= storage_len {
                return Err(format!(
                    "tensor of shape {shape:?}, stride {stride:?} and storage offset {offset} \
                     reaches element {last} of a storage of {storage_len} elements"
                ));
            }
        } else if offset > storage_len {
            return Err(format!(
                "empty tensor's storage offset {offset} lies past its storage of {storage_len} \
                 elements"
            ));
        }
        Ok(Self {
            dtype,
            offset,
            shape,
            stride,
        })
    }

    /// Number of elements.
    pub fn num_elements(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the elements are one run in C order (dimensions of size 1 may have any stride).
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1usize;
        for (&size, &step) in self.shape.iter().zip(&self.stride).rev() {
            if size != 1 && step != expected {
                return false;
            }
            expected *= size;
        }
        true
    }

    /// Bytes [`materialise`](Self::materialise) copies: none for an empty tensor or a
    /// contiguous one over a borrowed storage, else the tensor's size.
    pub fn copy_bytes(&self, is_storage_borrowed: bool) -> u64 {
        let is_borrowed = self.num_elements() == 0 || (is_storage_borrowed && self.is_contiguous());
        if is_borrowed {
            0
        } else {
            // `new` checked that this product fits a usize.
            (self.num_elements() * self.dtype.size_bytes()) as u64
        }
    }

    /// The tensor over `storage` (its elements' bytes): a borrowed slice when contiguous and
    /// `storage` is borrowed, else a copy gathered by the strides. A gathered copy may not be
    /// larger than the storage (a stride-0 `expand()` could otherwise ask for any size).
    pub fn materialise<'a>(&self, storage: &Cow<'a, [u8]>) -> Result<Tensor<'a>, String> {
        let size = self.dtype.size_bytes();
        let len_bytes = self.num_elements() * size;
        let data = if self.num_elements() == 0 {
            Cow::Borrowed(&[][..])
        } else if self.is_contiguous() {
            let start = self.offset * size;
            let range = start..start + len_bytes;
            match storage {
                Cow::Borrowed(bytes) => Cow::Borrowed(bytes.get(range).ok_or_else(short)?),
                Cow::Owned(bytes) => Cow::Owned(bytes.get(range).ok_or_else(short)?.to_vec()),
            }
        } else if len_bytes > storage.len() {
            return Err(format!(
                "tensor of shape {:?} and stride {:?} is {len_bytes} bytes, more than its \
                 {}-byte storage (an expanded view); not supported",
                self.shape,
                self.stride,
                storage.len()
            ));
        } else {
            Cow::Owned(self.gather(storage, len_bytes)?)
        };
        Ok(Tensor {
            dtype: self.dtype,
            shape: self.shape.clone(),
            data,
        })
    }

    /// Copies the elements in C order, a run at a time along the last dimension.
    fn gather(&self, storage: &[u8], len_bytes: usize) -> Result<Vec<u8>, String> {
        let size = self.dtype.size_bytes();
        let mut out = Vec::with_capacity(len_bytes);
        let Some((&inner_len, outer_shape)) = self.shape.split_last() else {
            let start = self.offset * size;
            out.extend_from_slice(storage.get(start..start + size).ok_or_else(short)?);
            return Ok(out);
        };
        let inner_stride = self.stride[self.stride.len() - 1];
        let mut index = vec![0usize; outer_shape.len()];
        loop {
            let base = self.offset
                + index
                    .iter()
                    .zip(&self.stride)
                    .map(|(&i, &step)| i * step)
                    .sum::<usize>();
            if inner_stride == 1 {
                let start = base * size;
                let run = storage
                    .get(start..start + inner_len * size)
                    .ok_or_else(short)?;
                out.extend_from_slice(run);
            } else {
                for i in 0..inner_len {
                    let start = (base + i * inner_stride) * size;
                    out.extend_from_slice(storage.get(start..start + size).ok_or_else(short)?);
                }
            }
            // Advance the odometer over the outer dimensions, last fastest.
            let mut dim = outer_shape.len();
            loop {
                if dim == 0 {
                    return Ok(out);
                }
                dim -= 1;
                index[dim] += 1;
                if index[dim] < outer_shape[dim] {
                    break;
                }
                index[dim] = 0;
            }
        }
    }
}

/// The error for a read past a storage that [`StridedLayout::new`] checked (never expected).
fn short() -> String {
    "tensor data lies past the end of its storage".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(offset: usize, shape: &[usize], stride: &[usize], len: usize) -> StridedLayout {
        StridedLayout::new(DType::F32, offset, shape.to_vec(), stride.to_vec(), len).unwrap()
    }

    fn f32_storage(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn contiguous_tensors_borrow_and_views_gather() {
        let values: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let bytes = f32_storage(&values);
        let storage = Cow::Borrowed(&bytes[..]);
        // The whole [3, 4] matrix, and its tail row with an offset: borrowed.
        let whole = layout(0, &[3, 4], &[4, 1], 12)
            .materialise(&storage)
            .unwrap();
        assert!(matches!(whole.data, Cow::Borrowed(_)));
        assert_eq!(whole.to_f32().unwrap(), values);
        let tail = layout(8, &[1, 4], &[99, 1], 12)
            .materialise(&storage)
            .unwrap();
        assert!(matches!(tail.data, Cow::Borrowed(_)));
        assert_eq!(tail.to_f32().unwrap(), [8.0, 9.0, 10.0, 11.0]);
        // The transpose: [4, 3] with strides (1, 4).
        let transposed = layout(0, &[4, 3], &[1, 4], 12)
            .materialise(&storage)
            .unwrap();
        assert!(matches!(transposed.data, Cow::Owned(_)));
        assert_eq!(
            transposed.to_f32().unwrap(),
            [0.0, 4.0, 8.0, 1.0, 5.0, 9.0, 2.0, 6.0, 10.0, 3.0, 7.0, 11.0]
        );
        // A window [1:3, 1:3] of the matrix: offset 5, runs of 2.
        let window = layout(5, &[2, 2], &[4, 1], 12)
            .materialise(&storage)
            .unwrap();
        assert_eq!(window.to_f32().unwrap(), [5.0, 6.0, 9.0, 10.0]);
        // A scalar view of element 7, and an empty tensor.
        let scalar = layout(7, &[], &[], 12).materialise(&storage).unwrap();
        assert_eq!(scalar.to_f32().unwrap(), [7.0]);
        let empty = layout(12, &[0, 3], &[3, 1], 12)
            .materialise(&storage)
            .unwrap();
        assert!(empty.data.is_empty() && empty.num_elements() == 0);
        // Owned storages give owned copies.
        let owned: Cow<'_, [u8]> = Cow::Owned(bytes.clone());
        let whole = layout(0, &[12], &[1], 12).materialise(&owned).unwrap();
        assert!(matches!(whole.data, Cow::Owned(_)));
    }

    #[test]
    fn out_of_range_and_overflowing_layouts_are_refused() {
        let new = |offset, shape: &[usize], stride: &[usize], len| {
            StridedLayout::new(DType::F32, offset, shape.to_vec(), stride.to_vec(), len)
        };
        let error = new(0, &[3, 4], &[4, 1], 11).unwrap_err();
        assert!(
            error.contains("reaches element 11 of a storage of 11"),
            "{error}"
        );
        assert!(new(1, &[12], &[1], 12).is_err());
        assert!(new(0, &[2, 2], &[usize::MAX, 1], 100)
            .unwrap_err()
            .contains("overflow"));
        assert!(new(0, &[usize::MAX, 2], &[1, 1], 100)
            .unwrap_err()
            .contains("overflow"));
        assert!(new(usize::MAX, &[2], &[1], 100).is_err());
        assert!(new(13, &[0], &[1], 12)
            .unwrap_err()
            .contains("past its storage"));
        // An expanded view (stride 0) bigger than its storage is refused when gathered.
        let bytes = f32_storage(&[1.0]);
        let expanded = new(0, &[4], &[0], 1).unwrap();
        let error = expanded
            .materialise(&Cow::Borrowed(&bytes[..]))
            .unwrap_err();
        assert!(error.contains("expanded view"), "{error}");
    }

    #[test]
    fn half_precision_converts_exactly() {
        let f16_bytes: Vec<u8> = [0x3c00u16, 0xc000, 0x7bff, 0x0001]
            .iter()
            .flat_map(|b| b.to_le_bytes())
            .collect();
        let tensor = Tensor {
            dtype: DType::F16,
            shape: vec![4],
            data: Cow::Owned(f16_bytes),
        };
        assert_eq!(
            tensor.to_f32().unwrap(),
            [1.0, -2.0, 65504.0, 5.960_464_5e-8]
        );
        let bf16 = Tensor {
            dtype: DType::BF16,
            shape: vec![1],
            data: Cow::Owned(vec![0xc0, 0x3f]),
        };
        assert_eq!(bf16.to_f32().unwrap(), [1.5]);
        let int = Tensor {
            dtype: DType::I64,
            shape: vec![],
            data: Cow::Owned(vec![0; 8]),
        };
        let error = int.to_f32().unwrap_err().to_string();
        assert!(error.contains("dtype int64"), "{error}");
    }
}
