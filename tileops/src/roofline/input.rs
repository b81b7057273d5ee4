//! How a formula reads an op's tensor inputs: only their shape, rank and element size.

use std::rc::Rc;
use std::sync::Arc;

use crate::TensorSpec;

use super::error::{EvalError, EvalResult};
use super::typed::Dims;
use super::value::{Value, int_from_usize};

/// A field that can stand for a tensor input of a formula: it may expose a [`TensorSpec`].
///
/// Implemented for `TensorSpec` itself, `Option<T>` (an optional input; `None` when absent),
/// references, `Box`, `Rc` and `Arc`. Implement it for your own tensor type to use that type
/// as an op field.
///
/// ```
/// use tileops::roofline::RooflineInput;
/// use tileops::{DType, TensorSpec};
///
/// struct Tensor { spec: TensorSpec }
/// impl RooflineInput for Tensor {
///     fn tensor_spec(&self) -> Option<&TensorSpec> { Some(&self.spec) }
/// }
///
/// let x = Tensor { spec: TensorSpec::new([4, 8], DType::Float16) };
/// assert_eq!(x.tensor_spec().map(TensorSpec::rank), Some(2));
/// assert!(None::<Tensor>.tensor_spec().is_none());
/// ```
pub trait RooflineInput {
    /// The input's shape and dtype, or `None` for an absent optional input.
    fn tensor_spec(&self) -> Option<&TensorSpec>;
}

impl RooflineInput for TensorSpec {
    fn tensor_spec(&self) -> Option<&TensorSpec> {
        Some(self)
    }
}

impl<T: RooflineInput> RooflineInput for Option<T> {
    fn tensor_spec(&self) -> Option<&TensorSpec> {
        self.as_ref().and_then(RooflineInput::tensor_spec)
    }
}

impl<T: RooflineInput + ?Sized> RooflineInput for &T {
    fn tensor_spec(&self) -> Option<&TensorSpec> {
        (**self).tensor_spec()
    }
}

impl<T: RooflineInput + ?Sized> RooflineInput for Box<T> {
    fn tensor_spec(&self) -> Option<&TensorSpec> {
        (**self).tensor_spec()
    }
}

impl<T: RooflineInput + ?Sized> RooflineInput for Rc<T> {
    fn tensor_spec(&self) -> Option<&TensorSpec> {
        (**self).tensor_spec()
    }
}

impl<T: RooflineInput + ?Sized> RooflineInput for Arc<T> {
    fn tensor_spec(&self) -> Option<&TensorSpec> {
        (**self).tensor_spec()
    }
}

/// A tensor input as a formula sees it: `x.shape`, `x.ndim`, `x is None`, and the dims of a
/// fixed-rank input. `name` arguments are the manifest's input names, used in error messages.
///
/// ```
/// use tileops::roofline::{Value, __rt};
/// use tileops::{DType, TensorSpec};
///
/// let x = TensorSpec::new([2048, 4096], DType::BFloat16);
/// let input = __rt::input(&x);
/// assert_eq!(input.shape("x")?.to_string(), "(2048, 4096)");
/// assert_eq!(input.elem_bytes("x")?, Value::Int(2));
/// assert_eq!(input.fixed_dims("x", 2)?, vec![Value::Int(2048), Value::Int(4096)]);
/// assert!(input.fixed_dims("x", 3).is_err());
///
/// let absent: Option<TensorSpec> = None;
/// assert!(__rt::input(&absent).is_none());
/// # Ok::<(), tileops::roofline::EvalError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputRef<'a> {
    spec: Option<&'a TensorSpec>,
}

impl<'a> InputRef<'a> {
    /// An input that is present (`Some`) or absent (`None`).
    #[inline]
    pub fn new(spec: Option<&'a TensorSpec>) -> Self {
        InputRef { spec }
    }

    /// The input's spec, if present.
    #[inline]
    pub fn spec(&self) -> Option<&'a TensorSpec> {
        self.spec
    }

    /// `x is None`: whether an optional input is absent.
    #[inline]
    pub fn is_none(&self) -> bool {
        self.spec.is_none()
    }

    #[inline]
    fn present(&self, name: &str, attribute: &str) -> EvalResult<&'a TensorSpec> {
        self.spec.ok_or_else(|| {
            EvalError::attribute_error(format!(
                "'NoneType' object has no attribute '{attribute}' (optional input `{name}` is None)"
            ))
        })
    }

    /// `x.shape`, a tuple of ints.
    #[inline]
    pub fn shape(&self, name: &str) -> EvalResult {
        Ok(Value::from_shape(&self.present(name, "shape")?.shape))
    }

    /// `x.ndim`, an int.
    #[inline]
    pub fn ndim(&self, name: &str) -> EvalResult {
        Ok(Value::Int(int_from_usize(
            self.present(name, "ndim")?.rank(),
        )))
    }

    /// `x.shape` as a borrowed view, for formulas whose types the macro knows: the same dims
    /// (and the same error for an absent input) as [`shape`](Self::shape), with no tuple built.
    #[inline]
    pub fn dims(&self, name: &str) -> EvalResult<Dims<'a>> {
        Ok(Dims::new(&self.present(name, "shape")?.shape))
    }

    /// `x.ndim` as an int, with the error of [`ndim`](Self::ndim).
    #[inline]
    pub fn rank(&self, name: &str) -> EvalResult<i128> {
        Ok(int_from_usize(self.present(name, "ndim")?.rank()))
    }

    /// Bytes of one element as an int, with the error of [`elem_bytes`](Self::elem_bytes).
    #[inline]
    pub fn elem_bytes_int(&self, name: &str) -> EvalResult<i128> {
        Ok(int_from_usize(
            self.present(name, "dtype")?.dtype.size_in_bytes(),
        ))
    }

    /// The dims of an input the manifest declares with a fixed rank (`shape: "[M, K]"`), in
    /// order; an error if the input is absent or its rank differs.
    pub fn fixed_dims(&self, name: &str, rank: usize) -> EvalResult<Vec<Value>> {
        let spec = self.present(name, "shape")?;
        if spec.rank() != rank {
            return Err(EvalError::value_error(format!(
                "input `{name}` has shape {:?} (rank {}), but the manifest declares rank {rank}",
                spec.shape,
                spec.rank()
            )));
        }
        Ok(spec.shape.iter().map(|&d| Value::from(d)).collect())
    }

    /// Bytes of one element of the input's dtype, an int.
    #[inline]
    pub fn elem_bytes(&self, name: &str) -> EvalResult {
        Ok(Value::from(
            self.present(name, "dtype")?.dtype.size_in_bytes(),
        ))
    }
}

/// Wraps an op field that stands for a tensor input.
#[inline]
pub fn input<I: RooflineInput + ?Sized>(value: &I) -> InputRef<'_> {
    InputRef::new(value.tensor_spec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn present_inputs_expose_shape_rank_and_element_size() {
        let x = TensorSpec::new([2, 3, 4], DType::Float32);
        let boxed: Box<TensorSpec> = Box::new(x.clone());
        let some = Some(x.clone());
        let by_ref = &x;
        let shared = Arc::new(x.clone());
        let counted = Rc::new(x.clone());
        let some_ref = Some(&x);
        let inputs = [
            input(&x),
            input(&boxed),
            input(&some),
            input(&by_ref),
            input(&shared),
            input(&counted),
            input(&some_ref),
        ];
        for input in inputs {
            assert!(!input.is_none());
            assert_eq!(input.shape("x").unwrap().to_string(), "(2, 3, 4)");
            assert_eq!(input.ndim("x"), Ok(Value::Int(3)));
            assert_eq!(input.elem_bytes("x"), Ok(Value::Int(4)));
            assert_eq!(
                input.fixed_dims("x", 3),
                Ok(vec![Value::Int(2), Value::Int(3), Value::Int(4)])
            );
            assert_eq!(input.spec(), Some(&x));
        }
    }

    #[test]
    fn scalars_have_an_empty_shape() {
        let x = TensorSpec::new([], DType::BFloat16);
        assert_eq!(input(&x).shape("x").unwrap().to_string(), "()");
        assert_eq!(input(&x).ndim("x"), Ok(Value::Int(0)));
        assert_eq!(input(&x).fixed_dims("x", 0), Ok(vec![]));
        assert_eq!(input(&x).elem_bytes("x"), Ok(Value::Int(2)));
    }

    #[test]
    fn absent_inputs_are_none_and_have_no_attributes() {
        let absent: Option<TensorSpec> = None;
        let absent = input(&absent);
        assert!(absent.is_none());
        assert_eq!(
            absent.shape("bias").unwrap_err().message,
            "AttributeError: 'NoneType' object has no attribute 'shape' (optional input `bias` is None)"
        );
        assert!(absent.ndim("bias").unwrap_err().message.contains("'ndim'"));
        assert!(
            absent
                .elem_bytes("bias")
                .unwrap_err()
                .message
                .contains("`bias`")
        );
        assert!(absent.fixed_dims("bias", 1).is_err());
        assert!(InputRef::new(None).is_none());
    }

    #[test]
    fn a_rank_mismatch_names_the_input_and_both_ranks() {
        let x = TensorSpec::new([2, 3], DType::Int8);
        assert_eq!(
            input(&x).fixed_dims("x", 3).unwrap_err().message,
            "ValueError: input `x` has shape [2, 3] (rank 2), but the manifest declares rank 3"
        );
    }
}
