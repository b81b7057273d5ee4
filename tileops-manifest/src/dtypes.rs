//! The dtype table: every dtype name a TileOPs manifest may use, its size, and the `tileops::DType`
//! variant that carries it at run time (when tileops has one).
//!
//! This is the one list of dtypes: the structural checks accept exactly these names, the macro
//! maps names to `DType` variants through it, and `tileops`'s own `DType` is tested against it.
//!
//! ```
//! use tileops_manifest::dtypes;
//!
//! let bf16 = dtypes::lookup("bfloat16").unwrap();
//! assert_eq!(bf16.itemsize, 2);
//! assert_eq!(bf16.runtime_variant, Some("BFloat16"));
//! // A manifest may name a dtype that tileops has no runtime type for.
//! assert_eq!(dtypes::lookup("complex64").unwrap().runtime_variant, None);
//! assert!(dtypes::lookup("flaot16").is_none());
//! ```

/// One dtype a manifest may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DTypeInfo {
    /// The PyTorch name (`"float8_e4m3fn"`), as manifests spell it.
    pub name: &'static str,
    /// Bytes of one element (PyTorch's `itemsize`).
    pub itemsize: u8,
    /// The `tileops::DType` variant of this dtype, or `None` when tileops has no kernel dtype for
    /// it (a manifest may still declare it, for TileOPs compatibility).
    pub runtime_variant: Option<&'static str>,
}

const fn dtype(name: &'static str, itemsize: u8, variant: Option<&'static str>) -> DTypeInfo {
    DTypeInfo {
        name,
        itemsize,
        runtime_variant: variant,
    }
}

/// Every dtype name a manifest may use, in the order messages list them.
pub const DTYPES: &[DTypeInfo] = &[
    dtype("float16", 2, Some("Float16")),
    dtype("bfloat16", 2, Some("BFloat16")),
    dtype("float32", 4, Some("Float32")),
    dtype("float64", 8, Some("Float64")),
    dtype("int8", 1, Some("Int8")),
    dtype("int16", 2, Some("Int16")),
    dtype("int32", 4, Some("Int32")),
    dtype("int64", 8, Some("Int64")),
    dtype("uint8", 1, Some("UInt8")),
    dtype("uint32", 4, Some("UInt32")),
    dtype("bool", 1, Some("Bool")),
    dtype("complex64", 8, None),
    dtype("complex128", 16, None),
    dtype("float8_e4m3fn", 1, Some("Float8E4M3Fn")),
    dtype("float8_e5m2", 1, Some("Float8E5M2")),
    dtype("float8_e4m3fnuz", 1, None),
    dtype("float8_e5m2fnuz", 1, None),
];

/// The dtype named `name`, if a manifest may use it.
pub fn lookup(name: &str) -> Option<&'static DTypeInfo> {
    DTYPES.iter().find(|d| d.name == name)
}

/// Every name, comma-separated, for messages ("known dtypes: float16, bfloat16, …").
pub fn known_names() -> String {
    DTYPES.iter().map(|d| d.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_sizes_are_powers_of_two() {
        for (i, d) in DTYPES.iter().enumerate() {
            assert!(
                DTYPES[..i].iter().all(|e| e.name != d.name),
                "{} twice",
                d.name
            );
            assert!(d.itemsize.is_power_of_two(), "{}", d.name);
        }
    }

    #[test]
    fn lookup_is_exact() {
        assert_eq!(lookup("float32").map(|d| d.itemsize), Some(4));
        assert!(lookup("Float32").is_none());
        assert!(lookup("").is_none());
        assert!(known_names().starts_with("float16, bfloat16, "));
    }
}
