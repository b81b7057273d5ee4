//! The manifest model: TileOPs-compatible family files, checked structurally.
//!
//! A family file maps op names to entries. This pass turns the YAML tree into typed entries and
//! reports every structural problem (missing or mistyped fields, mixed roofline modes, unknown
//! dtypes, workload keys that name nothing) with its place in the file. It knows nothing about the
//! formula language: formulas are carried as located strings for the next pass.

use crate::diagnostic::{Diagnostic, SourceFile};
use crate::dtypes;
use crate::yaml::{self, Kind, Node};
use std::collections::BTreeMap;
use std::rc::Rc;

pub mod names;
pub mod param_type;

const ENTRY_FIELDS: &[&str] = &[
    "family",
    "ref_api",
    "status",
    "torch_compile_fullgraph",
    "signature",
    "workloads",
    "roofline",
    "source",
];
const SIGNATURE_FIELDS: &[&str] = &[
    "inputs",
    "outputs",
    "params",
    "static_dims",
    "shape_rules",
    "dtype_combos",
];
const TENSOR_FIELDS: &[&str] = &[
    "dtype",
    "shape",
    "constraints",
    "layout",
    "optional",
    "mutated",
    "note",
];
const PARAM_FIELDS: &[&str] = &["type", "default", "kw_only"];
const ROOFLINE_FIELDS: &[&str] = &["vars", "flops", "bytes", "func"];
const SOURCE_FIELDS: &[&str] = &[
    "kernel",
    "kernel_map",
    "op",
    "test",
    "bench",
    "bench_manifest_driven",
];

/// Whether codegen may run for an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The op exists and matches the manifest.
    Implemented,
    /// Declared ahead of its implementation; codegen refuses it.
    SpecOnly,
}

/// A formula string and where its text starts in the file.
#[derive(Debug, Clone)]
pub struct FormulaSource {
    /// `vars.M`, `flops` or `bytes`.
    pub field: String,
    /// The formula text.
    pub text: String,
    /// Byte offset of the first character of `text` in the file.
    pub offset: usize,
    /// Where the text is, for locating an offset in it: escapes, folding, aliases.
    pub origin: yaml::Origin,
}

/// One `vars` entry: the variable's name and its formula.
#[derive(Debug, Clone)]
pub struct VarDecl {
    /// The variable.
    pub name: String,
    /// Byte offset of the key.
    pub name_offset: usize,
    /// Its formula.
    pub formula: FormulaSource,
}

/// The roofline of an entry.
#[derive(Debug, Clone)]
pub enum RooflineSpec {
    /// `vars?` + `flops` + `bytes`.
    Inline {
        /// The `vars` entries in declaration order; empty when the roofline has no `vars`.
        vars: Vec<VarDecl>,
        /// The `flops` formula: floating-point operations of one call.
        flops: FormulaSource,
        /// The `bytes` formula: bytes of memory traffic of one call.
        bytes: FormulaSource,
    },
    /// `func: "path::to::function"`.
    Func {
        /// The `func` string as written, a Rust path not yet parsed.
        path: String,
        /// Byte offset in the file where the string's content starts (past an opening quote).
        offset: usize,
    },
}

/// A tensor of the signature.
#[derive(Debug, Clone)]
pub struct TensorDecl {
    /// Its name.
    pub name: String,
    /// The dtype expression.
    pub dtype: String,
    /// Byte offset of the dtype expression's text.
    pub dtype_offset: usize,
    /// The entries of a fixed-rank shape (`shape: "[M, K]"` or `shape: [M, K]`), in order;
    /// `None` when the tensor declares no shape or one of no fixed rank (`same_as(x)`, `[..., n]`).
    pub shape: Option<Vec<ShapeDim>>,
    /// `optional: true`.
    pub optional: bool,
}

/// One entry of a fixed-rank shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeDim {
    /// The dim name the entry binds, when it is an identifier (`M`); `None` for an entry that
    /// only holds its position (`2 * N`, `4`).
    pub name: Option<String>,
    /// The entry as written.
    pub text: String,
    /// Byte offset of the entry in the file.
    pub offset: usize,
}

impl TensorDecl {
    /// The dim names its fixed-rank shape binds, with their positions and byte offsets, in order
    /// (a name written twice appears twice).
    pub fn dims(&self) -> impl Iterator<Item = (usize, &str, usize)> {
        self.shape
            .iter()
            .flatten()
            .enumerate()
            .filter_map(|(index, d)| d.name.as_deref().map(|n| (index, n, d.offset)))
    }

    /// The shape as the registry shows it (`[M, 2 * N]`), when it has a fixed rank.
    pub fn shape_text(&self) -> Option<String> {
        let dims = self.shape.as_ref()?;
        Some(format!(
            "[{}]",
            dims.iter()
                .map(|d| d.text.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

/// A param of the signature.
#[derive(Debug, Clone)]
pub struct ParamDecl {
    /// Its name.
    pub name: String,
    /// Byte offset of the name.
    pub offset: usize,
    /// `default:`, when given.
    pub default: Option<Node>,
    /// `type:`, when given (`int | list[int] | None`): which kinds of value the param may hold.
    pub ty: Option<String>,
}

/// One workload row.
#[derive(Debug, Clone)]
pub struct WorkloadRow {
    /// `label`.
    pub label: String,
    /// `dtypes`.
    pub dtypes: Vec<String>,
    /// `<input>_shape` keys by input name.
    pub shapes: Vec<(String, Vec<usize>)>,
    /// Every other key: params.
    pub params: Vec<(String, Node)>,
    /// `bench_skip_reason`.
    pub bench_skip_reason: Option<String>,
}

/// A checked manifest entry.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The op name (the mapping key).
    pub name: String,
    /// The file it came from.
    pub file: Rc<SourceFile>,
    /// Byte offset of the key.
    pub offset: usize,
    /// `family`.
    pub family: String,
    /// `status`.
    pub status: Status,
    /// `signature.inputs`, in order.
    pub inputs: Vec<TensorDecl>,
    /// `signature.outputs`, in order.
    pub outputs: Vec<TensorDecl>,
    /// `signature.params`, in order.
    pub params: Vec<ParamDecl>,
    /// `workloads`.
    pub workloads: Vec<WorkloadRow>,
    /// `roofline`, when it is well-formed.
    pub roofline: Option<RooflineSpec>,
}

/// A parsed family file: its entries by name, in file order.
#[derive(Debug)]
pub struct FamilyFile {
    /// The file.
    pub file: Rc<SourceFile>,
    /// Entry names, their key offsets and their YAML.
    pub entries: Vec<(String, usize, Node)>,
    /// Problems at file level (syntax, top level not a mapping).
    pub errors: Vec<Diagnostic>,
}

/// Parse a family file into its entries (each entry is checked later, on demand).
pub fn parse_family_file(file: Rc<SourceFile>) -> FamilyFile {
    let mut errors = Vec::new();
    let mut entries = Vec::new();
    match yaml::parse(&file.text) {
        Err(err) => errors.push(Diagnostic::yaml(&file, &err)),
        Ok(root) => match &root.kind {
            Kind::Map(map) => {
                for (key, value) in map {
                    match key.as_str() {
                        Some(name) => entries.push((name.to_owned(), key.offset, value.clone())),
                        None => errors.push(Diagnostic::at(
                            &file,
                            key.offset,
                            key.len,
                            format!("op names must be strings, found {}", key.type_name()),
                        )),
                    }
                }
            }
            Kind::Null => {}
            _ => errors.push(Diagnostic::at(
                &file,
                root.offset,
                root.len,
                format!(
                    "a family file maps op names to entries; found {}",
                    root.type_name()
                ),
            )),
        },
    }
    FamilyFile {
        file,
        entries,
        errors,
    }
}

/// Checks one entry's structure; every problem found is pushed to `errors`.
struct EntryChecker<'a> {
    file: &'a Rc<SourceFile>,
    errors: &'a mut Vec<Diagnostic>,
    op: &'a str,
}

impl EntryChecker<'_> {
    fn error(&mut self, node: &Node, message: String) {
        self.errors.push(Diagnostic::at_node(
            self.file,
            node,
            format!("{}: {message}", self.op),
        ));
    }

    /// The entries of a mapping, with keys that are not strings or not `allowed` reported.
    fn mapping<'n>(
        &mut self,
        node: &'n Node,
        what: &str,
        allowed: Option<&[&str]>,
    ) -> Vec<(&'n str, &'n Node, &'n Node)> {
        let Some(map) = node.as_map() else {
            self.error(
                node,
                format!("{what} must be a mapping, found {}", node.type_name()),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for (key, value) in map {
            let Some(name) = key.as_str() else {
                self.error(
                    key,
                    format!("keys of {what} must be strings, found {}", key.type_name()),
                );
                continue;
            };
            if let Some(allowed) = allowed
                && !allowed.contains(&name)
            {
                // A typo is the usual cause (`worklaods`): the nearest field first.
                let hint = crate::formula::check::nearest(name, allowed.iter().copied())
                    .map(|n| format!(" (did you mean `{n}`?)"))
                    .unwrap_or_default();
                self.error(
                    key,
                    format!(
                        "unknown field `{name}` in {what}{hint}; expected one of: {}",
                        allowed.join(", ")
                    ),
                );
                continue;
            }
            out.push((name, key, value));
        }
        out
    }

    /// Reports `node` unless it is a boolean.
    fn expect_bool(&mut self, node: &Node, what: &str) {
        if !matches!(node.kind, Kind::Bool(_)) {
            self.error(
                node,
                format!("{what} must be true or false, found {}", node.type_name()),
            );
        }
    }

    /// Reports `node` unless it is a list of non-empty strings.
    fn expect_strings(&mut self, node: &Node, what: &str) {
        match node.as_seq() {
            Some(items) => {
                for item in items {
                    self.string(item, &format!("each of {what}"));
                }
            }
            None => self.error(
                node,
                format!(
                    "{what} must be a list of strings, found {}",
                    node.type_name()
                ),
            ),
        }
    }

    fn string(&mut self, node: &Node, what: &str) -> Option<String> {
        match node.as_str() {
            Some(s) if !s.trim().is_empty() => Some(s.to_owned()),
            Some(_) => {
                self.error(node, format!("{what} must be a non-empty string"));
                None
            }
            None => {
                self.error(
                    node,
                    format!("{what} must be a string, found {}", node.type_name()),
                );
                None
            }
        }
    }

    fn formula(&mut self, node: &Node, field: String) -> Option<FormulaSource> {
        let text = self.string(node, &format!("roofline `{field}`"))?;
        Some(FormulaSource {
            field,
            text,
            offset: node.content_offset(&self.file.text),
            origin: node.origin(),
        })
    }

    /// Reports `name` (at `key`) unless it may become Rust code; see [`names::name_problem`].
    fn name(&mut self, key: &Node, name: &str, what: &str, field: bool) -> bool {
        match names::name_problem(name, field) {
            None => true,
            Some(problem) => {
                self.errors.push(Diagnostic::at(
                    self.file,
                    key.offset,
                    key.len.max(1),
                    format!("{}: {what} `{name}` {problem}", self.op),
                ));
                false
            }
        }
    }

    /// `inputs` become struct fields and formula names, so their names are checked; `outputs`
    /// only ever appear as strings.
    fn tensors(&mut self, node: Option<&Node>, what: &str, inputs: bool) -> Vec<TensorDecl> {
        let Some(node) = node else { return Vec::new() };
        let mut out = Vec::new();
        for (name, key, value) in self.mapping(node, what, None) {
            // A bad name is reported and the tensor kept, so its uses do not cascade into
            // "unknown name" errors; nothing is generated for an entry with errors.
            if inputs {
                self.name(key, name, "input", true);
            }
            let fields = self.mapping(value, &format!("{what}.{name}"), Some(TENSOR_FIELDS));
            let mut decl = TensorDecl {
                name: name.to_owned(),
                dtype: String::new(),
                dtype_offset: key.offset,
                shape: None,
                optional: false,
            };
            let mut has_dtype = false;
            for (field, _, v) in fields {
                match field {
                    "dtype" => {
                        if let Some(d) = self.string(v, &format!("{what}.{name}.dtype")) {
                            decl.dtype = d;
                            decl.dtype_offset = v.content_offset(&self.file.text);
                            has_dtype = true;
                        }
                    }
                    "shape" => decl.shape = self.shape(v, &format!("{what}.{name}.shape")),
                    "mutated" => self.expect_bool(v, &format!("{what}.{name}.mutated")),
                    "layout" | "note" => {
                        self.string(v, &format!("{what}.{name}.{field}"));
                    }
                    // TileOPs: a mapping whose keys are dims of the declared shape.
                    "constraints" if v.as_map().is_none() => self.error(
                        v,
                        format!(
                            "{what}.{name}.constraints must be a mapping (dim -> constraint), found {}",
                            v.type_name()
                        ),
                    ),
                    "optional" => match v.kind {
                        Kind::Bool(b) => decl.optional = b,
                        _ => self.error(
                            v,
                            format!(
                                "{what}.{name}.optional must be true or false, found {}",
                                v.type_name()
                            ),
                        ),
                    },
                    _ => {}
                }
            }
            if !has_dtype && value.as_map().is_some() {
                self.error(key, format!("{what}.{name} has no `dtype`"));
            }
            out.push(decl);
        }
        out
    }

    /// A shape: the string `"[M, K]"` or the YAML sequence `[M, K]`, as TileOPs accepts both.
    ///
    /// Each entry that is an identifier is a dim name, bound from the input's shape (a roofline
    /// variable); any other entry (`2 * N`, `4`) only holds its position, as in TileOPs, which
    /// takes the identifier-shaped entries as the shape's symbols. A shape that is not a bracketed
    /// list (`same_as(x)`) or has a `...` entry has no fixed rank and binds nothing.
    fn shape(&mut self, node: &Node, what: &str) -> Option<Vec<ShapeDim>> {
        let entries: Vec<(String, usize)> = match &node.kind {
            Kind::Seq(items) => {
                let mut entries = Vec::new();
                for item in items {
                    let text = match &item.kind {
                        Kind::Str(s) => s.clone(),
                        Kind::Int(i) => i.to_string(),
                        _ => {
                            self.error(
                                item,
                                format!(
                                    "each entry of {what} must be a dim name or an expression, found {}",
                                    item.type_name()
                                ),
                            );
                            return None;
                        }
                    };
                    // A quoted entry starts one past its quote; trim like the string form does.
                    let start = item.content_offset(&self.file.text);
                    let lead = text.len() - text.trim_start().len();
                    entries.push((text.trim().to_owned(), start + lead));
                }
                entries
            }
            Kind::Str(text) => {
                let start = node.content_offset(&self.file.text);
                let trimmed = text.trim();
                let inner = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']'));
                let Some(inner) = inner else {
                    // `same_as(x)`: the shape of another tensor, as in TileOPs; nothing to bind.
                    let same_as = trimmed
                        .strip_prefix("same_as(")
                        .and_then(|r| r.strip_suffix(')'))
                        .is_some_and(|t| names::is_identifier(t.trim()));
                    if !same_as {
                        self.error(
                            node,
                            format!("{what} must be \"[M, K]\", [M, K] or \"same_as(x)\", found {text:?}"),
                        );
                    }
                    return None;
                };
                if inner.trim().is_empty() {
                    return Some(Vec::new());
                }
                let inner_start = start + text.find('[').map_or(0, |i| i + 1);
                let mut entries = Vec::new();
                let mut cursor = 0;
                for part in inner.split(',') {
                    let entry = part.trim();
                    let lead = part.len() - part.trim_start().len();
                    entries.push((entry.to_owned(), inner_start + cursor + lead));
                    cursor += part.len() + 1;
                }
                entries
            }
            _ => {
                self.error(
                    node,
                    format!(
                        "{what} must be a string (\"[M, K]\") or a sequence ([M, K]), found {}",
                        node.type_name()
                    ),
                );
                return None;
            }
        };
        if entries.iter().any(|(e, _)| e == "...") {
            return None;
        }
        let mut dims = Vec::new();
        for (text, at) in entries {
            let name =
                names::is_identifier(&text) && !names::PYTHON_KEYWORDS.contains(&text.as_str());
            if !name && crate::formula::parse(&text).is_err() {
                self.errors.push(Diagnostic::at(
                    self.file,
                    at,
                    text.len().max(1),
                    format!(
                        "{}: {what}: `{text}` is neither a dim name (an identifier) nor an expression",
                        self.op
                    ),
                ));
                // Reported; the entry keeps its place so that the other dims still bind and
                // their uses do not cascade into "unknown name" errors.
            }
            dims.push(ShapeDim {
                name: name.then(|| text.clone()),
                text,
                offset: at,
            });
        }
        Some(dims)
    }

    /// A dtype expression: `a | b`, `same_as(x)`, `promote_int_to_float(x)`.
    fn dtype_expr(&mut self, decl: &TensorDecl, known_tensors: &[String], what: &str) {
        let mut cursor = 0;
        for raw in decl.dtype.split('|') {
            let part = raw.trim();
            let at = decl.dtype_offset + cursor + raw.find(part).unwrap_or(0);
            cursor += raw.len() + 1;
            let reference = part
                .strip_prefix("same_as(")
                .or_else(|| part.strip_prefix("promote_int_to_float("))
                .and_then(|rest| rest.strip_suffix(')'));
            let ok = match reference {
                Some(name) => {
                    known_tensors.iter().any(|t| t == name.trim()) && name.trim() != decl.name
                }
                None => dtypes::lookup(part).is_some(),
            };
            if !ok {
                let message = match reference {
                    Some(name) if name.trim() == decl.name => format!(
                        "{what}.{}.dtype `{part}` refers to the tensor itself, which defines nothing; name another tensor or list the dtypes",
                        decl.name
                    ),
                    Some(name) => format!(
                        "{what}.{}.dtype refers to `{name}`, which is not a tensor of this signature",
                        decl.name
                    ),
                    None => format!(
                        "{what}.{}.dtype: unknown dtype `{part}`; known dtypes: {}",
                        decl.name,
                        dtypes::known_names()
                    ),
                };
                self.errors.push(Diagnostic::at(
                    self.file,
                    at,
                    part.len(),
                    format!("{}: {message}", self.op),
                ));
            }
        }
    }

    fn params(&mut self, node: Option<&Node>) -> Vec<ParamDecl> {
        let Some(node) = node else { return Vec::new() };
        let mut out = Vec::new();
        for (name, key, value) in self.mapping(node, "signature.params", None) {
            self.name(key, name, "param", true);
            let mut decl = ParamDecl {
                name: name.to_owned(),
                offset: key.offset,
                default: None,
                ty: None,
            };
            for (field, _, v) in self.mapping(
                value,
                &format!("signature.params.{name}"),
                Some(PARAM_FIELDS),
            ) {
                match field {
                    "default" => {
                        self.integers_fit(v, &format!("signature.params.{name}.default"));
                        decl.default = Some(v.clone());
                    }
                    "type" => {
                        let what = format!("signature.params.{name}.type");
                        if let Some(text) = self.string(v, &what) {
                            self.param_type(v, &text, &what);
                            decl.ty = Some(text);
                        }
                    }
                    _ => self.expect_bool(v, &format!("signature.params.{name}.kw_only")),
                }
            }
            out.push(decl);
        }
        out
    }

    /// A param `type:` checked against TileOPs's type grammar ([`param_type`]).
    fn param_type(&mut self, node: &Node, text: &str, what: &str) {
        let start = node.content_offset(&self.file.text);
        for (span, message) in param_type::check(text) {
            self.errors.push(Diagnostic::at(
                self.file,
                start + span.start,
                span.len().max(1),
                format!("{}: {what} `{text}`: {message}", self.op),
            ));
        }
    }

    /// Reports every integer in `node` (a scalar or nested sequences) that does not fit the
    /// workload range, `i64::MIN..=u64::MAX`. YAML integers past it parse as floats or as 128-bit
    /// ints; both would silently become a different number than the one written.
    fn integers_fit(&mut self, node: &Node, what: &str) -> bool {
        let too_big = match &node.kind {
            Kind::Seq(items) => {
                let mut ok = true;
                for item in items {
                    ok &= self.integers_fit(item, what);
                }
                return ok;
            }
            Kind::Int(i) => *i > i128::from(u64::MAX) || *i < i128::from(i64::MIN),
            Kind::Float(_) => integer_literal(self.scalar_text(node)),
            _ => false,
        };
        if too_big {
            self.error(
                node,
                format!(
                    "{what}: the integer `{}` is beyond the range of workload integers ({} to {})",
                    self.scalar_text(node).trim(),
                    i64::MIN,
                    u64::MAX
                ),
            );
        }
        !too_big
    }

    /// The source text of a scalar node (empty when serde-saphyr gave it no length).
    fn scalar_text(&self, node: &Node) -> &str {
        self.file
            .text
            .get(node.offset..node.offset + node.len)
            .unwrap_or_default()
    }

    fn workloads(
        &mut self,
        node: Option<&Node>,
        inputs: &[TensorDecl],
        params: &[ParamDecl],
    ) -> Vec<WorkloadRow> {
        let Some(node) = node else { return Vec::new() };
        let Some(rows) = node.as_seq() else {
            self.error(
                node,
                format!(
                    "workloads must be a sequence of rows, found {}",
                    node.type_name()
                ),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut seen_cases: BTreeMap<(String, String), ()> = BTreeMap::new();
        for row in rows {
            let entries = self.mapping(row, "a workload row", None);
            let mut parsed = WorkloadRow {
                label: String::new(),
                dtypes: Vec::new(),
                shapes: Vec::new(),
                params: Vec::new(),
                bench_skip_reason: None,
            };
            let (mut has_label, mut has_dtypes) = (false, false);
            for (key_name, key, value) in entries {
                match key_name {
                    "label" => {
                        if let Some(l) = self.string(value, "a workload `label`") {
                            parsed.label = l;
                            has_label = true;
                        }
                    }
                    "dtypes" => {
                        has_dtypes = true;
                        match value.as_seq() {
                            Some(items) if !items.is_empty() => {
                                for item in items {
                                    match item.as_str() {
                                        Some(d) if dtypes::lookup(d).is_some() => parsed.dtypes.push(d.to_owned()),
                                        Some(d) => self.error(item, format!("unknown dtype `{d}` in workload dtypes; known dtypes: {}", dtypes::known_names())),
                                        None => self.error(item, format!("workload dtypes must be dtype names, found {}", item.type_name())),
                                    }
                                }
                            }
                            _ => self.error(
                                value,
                                "workload `dtypes` must be a non-empty list of dtype names"
                                    .to_owned(),
                            ),
                        }
                    }
                    "bench_skip_reason" => {
                        parsed.bench_skip_reason = self.string(value, "`bench_skip_reason`")
                    }
                    other => {
                        if let Some(input) = other
                            .strip_suffix("_shape")
                            .filter(|i| inputs.iter().any(|t| t.name == *i))
                        {
                            if let Some(shape) = self.shape_list(value, other) {
                                parsed.shapes.push((input.to_owned(), shape));
                            }
                        } else if params.iter().any(|p| p.name == other) {
                            if self.integers_fit(value, &format!("workload `{other}`")) {
                                parsed.params.push((other.to_owned(), value.clone()));
                            }
                        } else {
                            let inputs: Vec<String> = inputs
                                .iter()
                                .map(|t| format!("`{}_shape`", t.name))
                                .collect();
                            let params: Vec<String> =
                                params.iter().map(|p| format!("`{}`", p.name)).collect();
                            self.error(key, format!(
                                "workload key `{other}` is neither an input's shape nor a param; expected `label`, `dtypes`, `bench_skip_reason`{}{}",
                                if inputs.is_empty() { String::new() } else { format!(", {}", inputs.join(", ")) },
                                if params.is_empty() { String::new() } else { format!(", {}", params.join(", ")) },
                            ));
                        }
                    }
                }
            }
            if row.as_map().is_some() {
                if !has_label {
                    self.error(row, "a workload row needs a `label`".to_owned());
                }
                if !has_dtypes {
                    self.error(row, "a workload row needs `dtypes`".to_owned());
                }
            }
            for dtype in &parsed.dtypes {
                if has_label
                    && seen_cases
                        .insert((parsed.label.clone(), dtype.clone()), ())
                        .is_some()
                {
                    self.error(
                        row,
                        format!("workload case `{}-{dtype}` is declared twice", parsed.label),
                    );
                }
            }
            out.push(parsed);
        }
        out
    }

    fn shape_list(&mut self, node: &Node, what: &str) -> Option<Vec<usize>> {
        let Some(items) = node.as_seq() else {
            self.error(
                node,
                format!(
                    "`{what}` must be a list of non-negative integers, found {}",
                    node.type_name()
                ),
            );
            return None;
        };
        if !self.integers_fit(node, &format!("`{what}`")) {
            return None;
        }
        let mut shape = Vec::new();
        for item in items {
            match item.kind {
                Kind::Int(i) if i >= 0 && usize::try_from(i).is_ok() => shape.push(i as usize),
                _ => {
                    self.error(
                        item,
                        format!("`{what}` must be a list of non-negative integers"),
                    );
                    return None;
                }
            }
        }
        Some(shape)
    }

    fn roofline(&mut self, node: &Node) -> Option<RooflineSpec> {
        let fields = self.mapping(node, "roofline", Some(ROOFLINE_FIELDS));
        let get = |name: &str| {
            fields
                .iter()
                .find(|(n, _, _)| *n == name)
                .map(|(_, k, v)| (*k, *v))
        };
        let (vars, flops, bytes, func) = (get("vars"), get("flops"), get("bytes"), get("func"));
        if let Some((func_key, func_value)) = func {
            let mut mixed = false;
            for (other, present) in [("vars", vars), ("flops", flops), ("bytes", bytes)] {
                if let Some((key, _)) = present {
                    mixed = true;
                    self.error(key, format!("roofline `{other}` cannot be used together with `func` (func mode takes the whole formula)"));
                }
            }
            let _ = func_key;
            let path = self.string(func_value, "roofline `func`")?;
            return (!mixed).then_some(RooflineSpec::Func {
                path,
                offset: func_value.content_offset(&self.file.text),
            });
        }
        node.as_map()?;
        let mut complete = true;
        for (name, present) in [("flops", flops), ("bytes", bytes)] {
            if present.is_none() {
                self.error(
                    node,
                    format!("inline roofline needs `{name}` (or use `func`)"),
                );
                complete = false;
            }
        }
        let mut var_decls = Vec::new();
        if let Some((_, vars_node)) = vars {
            for (name, key, value) in self.mapping(vars_node, "roofline.vars", None) {
                // Reported, and the var kept: its formula is still checked (all problems at
                // once), and nothing is generated for an entry with errors.
                self.name(key, name, "`vars` key", false);
                match self.formula(value, format!("vars.{name}")) {
                    Some(formula) => var_decls.push(VarDecl {
                        name: name.to_owned(),
                        name_offset: key.offset,
                        formula,
                    }),
                    None => complete = false,
                }
            }
        }
        let flops = flops.and_then(|(_, v)| self.formula(v, "flops".to_owned()));
        let bytes = bytes.and_then(|(_, v)| self.formula(v, "bytes".to_owned()));
        match (flops, bytes) {
            (Some(flops), Some(bytes)) if complete => Some(RooflineSpec::Inline {
                vars: var_decls,
                flops,
                bytes,
            }),
            _ => None,
        }
    }
}

/// Whether a plain scalar's text is a YAML integer (decimal, `0x`, `0o`), sign and `_` allowed.
fn integer_literal(text: &str) -> bool {
    let t = text.trim();
    let t = t.strip_prefix(['-', '+']).unwrap_or(t);
    let (digits, radix) = if let Some(hex) = t.strip_prefix("0x") {
        (hex, 16)
    } else if let Some(oct) = t.strip_prefix("0o") {
        (oct, 8)
    } else {
        (t, 10)
    };
    !digits.is_empty()
        && digits.chars().all(|c| c == '_' || c.is_digit(radix))
        && digits.chars().any(|c| c.is_digit(radix))
}

/// Check one entry's structure. Returns the entry (as far as it could be read) and every problem.
pub fn check_entry(
    file: &Rc<SourceFile>,
    name: &str,
    offset: usize,
    node: &Node,
) -> (Option<Entry>, Vec<Diagnostic>) {
    let mut errors = Vec::new();
    let mut checker = EntryChecker {
        file,
        errors: &mut errors,
        op: name,
    };
    let fields = checker.mapping(node, &format!("entry `{name}`"), Some(ENTRY_FIELDS));
    if node.as_map().is_none() {
        return (None, errors);
    }
    let get = |field: &str| {
        fields
            .iter()
            .find(|(n, _, _)| *n == field)
            .map(|(_, _, v)| *v)
    };
    let key_node = Node {
        kind: Kind::Null,
        offset,
        len: name.len(),
        alias: None,
    };
    for required in ["family", "status", "signature", "roofline"] {
        if get(required).is_none() {
            checker.error(&key_node, format!("missing required field `{required}`"));
        }
    }
    let family = get("family")
        .and_then(|n| checker.string(n, "`family`"))
        .unwrap_or_default();
    let status = match get("status").map(|n| (n, n.as_str())) {
        Some((_, Some("implemented"))) => Some(Status::Implemented),
        Some((_, Some("spec-only"))) => Some(Status::SpecOnly),
        Some((n, _)) => {
            checker.error(
                n,
                "`status` must be `implemented` or `spec-only`".to_owned(),
            );
            None
        }
        None => None,
    };
    for (flag, expected) in [("torch_compile_fullgraph", "true or false")] {
        if let Some(n) = get(flag).filter(|n| !matches!(n.kind, Kind::Bool(_))) {
            checker.error(
                n,
                format!("`{flag}` must be {expected}, found {}", n.type_name()),
            );
        }
    }
    if let Some(ref_api) = get("ref_api") {
        checker.string(ref_api, "`ref_api`");
    }
    if let Some(source) = get("source") {
        for (field, _, value) in checker.mapping(source, "source", Some(SOURCE_FIELDS)) {
            match field {
                "bench_manifest_driven" => {
                    checker.expect_bool(value, "source.bench_manifest_driven")
                }
                "kernel_map" => {
                    for (_, _, path) in checker.mapping(value, "source.kernel_map", None) {
                        checker.string(path, "each value of source.kernel_map");
                    }
                }
                // TileOPs: one kernel file, or a list of them.
                "kernel" if value.as_seq().is_some() => {
                    checker.expect_strings(value, "source.kernel")
                }
                "kernel" if value.as_str().is_none() => checker.error(
                    value,
                    format!(
                        "source.kernel must be a string or a list of strings, found {}",
                        value.type_name()
                    ),
                ),
                _ => {
                    checker.string(value, &format!("source.{field}"));
                }
            }
        }
    }
    let (mut inputs, mut outputs, mut params) = (Vec::new(), Vec::new(), Vec::new());
    if let Some(signature) = get("signature") {
        let sig = checker.mapping(signature, "signature", Some(SIGNATURE_FIELDS));
        let sig_get = |field: &str| sig.iter().find(|(n, _, _)| *n == field).map(|(_, _, v)| *v);
        if let Some(rules) = sig_get("shape_rules") {
            checker.expect_strings(rules, "signature.shape_rules");
        }
        // TileOPs: a list of mappings (tensor name -> dtype).
        if let Some(combos) = sig_get("dtype_combos") {
            match combos.as_seq() {
                Some(items) => {
                    for combo in items.iter().filter(|c| c.as_map().is_none()) {
                        checker.error(
                            combo,
                            format!(
                                "each of signature.dtype_combos must be a mapping (tensor -> dtype), found {}",
                                combo.type_name()
                            ),
                        );
                    }
                }
                None => checker.error(
                    combos,
                    format!(
                        "signature.dtype_combos must be a list, found {}",
                        combos.type_name()
                    ),
                ),
            }
        }
        // TileOPs: a mapping of names to single-axis references (`x.shape[0]`).
        if let Some(dims) = sig_get("static_dims") {
            for (_, _, value) in checker.mapping(dims, "signature.static_dims", None) {
                checker.string(value, "each value of signature.static_dims");
            }
        }
        if sig_get("inputs").is_none() && signature.as_map().is_some() {
            checker.error(signature, "signature needs `inputs`".to_owned());
        }
        inputs = checker.tensors(sig_get("inputs"), "signature.inputs", true);
        outputs = checker.tensors(sig_get("outputs"), "signature.outputs", false);
        params = checker.params(sig_get("params"));
        let tensor_names: Vec<String> = inputs
            .iter()
            .chain(&outputs)
            .map(|t| t.name.clone())
            .collect();
        for decl in inputs.iter().chain(&outputs) {
            let what = if inputs.iter().any(|i| std::ptr::eq(i, decl)) {
                "signature.inputs"
            } else {
                "signature.outputs"
            };
            if !decl.dtype.is_empty() {
                checker.dtype_expr(decl, &tensor_names, what);
            }
        }
        // A dim is a formula name beside the inputs; one named like an input would be two
        // bindings of one name (a tensor and an int). One named like a param is TileOPs's own
        // usage (`a: [numel, k]` with a param `k`, in its moe.yaml): the name binds the param, as
        // in TileOPs, and `eval_roofline` checks at run time that the extent equals it.
        for input in &inputs {
            for (_, dim, offset) in input.dims() {
                if inputs.iter().any(|t| t.name == dim) {
                    checker.errors.push(Diagnostic::at(
                        file,
                        offset,
                        dim.len(),
                        format!(
                            "{name}: dim `{dim}` of input `{}` has the name of the input `{dim}`; rename the dim",
                            input.name
                        ),
                    ));
                }
            }
        }
        for param in &params {
            if let Some(clash) = inputs.iter().chain(&outputs).find(|t| t.name == param.name) {
                checker.errors.push(Diagnostic::at(
                    file,
                    param.offset,
                    param.name.len(),
                    format!(
                        "{name}: param `{}` has the name of tensor `{}`",
                        param.name, clash.name
                    ),
                ));
            }
        }
    }
    let workloads = checker.workloads(get("workloads"), &inputs, &params);
    let roofline = get("roofline").and_then(|r| checker.roofline(r));
    let entry = status.map(|status| Entry {
        name: name.to_owned(),
        file: Rc::clone(file),
        offset,
        family,
        status,
        inputs,
        outputs,
        params,
        workloads,
        roofline,
    });
    (entry, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> (Option<Entry>, Vec<String>) {
        let file = Rc::new(SourceFile {
            display_path: "manifest/t.yaml".into(),
            text: text.into(),
        });
        let family = parse_family_file(Rc::clone(&file));
        assert!(family.errors.is_empty(), "{:?}", family.errors);
        let (name, offset, node) = &family.entries[0];
        let (entry, errors) = check_entry(&file, name, *offset, node);
        (entry, errors.iter().map(Diagnostic::render).collect())
    }

    const GOOD: &str = r#"
softmax:
  family: reduction
  status: implemented
  signature:
    inputs:
      x: {dtype: "float16 | bfloat16"}
    outputs:
      y: {dtype: "same_as(x)"}
    params:
      dim: {type: int, default: -1}
  workloads:
    - {x_shape: [4, 8], dim: 1, dtypes: [float16], label: "small"}
  roofline:
    vars:
      N: "x.shape[dim]"
    flops: "5 * N"
    bytes: '2 * N * elem_bytes'
"#;

    #[test]
    fn a_good_entry_has_no_errors_and_reads_fully() {
        let (entry, errors) = check(GOOD);
        assert!(errors.is_empty(), "{errors:?}");
        let entry = entry.unwrap();
        assert_eq!(entry.status, Status::Implemented);
        assert_eq!(entry.inputs[0].name, "x");
        assert_eq!(
            entry.workloads[0].shapes,
            vec![("x".to_owned(), vec![4, 8])]
        );
        let Some(RooflineSpec::Inline { vars, flops, bytes }) = entry.roofline else {
            panic!()
        };
        assert_eq!(vars[0].name, "N");
        assert_eq!(&GOOD[flops.offset..][..5], "5 * N");
        assert_eq!(&GOOD[bytes.offset..][..5], "2 * N");
        assert_eq!(&GOOD[vars[0].formula.offset..][..5], "x.sha");
    }

    fn assert_one_error(text: &str, needle: &str) {
        let (_, errors) = check(text);
        assert!(
            errors.iter().any(|e| e.contains(needle)),
            "no error containing {needle:?} in {errors:#?}"
        );
    }

    #[test]
    fn func_and_inline_fields_are_exclusive() {
        let text = GOOD.replace(
            "    flops: \"5 * N\"",
            "    func: \"my::roofline\"\n    flops: \"5 * N\"",
        );
        assert_one_error(&text, "cannot be used together with `func`");
    }

    #[test]
    fn inline_mode_requires_flops_and_bytes() {
        assert_one_error(
            &GOOD.replace("    bytes: '2 * N * elem_bytes'\n", ""),
            "inline roofline needs `bytes`",
        );
    }

    #[test]
    fn formulas_must_be_non_empty_strings() {
        assert_one_error(
            &GOOD.replace("\"5 * N\"", "5"),
            "roofline `flops` must be a string",
        );
        assert_one_error(
            &GOOD.replace("\"5 * N\"", "\"  \""),
            "must be a non-empty string",
        );
        assert_one_error(
            &GOOD.replace("\"x.shape[dim]\"", "[1]"),
            "roofline `vars.N` must be a string",
        );
    }

    #[test]
    fn vars_must_be_a_mapping() {
        assert_one_error(
            &GOOD.replace("    vars:\n      N: \"x.shape[dim]\"", "    vars: [N]"),
            "roofline.vars must be a mapping",
        );
    }

    #[test]
    fn unknown_dtypes_are_reported() {
        assert_one_error(
            &GOOD.replace("float16 | bfloat16", "float16 | bfloat17"),
            "unknown dtype `bfloat17`",
        );
        assert_one_error(
            &GOOD.replace("dtypes: [float16]", "dtypes: [half]"),
            "unknown dtype `half`",
        );
        assert_one_error(&GOOD.replace("same_as(x)", "same_as(z)"), "refers to `z`");
    }

    #[test]
    fn workload_rows_need_label_and_dtypes_and_known_keys() {
        assert_one_error(&GOOD.replace(", label: \"small\"", ""), "needs a `label`");
        assert_one_error(&GOOD.replace("dtypes: [float16], ", ""), "needs `dtypes`");
        assert_one_error(
            &GOOD.replace("dim: 1,", "dmi: 1,"),
            "workload key `dmi` is neither",
        );
        assert_one_error(
            &GOOD.replace("x_shape: [4, 8]", "x_shape: [4, -8]"),
            "non-negative integers",
        );
    }

    #[test]
    fn status_and_required_fields_are_checked() {
        assert_one_error(
            &GOOD.replace("status: implemented", "status: done"),
            "`status` must be",
        );
        assert_one_error(
            &GOOD.replace("  family: reduction\n", ""),
            "missing required field `family`",
        );
        assert_one_error(
            &GOOD.replace("  family: reduction\n", "  famliy: reduction\n"),
            "unknown field `famliy` in entry `softmax` (did you mean `family`?)",
        );
        assert_one_error(
            &GOOD.replace("  family: reduction\n", "  colour: reduction\n"),
            "unknown field `colour` in entry `softmax`; expected one of",
        );
    }

    #[test]
    fn fixed_rank_shapes_parse_with_positions() {
        let text = GOOD.replace(
            "{dtype: \"float16 | bfloat16\"}",
            "{dtype: \"float16\", shape: \"[M, K]\"}",
        );
        let (entry, errors) = check(&text);
        assert!(errors.is_empty(), "{errors:?}");
        let dims = entry.unwrap().inputs[0].shape.clone().unwrap();
        assert_eq!(
            dims.iter().map(|d| d.text.as_str()).collect::<Vec<_>>(),
            ["M", "K"]
        );
        assert_eq!(&text[dims[1].offset..][..1], "K");
        assert_one_error(
            &GOOD.replace(
                "{dtype: \"float16 | bfloat16\"}",
                "{dtype: \"float16\", shape: \"M, K\"}",
            ),
            "must be \"[M, K]\", [M, K] or \"same_as(x)\"",
        );
    }

    fn with_input(decl: &str) -> String {
        GOOD.replace("{dtype: \"float16 | bfloat16\"}", decl)
    }

    fn dims_of(text: &str) -> Option<Vec<(Option<String>, String)>> {
        let (entry, errors) = check(text);
        assert!(errors.is_empty(), "{errors:?}");
        entry.unwrap().inputs[0].shape.as_ref().map(|dims| {
            dims.iter()
                .map(|d| (d.name.clone(), d.text.clone()))
                .collect()
        })
    }

    #[test]
    fn shapes_are_strings_or_sequences_as_in_tileops() {
        let named = |n: &str| (Some(n.to_owned()), n.to_owned());
        let text = with_input("{dtype: float16, shape: [numel, k]}");
        assert_eq!(dims_of(&text), Some(vec![named("numel"), named("k")]));
        let (entry, _) = check(&text);
        let dims = entry.unwrap().inputs[0].shape.clone().unwrap();
        assert_eq!(&text[dims[1].offset..][..1], "k");
        // Entries that are not identifiers hold their position and bind nothing.
        let text = with_input("{dtype: float16, shape: \"[M, 2 * N, 4]\"}");
        assert_eq!(
            dims_of(&text),
            Some(vec![
                named("M"),
                (None, "2 * N".to_owned()),
                (None, "4".to_owned())
            ])
        );
        let text = with_input("{dtype: float16, shape: [4, d]}");
        assert_eq!(
            dims_of(&text),
            Some(vec![(None, "4".to_owned()), named("d")])
        );
        // No fixed rank: nothing to bind.
        assert_eq!(
            dims_of(&with_input("{dtype: float16, shape: \"same_as(x)\"}")),
            None
        );
        assert_eq!(
            dims_of(&with_input("{dtype: float16, shape: \"[..., n]\"}")),
            None
        );
        assert_eq!(
            dims_of(&with_input("{dtype: float16, shape: \"[]\"}")),
            Some(vec![])
        );
        assert_one_error(
            &with_input("{dtype: float16, shape: {M: 1}}"),
            "must be a string (\"[M, K]\") or a sequence ([M, K])",
        );
        assert_one_error(
            &with_input("{dtype: float16, shape: [M, [K]]}"),
            "each entry of signature.inputs.x.shape must be a dim name or an expression",
        );
        assert_one_error(
            &with_input("{dtype: float16, shape: \"[M, 1x]\"}"),
            "`1x` is neither a dim name (an identifier) nor an expression",
        );
        assert_one_error(
            &with_input("{dtype: float16, shape: \"[M, , K]\"}"),
            "`` is neither a dim name",
        );
    }

    #[test]
    fn names_that_cannot_become_rust_are_refused() {
        for (bad, rule) in [
            ("x-y", "is not an identifier"),
            ("1x", "is not an identifier"),
            ("\"\"", "is not an identifier"),
            ("lambda", "is a Python keyword"),
            ("self", "cannot be a Rust field name"),
        ] {
            let text = GOOD
                .replace("      x: {dtype", &format!("      {bad}: {{dtype"))
                .replace("same_as(x)", "float16");
            assert_one_error(&text, &format!("input `{}` {rule}", bad.trim_matches('"')));
        }
        assert_one_error(
            &GOOD.replace("      dim: {type", "      d-m: {type"),
            "param `d-m` is not an identifier",
        );
        for bad in ["\"N M\"", "N-1", "\"\"", "for"] {
            let text = GOOD.replace(
                "      N: \"x.shape[dim]\"",
                &format!("      {bad}: \"x.shape[dim]\""),
            );
            assert_one_error(&text, "`vars` key");
        }
        // Rust keywords other than `self`/`super`/`crate`/`Self` are fine: a raw identifier binds them.
        let text = GOOD
            .replace("      x: {dtype", "      type: {dtype")
            .replace("same_as(x)", "same_as(type)");
        let (_, errors) = check(
            &text
                .replace("x_shape", "type_shape")
                .replace("x.shape", "type.shape"),
        );
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn a_dtype_defined_by_itself_is_refused() {
        assert_one_error(
            &GOOD.replace("{dtype: \"same_as(x)\"}", "{dtype: \"same_as(y)\"}"),
            "`same_as(y)` refers to the tensor itself",
        );
        assert_one_error(
            &with_input("{dtype: \"promote_int_to_float(x)\"}"),
            "refers to the tensor itself",
        );
    }

    #[test]
    fn a_dim_may_not_share_a_name_with_an_input() {
        assert_one_error(
            &with_input("{dtype: float16, shape: \"[x]\"}"),
            "dim `x` of input `x` has the name of the input `x`; rename the dim",
        );
    }

    #[test]
    fn a_dim_may_share_a_name_with_a_param_as_in_tileops() {
        // TileOPs's MoeGroupedGemmNopadFwdOp: `a: [numel, k]` beside the params `numel` and `k`.
        let (entry, errors) = check(&with_input("{dtype: float16, shape: \"[dim, K]\"}"));
        assert!(errors.is_empty(), "{errors:?}");
        let entry = entry.unwrap();
        let dims: Vec<&str> = entry.inputs[0].dims().map(|(_, d, _)| d).collect();
        assert_eq!(dims, ["dim", "K"]);
        assert!(entry.params.iter().any(|p| p.name == "dim"));
    }

    #[test]
    fn workload_integers_beyond_u64_are_refused() {
        for big in [
            "18446744073709551616",
            "99999999999999999999999999",
            "99999999999999999999999999999999999999999",
        ] {
            assert_one_error(
                &GOOD.replace("dim: 1,", &format!("dim: {big},")),
                &format!("the integer `{big}` is beyond the range of workload integers"),
            );
            assert_one_error(
                &GOOD.replace("x_shape: [4, 8]", &format!("x_shape: [4, {big}]")),
                "beyond the range of workload integers",
            );
            assert_one_error(
                &GOOD.replace("default: -1}", &format!("default: [{big}]}}")),
                "signature.params.dim.default: the integer",
            );
        }
        let (_, errors) = check(&GOOD.replace("dim: 1,", "dim: 18446744073709551615,"));
        assert!(errors.is_empty(), "u64::MAX itself fits: {errors:?}");
        let (_, errors) = check(&GOOD.replace("dim: 1,", "dim: 1.5e300,"));
        assert!(errors.is_empty(), "a float is a float: {errors:?}");
    }

    #[test]
    fn param_types_follow_tileops_grammar() {
        let (_, errors) = check(&GOOD.replace(
            "{type: int,",
            "{type: \"int | list[int] | tuple[int, ...] | None\",",
        ));
        assert!(errors.is_empty(), "{errors:?}");
        let text = GOOD.replace("{type: int,", "{type: flaot,");
        assert_one_error(
            &text,
            "signature.params.dim.type `flaot`: unknown type `flaot`; did you mean `float`?",
        );
        let (_, errors) = check(&text);
        assert!(errors[0].starts_with("manifest/t.yaml:11:"), "{errors:?}");
        assert!(errors[0].ends_with("^^^^^"), "{errors:?}");
        assert_one_error(
            &GOOD.replace("{type: int,", "{type: \"int |\","),
            "expected a type name",
        );
    }

    #[test]
    fn source_and_signature_fields_take_tileops_types() {
        let with_source = |source: &str| format!("{GOOD}  source:\n{source}");
        let (_, errors) = check(&with_source(
            "    kernel: [a.py, b.py]\n    kernel_map: {k: K}\n    op: o.py\n",
        ));
        assert!(errors.is_empty(), "{errors:?}");
        let (_, errors) = check(&with_source("    kernel: a.py\n"));
        assert!(errors.is_empty(), "{errors:?}");
        assert_one_error(
            &with_source("    kernel: [a.py, 3]\n"),
            "each of source.kernel must be a string",
        );
        assert_one_error(
            &with_source("    kernel: {a: b}\n"),
            "source.kernel must be a string or a list of strings",
        );
        let with_sig =
            |field: &str| GOOD.replace("    outputs:", &format!("    {field}\n    outputs:"));
        let (_, errors) = check(&with_sig(
            "static_dims: {N: \"x.shape[1]\"}\n    dtype_combos: [{x: float16, y: float16}]",
        ));
        assert!(errors.is_empty(), "{errors:?}");
        assert_one_error(
            &with_sig("static_dims: {N: 1}"),
            "each value of signature.static_dims must be a string",
        );
        assert_one_error(
            &with_sig("dtype_combos: [float16]"),
            "each of signature.dtype_combos must be a mapping",
        );
        assert_one_error(
            &with_input("{dtype: float16, shape: \"[M]\", constraints: [1]}"),
            "constraints must be a mapping",
        );
    }

    #[test]
    fn optional_fields_are_type_checked() {
        assert_one_error(
            &GOOD.replace(
                "{type: int, default: -1}",
                "{type: int, default: -1, kw_only: 1}",
            ),
            "kw_only must be true or false",
        );
        assert_one_error(
            &GOOD.replace(
                "  family: reduction\n",
                "  family: reduction\n  ref_api: [1]\n",
            ),
            "`ref_api` must be a string",
        );
        assert_one_error(
            &GOOD.replace("    outputs:", "    shape_rules: \"x\"\n    outputs:"),
            "shape_rules must be a list of strings",
        );
        assert_one_error(
            &GOOD.replace(
                "{dtype: \"same_as(x)\"}",
                "{dtype: \"same_as(x)\", mutated: 2}",
            ),
            "mutated must be true or false",
        );
        assert_one_error(
            &format!("{GOOD}  source:\n    bench_manifest_driven: maybe\n"),
            "bench_manifest_driven must be true or false",
        );
    }

    #[test]
    fn every_problem_of_an_entry_is_reported() {
        let text = GOOD
            .replace("status: implemented", "status: done")
            .replace("dtypes: [float16]", "dtypes: [half]");
        let (_, errors) = check(&text);
        assert!(errors.len() >= 2, "{errors:?}");
    }

    #[test]
    fn syntax_errors_are_located() {
        let file = Rc::new(SourceFile {
            display_path: "m.yaml".into(),
            text: "a: [1, 2\nb: 3\n".into(),
        });
        let family = parse_family_file(file);
        assert!(
            family.errors[0].render().starts_with("m.yaml:2:"),
            "{}",
            family.errors[0].render()
        );
    }
}
