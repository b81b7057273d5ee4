//! Which bytes of the static shared section a launch must poison before each block.
//!
//! Every kernel's static `__shared__` arrays live in one section of the emulator's image,
//! `cuda_emu_shared` (2.3 MB for tileops's kernels), and before each block the emulator fills them
//! with its poison so that a read of an element no thread of the block wrote shows as NaN. A
//! kernel can only reach its own function-local statics (mangled `_ZZ<len><entry>E…`, as every
//! `extern "C"` entry's are), the statics of the functions it calls, and namespace-scope arrays;
//! it cannot reach another entry's. So a launch poisons every array except those another entry
//! owns: its own, and every one no entry owns (a template's or a helper's, which any kernel may
//! call): 0.8 MB plus its own, instead of 2.3. Those are found in the image's symbol table, once
//! per process; an image whose symbols cannot be read (stripped, not found) poisons the whole
//! section.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

/// Sorted, disjoint offsets from the section's start: the bytes a launch poisons.
type Ranges = Arc<[Range<usize>]>;

/// The arrays of the section by owner, as offsets from its start.
struct Layout {
    len: usize,
    /// Arrays no entry owns: poisoned for every launch.
    common: Vec<Range<usize>>,
    /// Each entry's own arrays.
    owned: HashMap<&'static str, Vec<Range<usize>>>,
}

/// The ranges of the section (offsets from its start, sorted, disjoint) to poison before each
/// block of a launch of `entry`: empty when there is no section.
pub(crate) fn poison_ranges(entry: &'static str) -> Ranges {
    static LAYOUT: OnceLock<Option<(usize, Option<Layout>)>> = OnceLock::new();
    static BY_ENTRY: OnceLock<Mutex<HashMap<&'static str, Ranges>>> = OnceLock::new();
    let Some((len, layout)) = LAYOUT.get_or_init(read_layout) else {
        return Arc::from([]);
    };
    let mut by_entry = BY_ENTRY
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    by_entry
        .entry(entry)
        .or_insert_with(|| match layout {
            Some(layout) => layout.ranges_for(entry).into(),
            None => std::iter::once(0..*len).collect(),
        })
        .clone()
}

impl Layout {
    fn ranges_for(&self, entry: &str) -> Vec<Range<usize>> {
        let mut ranges: Vec<Range<usize>> = self.common.clone();
        ranges.extend(self.owned.get(entry).into_iter().flatten().cloned());
        merged(ranges, self.len)
    }
}

/// Sorted, overlapping or touching ranges joined, each clipped to `0..len`.
fn merged(mut ranges: Vec<Range<usize>>, len: usize) -> Vec<Range<usize>> {
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        let r = r.start.min(len)..r.end.min(len);
        if r.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// The section's length and its layout (`None`: poison it whole); `None` when there is no
/// section.
fn read_layout() -> Option<(usize, Option<Layout>)> {
    let (mut start, mut stop) = (0usize, 0usize);
    // SAFETY: two valid out-pointers.
    unsafe { crate::traffic::cuda_emu_shared_bounds(&mut start, &mut stop) };
    if start == 0 || stop <= start {
        return None;
    }
    let len = stop - start;
    let names: HashSet<&'static str> = crate::entries::entries().iter().map(|e| e.name).collect();
    Some((len, layout_from_image(start, len, &names)))
}

fn layout_from_image(start: usize, len: usize, entries: &HashSet<&'static str>) -> Option<Layout> {
    use object::{Object, ObjectSection, ObjectSymbol};
    let (file, base) = crate::traffic::object_of(start)?;
    let bytes = std::fs::read(file).ok()?;
    let image = object::File::parse(&*bytes).ok()?;
    let section = image.section_by_name("cuda_emu_shared")?;
    let section_start = usize::try_from(section.address()).ok()?;
    if base.checked_add(section_start)? != start || usize::try_from(section.size()).ok()? != len {
        return None;
    }
    let mut layout = Layout {
        len,
        common: Vec::new(),
        owned: HashMap::new(),
    };
    for symbol in image.symbols() {
        if symbol.section_index() != Some(section.index()) {
            continue;
        }
        let offset = usize::try_from(symbol.address())
            .ok()?
            .checked_sub(section_start)?;
        let size = usize::try_from(symbol.size()).ok()?;
        if size == 0 {
            // A label (the linker's `__start_cuda_emu_shared`): no bytes of its own.
            continue;
        }
        let range = offset..offset.checked_add(size)?;
        match owner(symbol.name().ok()?).and_then(|name| entries.get(name)) {
            Some(&entry) => layout.owned.entry(entry).or_default().push(range),
            None => layout.common.push(range),
        }
    }
    Some(layout)
}

/// The function a function-local static belongs to, from its mangled name
/// (`_ZZ20rms_norm_rows_v4_f32E4smem` → `rms_norm_rows_v4_f32`), when that function is a plain
/// (`extern "C"`, unmangled) name; `None` for anything else.
fn owner(symbol: &str) -> Option<&str> {
    let rest = symbol.strip_prefix("_ZZ")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let len: usize = rest[..digits].parse().ok()?;
    let name = rest.get(digits..digits.checked_add(len)?)?;
    rest[digits + len..].starts_with('E').then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_static_s_owner_is_its_plain_function_only() {
        assert_eq!(
            owner("_ZZ20rms_norm_rows_v4_f32E4smem"),
            Some("rms_norm_rows_v4_f32")
        );
        // A template's static (its mangled name goes on after the name: I…E).
        assert_eq!(
            owner("_ZZ10fused_loopIfEvPKT_S2_S2_PS0_S3_xifE7red_sum"),
            None
        );
        assert_eq!(owner("_ZZ99shortE1x"), None);
        assert_eq!(owner("_ZN3foo3barE"), None);
        assert_eq!(owner("shared_scratch"), None);
    }

    #[test]
    fn ranges_are_joined_and_clipped() {
        assert_eq!(
            merged(vec![8..16, 0..4, 4..6, 12..20, 30..40], 32),
            vec![0..6, 8..20, 30..32]
        );
        assert_eq!(merged(vec![5..5, 40..50], 32), Vec::<Range<usize>>::new());
    }

    #[test]
    fn a_launch_poisons_its_own_arrays_and_the_common_ones_not_another_entry_s() {
        let layout = Layout {
            len: 100,
            common: vec![0..10, 90..100],
            owned: HashMap::from([
                ("a", std::iter::once(10..30).collect()),
                ("b", std::iter::once(30..60).collect()),
            ]),
        };
        assert_eq!(layout.ranges_for("a"), vec![0..30, 90..100]);
        assert_eq!(layout.ranges_for("b"), vec![0..10, 30..60, 90..100]);
        assert_eq!(layout.ranges_for("c"), vec![0..10, 90..100]);
    }

    #[test]
    fn the_image_s_layout_covers_every_array_of_the_section() {
        let Some((_, Some(layout))) = read_layout() else {
            panic!("the emulator's image has a shared section whose symbols can be read");
        };
        let mut all: Vec<Range<usize>> = layout.common.clone();
        all.extend(layout.owned.values().flatten().cloned());
        let bytes: usize = merged(all, layout.len).iter().map(|r| r.len()).sum();
        // Alignment between arrays is all the section holds besides them.
        assert!(
            bytes <= layout.len && bytes * 10 >= layout.len * 9,
            "{bytes} of {}",
            layout.len
        );
        assert!(
            layout.owned.contains_key("gqa_prefill_d128_f16"),
            "{:?}",
            layout.owned.keys().take(5).collect::<Vec<_>>()
        );
    }
}
