//! What an op is planned for: a shape and a dtype, no data.

use crate::{DType, Error};

/// The shape and dtype of a tensor, without its data.
///
/// Any shape can be written down (the fields are public); its element count and byte size are
/// checked when asked for, so a shape whose size overflows is an error wherever it is used:
/// tensor constructors, op plans, benchmark inputs and the bytes oracle all go through
/// [`TensorSpec::numel`] and [`TensorSpec::size_in_bytes`].
///
/// ```
/// use tileops::{DType, Error, TensorSpec};
/// let x = TensorSpec::new([2048, 4096], DType::BFloat16);
/// assert_eq!(x.rank(), 2);
/// assert_eq!(x.numel()?, 2048 * 4096);
/// assert_eq!(x.size_in_bytes()?, 2048 * 4096 * 2);
///
/// // 2^62 elements fit in a usize, their 2^64 bytes of f32 do not.
/// let huge = TensorSpec::new([1 << 62], DType::Float32);
/// assert_eq!(huge.numel()?, 1 << 62);
/// assert!(matches!(huge.size_in_bytes(), Err(Error::ShapeOverflow { what: "byte size", .. })));
/// # Ok::<(), Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorSpec {
    /// Extent of each dimension, outermost first.
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: DType,
}

impl TensorSpec {
    /// A spec of the given shape and dtype.
    pub fn new(shape: impl Into<Vec<usize>>, dtype: DType) -> Self {
        TensorSpec {
            shape: shape.into(),
            dtype,
        }
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements (1 for a scalar of rank 0); [`Error::ShapeOverflow`] when the product
    /// of the extents overflows `usize` (a zero extent makes it 0 whatever the others are).
    pub fn numel(&self) -> Result<usize, Error> {
        if self.shape.contains(&0) {
            return Ok(0);
        }
        self.shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .ok_or_else(|| self.overflow("element count"))
    }

    /// Bytes of the whole tensor, densely packed; [`Error::ShapeOverflow`] when the element count
    /// or the byte size overflows `usize`.
    pub fn size_in_bytes(&self) -> Result<usize, Error> {
        self.numel()?
            .checked_mul(self.dtype.size_in_bytes())
            .ok_or_else(|| self.overflow("byte size"))
    }

    fn overflow(&self, what: &'static str) -> Error {
        Error::ShapeOverflow {
            shape: self.shape.clone(),
            dtype: self.dtype,
            what,
        }
    }
}

impl std::fmt::Display for TensorSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{:?}", self.dtype, self.shape)
    }
}
