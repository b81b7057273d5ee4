//! The attribute's arguments: `#[roofline_op("softmax", manifest = "rel/path", register = false)]`.

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::{LitBool, LitStr, Token};

/// What the attribute says.
#[derive(Debug)]
pub struct Args {
    /// The manifest entry's name.
    pub op: String,
    /// Where the op name was written: compile errors point here.
    pub op_span: Span,
    /// `manifest = "..."`: a file or directory relative to the crate.
    pub manifest: Option<String>,
    /// `register = false` leaves the op out of the registry.
    pub register: bool,
    /// `typed = false` generates every formula on the value runtime, as before the typed pass:
    /// the reference the differential tests compare the typed code against. Not for op code.
    pub typed: bool,
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let op: LitStr = input.parse().map_err(|e| {
            syn::Error::new(
                e.span(),
                "expected the manifest op name first: #[roofline_op(\"softmax\")]",
            )
        })?;
        let mut args = Args {
            op: op.value(),
            op_span: op.span(),
            manifest: None,
            register: true,
            typed: true,
        };
        let (mut seen_manifest, mut seen_register, mut seen_typed) = (false, false, false);
        while !input.is_empty() {
            input.parse::<Token![,]>()?;
            if input.is_empty() {
                break;
            }
            let key: syn::Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            match key.to_string().as_str() {
                "manifest" if !seen_manifest => {
                    seen_manifest = true;
                    args.manifest = Some(input.parse::<LitStr>()?.value());
                }
                "register" if !seen_register => {
                    seen_register = true;
                    args.register = input.parse::<LitBool>()?.value;
                }
                "typed" if !seen_typed => {
                    seen_typed = true;
                    args.typed = input.parse::<LitBool>()?.value;
                }
                "manifest" | "register" | "typed" => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!("`{key}` is given twice"),
                    ));
                }
                _ => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!(
                            "unknown argument `{key}`; expected `manifest = \"rel/path\"` or `register = false`"
                        ),
                    ));
                }
            }
        }
        if args.op.is_empty() {
            return Err(syn::Error::new(op.span(), "the op name must not be empty"));
        }
        Ok(args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(tokens: &str) -> syn::Result<Args> {
        syn::parse_str(tokens)
    }

    #[test]
    fn name_alone() {
        let args = parse(r#""softmax""#).unwrap();
        assert_eq!(args.op, "softmax");
        assert!(args.register);
        assert!(args.typed);
        assert!(args.manifest.is_none());
    }

    #[test]
    fn every_option() {
        let args =
            parse(r#""SoftmaxFwdOp", manifest = "x/reduction.yaml", register = false,"#).unwrap();
        assert_eq!(args.manifest.as_deref(), Some("x/reduction.yaml"));
        assert!(!args.register);
        assert!(args.typed);
        let args = parse(r#""a", typed = false"#).unwrap();
        assert!(!args.typed);
        assert!(parse(r#""a", typed = false, typed = false"#).is_err());
    }

    #[test]
    fn mistakes_are_errors() {
        assert!(
            parse("softmax")
                .unwrap_err()
                .to_string()
                .contains("op name first")
        );
        assert!(
            parse(r#""a", manifets = "x""#)
                .unwrap_err()
                .to_string()
                .contains("unknown argument `manifets`")
        );
        assert!(
            parse(r#""a", register = false, register = true"#)
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
        assert!(parse(r#""""#).is_err());
    }
}
