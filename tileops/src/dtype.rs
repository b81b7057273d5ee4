//! Runtime element types, named as TileOPs and PyTorch name them.

use std::fmt;
use std::str::FromStr;

/// The element type of a tensor.
///
/// Names follow PyTorch (`"bfloat16".parse::<DType>()`), so manifest files written for TileOPs
/// parse unchanged.
///
/// ```
/// use tileops::DType;
/// let dtype: DType = "bfloat16".parse().unwrap();
/// assert_eq!(dtype, DType::BFloat16);
/// assert_eq!(dtype.size_in_bytes(), 2);
/// assert_eq!(dtype.to_string(), "bfloat16");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// `float32`: IEEE 754 binary32.
    Float32,
    /// `float16`: IEEE 754 binary16 (`half::f16`).
    Float16,
    /// `bfloat16`: the upper half of a binary32, 8 exponent and 7 mantissa bits (`half::bf16`).
    BFloat16,
    /// `float64`: IEEE 754 binary64.
    Float64,
    /// `int8`: signed 8-bit integer.
    Int8,
    /// `int16`: signed 16-bit integer.
    Int16,
    /// `int32`: signed 32-bit integer.
    Int32,
    /// `int64`: signed 64-bit integer.
    Int64,
    /// `uint8`: unsigned 8-bit integer.
    UInt8,
    /// `uint32`: unsigned 32-bit integer (candle's index type: RoPE positions).
    UInt32,
    /// `bool`: one byte, 0 or 1.
    Bool,
    /// `float8_e4m3fn`: fp8 with 4 exponent and 3 mantissa bits, finite only (no infinities; one
    /// NaN pattern per sign), max 448.
    Float8E4M3Fn,
    /// `float8_e5m2`: fp8 with 5 exponent and 2 mantissa bits, IEEE-like (infinities and NaNs),
    /// max 57344.
    Float8E5M2,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 13] = [
        DType::Float32,
        DType::Float16,
        DType::BFloat16,
        DType::Float64,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt8,
        DType::UInt32,
        DType::Bool,
        DType::Float8E4M3Fn,
        DType::Float8E5M2,
    ];

    /// Bytes of one element (`itemsize` in PyTorch).
    pub const fn size_in_bytes(self) -> usize {
        match self {
            DType::Float64 | DType::Int64 => 8,
            DType::Float32 | DType::Int32 | DType::UInt32 => 4,
            DType::Float16 | DType::BFloat16 | DType::Int16 => 2,
            DType::Int8 | DType::UInt8 | DType::Bool | DType::Float8E4M3Fn | DType::Float8E5M2 => 1,
        }
    }

    /// The canonical name (`"float8_e4m3fn"`).
    pub const fn name(self) -> &'static str {
        match self {
            DType::Float32 => "float32",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float64 => "float64",
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::UInt8 => "uint8",
            DType::UInt32 => "uint32",
            DType::Bool => "bool",
            DType::Float8E4M3Fn => "float8_e4m3fn",
            DType::Float8E5M2 => "float8_e5m2",
        }
    }

    /// Whether the type is a floating-point type (fp8 included).
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            DType::Float32
                | DType::Float16
                | DType::BFloat16
                | DType::Float64
                | DType::Float8E4M3Fn
                | DType::Float8E5M2
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A dtype name that tileops does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype `{name}`; known dtypes: {}", known_names())]
pub struct UnknownDType {
    /// The name that failed to parse.
    pub name: String,
}

fn known_names() -> String {
    DType::ALL
        .iter()
        .map(|d| d.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for DType {
    type Err = UnknownDType;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        DType::ALL
            .into_iter()
            .find(|dtype| dtype.name() == name)
            .ok_or_else(|| UnknownDType {
                name: name.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips() {
        for dtype in DType::ALL {
            assert_eq!(dtype.name().parse::<DType>(), Ok(dtype));
        }
    }

    #[test]
    fn unknown_names_are_errors_that_list_the_known_ones() {
        let err = "float128".parse::<DType>().unwrap_err();
        assert!(err.to_string().contains("float8_e4m3fn"), "{err}");
    }

    /// The manifest's dtype table is the one list: every runtime dtype is in it under its name,
    /// variant and size, and every table entry with a runtime variant parses to that variant.
    #[test]
    fn dtypes_agree_with_the_manifest_table() {
        use tileops_manifest::dtypes::{DTYPES, lookup};
        for dtype in DType::ALL {
            let info = lookup(dtype.name())
                .unwrap_or_else(|| panic!("{dtype} is missing from the manifest's dtype table"));
            assert_eq!(info.runtime_variant, Some(format!("{dtype:?}").as_str()));
            assert_eq!(usize::from(info.itemsize), dtype.size_in_bytes(), "{dtype}");
        }
        for info in DTYPES {
            match info.runtime_variant {
                Some(variant) => {
                    let dtype: DType = info.name.parse().expect("a runtime dtype parses");
                    assert_eq!(format!("{dtype:?}"), variant);
                }
                None => assert!(info.name.parse::<DType>().is_err(), "{}", info.name),
            }
        }
    }

    #[test]
    fn sizes_match_pytorch_itemsize() {
        assert_eq!(DType::Float8E4M3Fn.size_in_bytes(), 1);
        assert_eq!(DType::BFloat16.size_in_bytes(), 2);
        assert_eq!(DType::Int64.size_in_bytes(), 8);
    }
}
