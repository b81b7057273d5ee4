//! The traffic ledger's gates, and a reader of the launch log (`CUDA_EMU_LEDGER`).
//!
//! Standard library only, so tileops's coverage tests include this file as a module of their own
//! (`#[path]`) and judge the emulator's log with the same code the emulator's planted checks use,
//! without depending on the emulator crate.
//!
//! Three gates, each per op call (all its launches):
//! - **traffic**: the unique bytes moved (sectors read + written, x 32, summed over the call's
//!   launches: a scratch buffer written by one launch and read by the next counts twice, as on a
//!   GPU) within ±[`Bounds::bytes`] of the op's `eval_roofline` bytes, plus 32 bytes per
//!   allocation and direction for the sector rounding at the end of each tensor;
//! - **coalescing**: every hot global site (at least [`Bounds::hot_share`] of its launch's global
//!   requests) at most [`Bounds::sectors`] times its ideal sectors;
//! - **bank conflicts**: every hot shared site at most [`Bounds::wavefronts`] times its ideal
//!   wavefronts.
//!
//! A failure names the op, the entry (and site), the figure and the bound.

use std::collections::BTreeMap;
use std::fmt;

/// One line of the launch log.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchRecord {
    /// The entry point.
    pub entry: String,
    /// `gridDim`.
    pub grid: [u64; 3],
    /// `blockDim`.
    pub block: [u64; 3],
    /// Dynamic shared memory per block.
    pub dynamic_smem: u64,
    /// False for a dry run.
    pub ran: bool,
    /// The Linux id of the launching thread (absent from older logs).
    pub tid: Option<u64>,
    /// The traffic, `None` from a build that does not count it (or a dry run).
    pub traffic: Option<TrafficRecord>,
}

/// What one launch moved: what the emulator counts (`crate::traffic`, in the build that counts),
/// writes to the launch log ([`TrafficRecord::to_json`]) and this module reads back, so the
/// writer and the reader are of one type (see the module docs of `traffic` for each figure's
/// rule).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrafficRecord {
    /// Unique sectors read x 32.
    pub read_bytes: u64,
    /// Unique sectors written x 32.
    pub write_bytes: u64,
    /// Device allocations touched.
    pub allocations: u64,
    /// Warp-level global requests.
    pub global_requests: u64,
    /// Their sectors.
    pub global_sectors: u64,
    /// Their ideal sectors.
    pub global_ideal_sectors: u64,
    /// Warp-level shared requests.
    pub shared_requests: u64,
    /// Their wavefronts.
    pub shared_wavefronts: u64,
    /// Their conflict-free wavefronts.
    pub shared_ideal_wavefronts: u64,
    /// Per site.
    pub sites: Vec<SiteRecord>,
}

/// One site of a launch's traffic.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteRecord {
    /// `file.cu:LINE`.
    pub site: String,
    /// `global` or `shared`.
    pub space: String,
    /// `load` or `store`.
    pub kind: String,
    /// Bytes per lane of the request (after merging split vector accesses).
    pub width: u64,
    /// Warp-level requests.
    pub requests: u64,
    /// Global sectors.
    pub sectors: u64,
    /// Global ideal sectors.
    pub ideal_sectors: u64,
    /// Shared wavefronts.
    pub wavefronts: u64,
    /// Shared ideal wavefronts.
    pub ideal_wavefronts: u64,
}

impl TrafficRecord {
    /// The launch log's `traffic` object, on one line:
    /// `{"read_bytes":R,"write_bytes":W,"allocations":A,"global_requests":n,"global_sectors":n,
    /// "global_ideal_sectors":n,"shared_requests":n,"shared_wavefronts":n,
    /// "shared_ideal_wavefronts":n,"sites":[{"site":"file.cu:LINE","space":"global","kind":"load",
    /// "width":16,"requests":n,"sectors":n,"ideal_sectors":n,"wavefronts":n,"ideal_wavefronts":n}]}`.
    ///
    /// ```
    /// let t = cuda_emu::gate::TrafficRecord { read_bytes: 64, ..Default::default() };
    /// assert!(t.to_json().starts_with(r#"{"read_bytes":64,"write_bytes":0,"#));
    /// ```
    pub fn to_json(&self) -> String {
        let sites: Vec<String> = self
            .sites
            .iter()
            .map(|s| {
                format!(
                    "{{\"site\":{},\"space\":\"{}\",\"kind\":\"{}\",\"width\":{},\"requests\":{},\"sectors\":{},\"ideal_sectors\":{},\"wavefronts\":{},\"ideal_wavefronts\":{}}}",
                    json_string(&s.site),
                    s.space,
                    s.kind,
                    s.width,
                    s.requests,
                    s.sectors,
                    s.ideal_sectors,
                    s.wavefronts,
                    s.ideal_wavefronts
                )
            })
            .collect();
        format!(
            "{{\"read_bytes\":{},\"write_bytes\":{},\"allocations\":{},\"global_requests\":{},\"global_sectors\":{},\"global_ideal_sectors\":{},\"shared_requests\":{},\"shared_wavefronts\":{},\"shared_ideal_wavefronts\":{},\"sites\":[{}]}}",
            self.read_bytes,
            self.write_bytes,
            self.allocations,
            self.global_requests,
            self.global_sectors,
            self.global_ideal_sectors,
            self.shared_requests,
            self.shared_wavefronts,
            self.shared_ideal_wavefronts,
            sites.join(",")
        )
    }
}

/// `text` as a JSON string literal.
pub fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Which gate a finding or an exception is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Gate {
    /// Unique bytes against `eval_roofline`'s.
    Traffic,
    /// Sectors per request against the ideal.
    Coalescing,
    /// Shared-memory wavefronts per request against the ideal.
    BankConflicts,
}

impl Gate {
    /// The gate's name, as exceptions state it.
    pub fn name(self) -> &'static str {
        match self {
            Gate::Traffic => "traffic",
            Gate::Coalescing => "coalescing",
            Gate::BankConflicts => "bank_conflicts",
        }
    }
}

/// The bounds of the gates.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Relative tolerance of the traffic gate.
    pub bytes: f64,
    /// A site is hot when it makes at least this share of its launch's requests in its space.
    pub hot_share: f64,
    /// Most sectors per ideal sector of a hot global site.
    pub sectors: f64,
    /// Most wavefronts per ideal wavefront of a hot shared site.
    pub wavefronts: f64,
}

impl Default for Bounds {
    /// ±2% bytes; hot = 10% of the requests; the ideal exactly for sectors and wavefronts.
    fn default() -> Bounds {
        Bounds {
            bytes: 0.02,
            hot_share: 0.10,
            sectors: 1.0,
            wavefronts: 1.0,
        }
    }
}

/// A gate a call failed.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// The gate.
    pub gate: Gate,
    /// The entry point (for the traffic gate, the call's entries joined by `+`).
    pub entry: String,
    /// The figure and the bound, in words.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}: {}", self.gate.name(), self.entry, self.message)
    }
}

/// The gates over one op call: its launches (every one with traffic) and `eval_roofline`'s
/// bytes. Returns every finding; launches without traffic are skipped by the caller.
pub fn check_call(
    op: &str,
    launches: &[LaunchRecord],
    roofline_bytes: f64,
    bounds: &Bounds,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let measured: Vec<(&LaunchRecord, &TrafficRecord)> = launches
        .iter()
        .filter_map(|l| l.traffic.as_ref().map(|t| (l, t)))
        .collect();
    if measured.is_empty() {
        return findings;
    }
    let entries: Vec<&str> = measured.iter().map(|(l, _)| l.entry.as_str()).collect();
    let bytes: u64 = measured
        .iter()
        .map(|(_, t)| t.read_bytes + t.write_bytes)
        .sum();
    let slack: u64 = measured.iter().map(|(_, t)| 64 * t.allocations).sum();
    let allowed = bounds.bytes * roofline_bytes + slack as f64;
    if (bytes as f64 - roofline_bytes).abs() > allowed {
        let relative = if roofline_bytes > 0.0 {
            format!(
                " ({:+.1}%)",
                100.0 * (bytes as f64 - roofline_bytes) / roofline_bytes
            )
        } else {
            String::new()
        };
        findings.push(Finding {
            gate: Gate::Traffic,
            entry: entries.join("+"),
            message: format!(
                "{op}: unique bytes {bytes} vs eval_roofline {roofline_bytes}{relative}; bound ±{:.0}% \
                 (+{slack} B sector rounding)",
                100.0 * bounds.bytes
            ),
        });
    }
    for (launch, traffic) in measured {
        for site in &traffic.sites {
            let (total, figure, ideal, bound, gate, unit) = if site.space == "global" {
                (
                    traffic.global_requests,
                    site.sectors,
                    site.ideal_sectors,
                    bounds.sectors,
                    Gate::Coalescing,
                    "sectors",
                )
            } else {
                (
                    traffic.shared_requests,
                    site.wavefronts,
                    site.ideal_wavefronts,
                    bounds.wavefronts,
                    Gate::BankConflicts,
                    "wavefronts",
                )
            };
            let hot = site.requests as f64 >= bounds.hot_share * total as f64;
            if !hot || ideal == 0 {
                continue;
            }
            let ratio = figure as f64 / ideal as f64;
            if ratio > bound + 1e-9 {
                findings.push(Finding {
                    gate,
                    entry: launch.entry.clone(),
                    message: format!(
                        "{op}: {} {} of {} B at {}: {ratio:.2} {unit} per ideal ({:.2} per \
                         request vs {:.2}; {} of {} requests); bound {bound:.2}",
                        site.space,
                        site.kind,
                        site.width,
                        site.site,
                        figure as f64 / site.requests as f64,
                        ideal as f64 / site.requests as f64,
                        site.requests,
                        total
                    ),
                });
            }
        }
    }
    findings
}

/// Parses one line of the launch log.
///
/// ```
/// use cuda_emu::gate::parse_line;
/// let line = r#"{"entry":"relu_bf16","grid":[1,1,1],"block":[256,1,1],"dynamic_smem":0,"ran":true,"traffic":null}"#;
/// assert_eq!(parse_line(line).unwrap().entry, "relu_bf16");
/// ```
pub fn parse_line(line: &str) -> Result<LaunchRecord, String> {
    let value = Parser::new(line).document()?;
    let object = value.object("the launch")?;
    let dims = |key: &str| -> Result<[u64; 3], String> {
        let items = field(object, key)?.array(key)?;
        if items.len() != 3 {
            return Err(format!("{key}: {} numbers, not 3", items.len()));
        }
        Ok([
            items[0].number(key)?,
            items[1].number(key)?,
            items[2].number(key)?,
        ])
    };
    let traffic = match field(object, "traffic")? {
        Json::Null => None,
        t => Some(traffic_record(t.object("traffic")?)?),
    };
    Ok(LaunchRecord {
        entry: field(object, "entry")?.string("entry")?.to_owned(),
        grid: dims("grid")?,
        block: dims("block")?,
        dynamic_smem: field(object, "dynamic_smem")?.number("dynamic_smem")?,
        ran: field(object, "ran")?.boolean("ran")?,
        tid: object.get("tid").map(|t| t.number("tid")).transpose()?,
        traffic,
    })
}

fn traffic_record(t: &BTreeMap<String, Json>) -> Result<TrafficRecord, String> {
    let n = |key: &str| field(t, key)?.number(key);
    let mut sites = Vec::new();
    for s in field(t, "sites")?.array("sites")? {
        let s = s.object("site")?;
        let n = |key: &str| field(s, key)?.number(key);
        sites.push(SiteRecord {
            site: field(s, "site")?.string("site")?.to_owned(),
            space: field(s, "space")?.string("space")?.to_owned(),
            kind: field(s, "kind")?.string("kind")?.to_owned(),
            width: n("width")?,
            requests: n("requests")?,
            sectors: n("sectors")?,
            ideal_sectors: n("ideal_sectors")?,
            wavefronts: n("wavefronts")?,
            ideal_wavefronts: n("ideal_wavefronts")?,
        });
    }
    Ok(TrafficRecord {
        read_bytes: n("read_bytes")?,
        write_bytes: n("write_bytes")?,
        // Optional: the count of touched allocations (absent: no rounding slack).
        allocations: t
            .get("allocations")
            .map(|v| v.number("allocations"))
            .transpose()?
            .unwrap_or(0),
        global_requests: n("global_requests")?,
        global_sectors: n("global_sectors")?,
        global_ideal_sectors: n("global_ideal_sectors")?,
        shared_requests: n("shared_requests")?,
        shared_wavefronts: n("shared_wavefronts")?,
        shared_ideal_wavefronts: n("shared_ideal_wavefronts")?,
        sites,
    })
}

fn field<'a>(object: &'a BTreeMap<String, Json>, key: &str) -> Result<&'a Json, String> {
    object.get(key).ok_or_else(|| format!("no \"{key}\""))
}

/// A JSON value (numbers as f64: the log's counts stay far below 2^53).
#[derive(Clone, Debug, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Json>),
    Object(BTreeMap<String, Json>),
}

impl Json {
    fn object(&self, what: &str) -> Result<&BTreeMap<String, Json>, String> {
        match self {
            Json::Object(o) => Ok(o),
            _ => Err(format!("{what}: not an object")),
        }
    }
    fn array(&self, what: &str) -> Result<&[Json], String> {
        match self {
            Json::Array(a) => Ok(a),
            _ => Err(format!("{what}: not an array")),
        }
    }
    fn string(&self, what: &str) -> Result<&str, String> {
        match self {
            Json::String(s) => Ok(s),
            _ => Err(format!("{what}: not a string")),
        }
    }
    fn boolean(&self, what: &str) -> Result<bool, String> {
        match self {
            Json::Bool(b) => Ok(*b),
            _ => Err(format!("{what}: not a boolean")),
        }
    }
    fn number(&self, what: &str) -> Result<u64, String> {
        match self {
            Json::Number(n) if *n >= 0.0 && n.fract() == 0.0 => Ok(*n as u64),
            _ => Err(format!("{what}: not a count")),
        }
    }
}

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Parser<'a> {
        Parser {
            text: text.as_bytes(),
            at: 0,
        }
    }

    fn document(mut self) -> Result<Json, String> {
        let value = self.value()?;
        self.space();
        if self.at != self.text.len() {
            return Err(format!("trailing text at byte {}", self.at));
        }
        Ok(value)
    }

    fn space(&mut self) {
        while self.text.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        self.space();
        if self.text.get(self.at) == Some(&byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", byte as char, self.at))
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        self.space();
        match self.text.get(self.at) {
            Some(b'{') => {
                self.at += 1;
                let mut object = BTreeMap::new();
                self.space();
                if self.text.get(self.at) == Some(&b'}') {
                    self.at += 1;
                    return Ok(Json::Object(object));
                }
                loop {
                    self.space();
                    let key = self.string()?;
                    self.expect(b':')?;
                    object.insert(key, self.value()?);
                    self.space();
                    match self.text.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b'}') => {
                            self.at += 1;
                            return Ok(Json::Object(object));
                        }
                        _ => return Err(format!("expected ',' or '}}' at byte {}", self.at)),
                    }
                }
            }
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                self.space();
                if self.text.get(self.at) == Some(&b']') {
                    self.at += 1;
                    return Ok(Json::Array(items));
                }
                loop {
                    items.push(self.value()?);
                    self.space();
                    match self.text.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b']') => {
                            self.at += 1;
                            return Ok(Json::Array(items));
                        }
                        _ => return Err(format!("expected ',' or ']' at byte {}", self.at)),
                    }
                }
            }
            Some(b'"') => Ok(Json::String(self.string()?)),
            Some(b't') => self.word("true", Json::Bool(true)),
            Some(b'f') => self.word("false", Json::Bool(false)),
            Some(b'n') => self.word("null", Json::Null),
            Some(_) => {
                let start = self.at;
                while self
                    .text
                    .get(self.at)
                    .is_some_and(|b| b.is_ascii_digit() || b"+-.eE".contains(b))
                {
                    self.at += 1;
                }
                std::str::from_utf8(&self.text[start..self.at])
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .map(Json::Number)
                    .ok_or_else(|| format!("a bad value at byte {start}"))
            }
            None => Err("unexpected end".to_owned()),
        }
    }

    fn word(&mut self, word: &str, value: Json) -> Result<Json, String> {
        if self.text[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(format!("a bad value at byte {}", self.at))
        }
    }

    fn string(&mut self) -> Result<String, String> {
        if self.text.get(self.at) != Some(&b'"') {
            return Err(format!("expected a string at byte {}", self.at));
        }
        self.at += 1;
        let mut out = Vec::new();
        loop {
            match self.text.get(self.at) {
                None => return Err("an unterminated string".to_owned()),
                Some(b'"') => {
                    self.at += 1;
                    return String::from_utf8(out).map_err(|_| "a string not in UTF-8".to_owned());
                }
                Some(b'\\') => {
                    let escaped = *self.text.get(self.at + 1).ok_or("an unterminated escape")?;
                    self.at += 2;
                    match escaped {
                        b'u' => {
                            let hex = self
                                .text
                                .get(self.at..self.at + 4)
                                .and_then(|h| std::str::from_utf8(h).ok())
                                .and_then(|h| u32::from_str_radix(h, 16).ok())
                                .and_then(char::from_u32)
                                .ok_or("a bad \\u escape")?;
                            self.at += 4;
                            let mut buf = [0; 4];
                            out.extend_from_slice(hex.encode_utf8(&mut buf).as_bytes());
                        }
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        other => out.push(other),
                    }
                }
                Some(&b) => {
                    out.push(b);
                    self.at += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"entry":"relu_bf16","grid":[2,1,1],"block":[256,1,1],"dynamic_smem":0,"ran":true,"traffic":{"read_bytes":1024,"write_bytes":1024,"allocations":2,"global_requests":4,"global_sectors":64,"global_ideal_sectors":32,"shared_requests":0,"shared_wavefronts":0,"shared_ideal_wavefronts":0,"sites":[{"site":"a.cu:3","space":"global","kind":"load","width":16,"requests":4,"sectors":64,"ideal_sectors":32,"wavefronts":0,"ideal_wavefronts":0}]}}"#;

    #[test]
    fn a_line_parses_and_the_gates_name_entry_figure_and_bound() {
        let record = parse_line(LINE).unwrap();
        assert_eq!(record.grid, [2, 1, 1]);
        let t = record.traffic.as_ref().unwrap();
        assert_eq!((t.read_bytes, t.sites[0].width), (1024, 16));
        let findings = check_call(
            "relu",
            std::slice::from_ref(&record),
            2048.0,
            &Bounds::default(),
        );
        assert_eq!(findings.len(), 1, "{findings:?}");
        let text = findings[0].to_string();
        assert!(text.contains("[coalescing] relu_bf16"), "{text}");
        assert!(text.contains("2.00 sectors per ideal"), "{text}");
        // Twice the bytes: the traffic gate.
        let findings = check_call("relu", &[record], 1024.0, &Bounds::default());
        assert!(
            findings
                .iter()
                .any(|f| f.gate == Gate::Traffic && f.message.contains("+100.0%")),
            "{findings:?}"
        );
    }

    #[test]
    fn a_null_traffic_and_bad_lines() {
        let null = LINE.split(",\"traffic\"").next().unwrap().to_owned() + ",\"traffic\":null}";
        let record = parse_line(&null).unwrap();
        assert!(record.traffic.is_none());
        assert!(check_call("relu", &[record], 1.0, &Bounds::default()).is_empty());
        assert!(parse_line("{\"entry\":1}").is_err());
        assert!(parse_line(&LINE[..40]).is_err());
    }
}
