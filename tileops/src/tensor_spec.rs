//! What an op is planned for: a shape and a dtype, no data.

use crate::DType;

/// The shape and dtype of a tensor, without its data.
///
/// ```
/// use tileops::{DType, TensorSpec};
/// let x = TensorSpec::new([2048, 4096], DType::BFloat16);
/// assert_eq!(x.rank(), 2);
/// assert_eq!(x.numel(), 2048 * 4096);
/// assert_eq!(x.size_in_bytes(), 2048 * 4096 * 2);
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

    /// Number of elements (1 for a scalar of rank 0).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Bytes of the whole tensor, densely packed.
    pub fn size_in_bytes(&self) -> usize {
        self.numel() * self.dtype.size_in_bytes()
    }
}

impl std::fmt::Display for TensorSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{:?}", self.dtype, self.shape)
    }
}
