//! A ListObjectsV2 page read into columns, in one pass over its bytes.
//!
//! Python read a page with one regular expression and decoded each field for the whole page at
//! once (`s3xml._parse_regular_page`): ~11 µs per key on a loaded machine, five times what the
//! planner then does with the key, and the bound of a sync of 10^7 keys planned from listings.
//! This reads the same form the same way: a page is taken here only where every `<Contents>`
//! is in the element order S3 documents and no field needs more than its bytes (no `&`, no
//! newline, UTF-8, a size that fits 64 bits); any other page is left (None) to the Python
//! parser, which reads it as before. So keys are read one way, whichever path reads them: the
//! decisions on what a key holds (URL encoding, U+FFFD, references) stay in Python, taken on
//! the columns given here.

use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

/// A page's columns: keys, sizes, LastModified texts, ETags (quotes taken off), storage classes,
/// checksum algorithms, checksum types, then EncodingType=url, IsTruncated and the token.
type Columns<'py> = (
    Bound<'py, PyList>,
    Vec<u64>,
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    bool,
    bool,
    Option<String>,
);

/// One `<Contents>` as byte ranges of the page.
struct Entry<'a> {
    key: &'a [u8],
    modified: &'a [u8],
    etag: &'a [u8],
    checksums: &'a [u8],
    size: u64,
    class: &'a [u8],
}

/// The page's columns, or None where the Python parser must read it (see the module's note).
#[pyfunction]
pub fn list_page_columns<'py>(py: Python<'py>, body: &[u8]) -> PyResult<Option<Columns<'py>>> {
    let Some((entries, fields)) = py.detach(|| read_page(body)) else {
        return Ok(None);
    };
    let mut keys = Vec::with_capacity(entries.len());
    let mut sizes = Vec::with_capacity(entries.len());
    let mut etags = Vec::with_capacity(entries.len());
    let (mut modified, mut classes, mut algorithms, mut types) = (Shared::new(py), Shared::new(py), Shared::new(py), Shared::new(py));
    for entry in &entries {
        keys.push(text(py, entry.key));
        sizes.push(entry.size);
        etags.push(text(py, &unquoted(entry.etag)));
        modified.push(entry.modified);
        classes.push(entry.class);
        algorithms.push(element(entry.checksums, b"ChecksumAlgorithm"));
        types.push(element(entry.checksums, b"ChecksumType"));
    }
    Ok(Some((
        PyList::new(py, keys)?,
        sizes,
        modified.list()?,
        PyList::new(py, etags)?,
        classes.list()?,
        algorithms.list()?,
        types.list()?,
        fields.url,
        fields.truncated,
        fields.token.map(|token| String::from_utf8_lossy(&token).into_owned()),
    )))
}

/// Bytes `read_page` found to be UTF-8, as a Python string.
fn text<'py>(py: Python<'py>, bytes: &[u8]) -> Bound<'py, PyString> {
    PyString::new(py, std::str::from_utf8(bytes).unwrap_or_default())
}

/// A column whose entries mostly repeat the one before (a page's times, classes, checksum
/// fields): one Python string for each run.
struct Shared<'py, 'b> {
    py: Python<'py>,
    last: Option<(&'b [u8], Bound<'py, PyString>)>,
    items: Vec<Bound<'py, PyString>>,
}

impl<'py, 'b> Shared<'py, 'b> {
    fn new(py: Python<'py>) -> Self {
        Self { py, last: None, items: Vec::with_capacity(1000) }
    }

    fn push(&mut self, bytes: &'b [u8]) {
        let made = match &self.last {
            Some((seen, made)) if *seen == bytes => made.clone(),
            _ => {
                let made = text(self.py, bytes);
                self.last = Some((bytes, made.clone()));
                made
            }
        };
        self.items.push(made);
    }

    fn list(self) -> PyResult<Bound<'py, PyList>> {
        PyList::new(self.py, self.items)
    }
}

/// EncodingType, IsTruncated and NextContinuationToken, as the last of each the page names
/// outside its entries says.
#[derive(Default)]
struct Fields {
    url: bool,
    truncated: bool,
    token: Option<Vec<u8>>,
}

fn read_page(body: &[u8]) -> Option<(Vec<Entry<'_>>, Fields)> {
    if find(body, b"<CommonPrefixes>", 0).is_some() || find(body, b"<![CDATA[", 0).is_some() {
        return None;
    }
    let mut entries = Vec::with_capacity(1000);
    let mut at = 0;
    let mut first = None;
    while let Some(start) = find(body, b"<Contents>", at) {
        first.get_or_insert(start);
        let (entry, after) = contents(body, start)?;
        if !plain(entry.key) || !plain(entry.modified) || !plain(entry.class) || !plain(entry.checksums) {
            return None;
        }
        if std::str::from_utf8(entry.key).is_err() || std::str::from_utf8(entry.modified).is_err() || std::str::from_utf8(entry.class).is_err() {
            return None;
        }
        let etag = unquoted(entry.etag);
        if etag.contains(&b'&') || etag.contains(&b'\n') || std::str::from_utf8(&etag).is_err() {
            return None;
        }
        for name in [&b"ChecksumAlgorithm"[..], b"ChecksumType"] {
            if std::str::from_utf8(element(entry.checksums, name)).is_err() {
                return None;
            }
        }
        entries.push(entry);
        at = after;
    }
    // the fields outside the entries, as the Python parser reads them: the text before the first
    // `<Contents>`, then from the last `</Contents>` on (without one, the last byte)
    let mut outside = Vec::new();
    match first {
        Some(first) => {
            outside.extend_from_slice(&body[..first]);
            match rfind(body, b"</Contents>") {
                Some(closing) => outside.extend_from_slice(&body[closing..]),
                None => outside.extend_from_slice(&body[body.len() - 1..]),
            }
        }
        None => outside.extend_from_slice(body),
    }
    let (url, truncated, token) = outside_fields(&outside)?;
    Some((entries, Fields { url, truncated, token: token.map(|(start, stop)| outside[start..stop].to_vec()) }))
}

/// Whether a field reads as its bytes: no reference to resolve, no newline.
fn plain(field: &[u8]) -> bool {
    !field.iter().any(|&byte| byte == b'&' || byte == b'\n')
}

/// An ETag without `&#34;`, `&quot;` and `"` (as the Python parser's fast path takes them off).
fn unquoted(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut at = 0;
    while at < raw.len() {
        if raw[at..].starts_with(b"&#34;") {
            at += 5;
        } else if raw[at..].starts_with(b"&quot;") {
            at += 6;
        } else if raw[at] == b'"' {
            at += 1;
        } else {
            out.push(raw[at]);
            at += 1;
        }
    }
    out
}

/// `<Contents><Key>…</Key><LastModified>…</LastModified><ETag>…</ETag>(<Checksum…>…</Checksum…>)*
/// <Size>digits</Size>(<StorageClass>…</StorageClass>)?` at `start`: the entry and where it ends.
fn contents(body: &[u8], start: usize) -> Option<(Entry<'_>, usize)> {
    let mut at = start + b"<Contents>".len();
    let key = text_element(body, &mut at, b"Key")?;
    let modified = text_element(body, &mut at, b"LastModified")?;
    let etag = text_element(body, &mut at, b"ETag")?;
    let checksums_start = at;
    while body[at..].starts_with(b"<Checksum") {
        let mut probe = at + b"<Checksum".len();
        if !word_then_close(body, &mut probe) {
            break;
        }
        let text_end = probe + body[probe..].iter().position(|&byte| byte == b'<').unwrap_or(body.len() - probe);
        let mut close = text_end;
        if !body[close..].starts_with(b"</Checksum") {
            break;
        }
        close += b"</Checksum".len();
        if !word_then_close(body, &mut close) {
            break;
        }
        at = close;
    }
    let checksums = &body[checksums_start..at];
    let size_text = text_element(body, &mut at, b"Size")?;
    if size_text.is_empty() || !size_text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let size = std::str::from_utf8(size_text).ok()?.parse::<u64>().ok()?;
    let mut class: &[u8] = b"";
    let mut probe = at;
    if let Some(found) = text_element(body, &mut probe, b"StorageClass") {
        class = found;
        at = probe;
    }
    Some((Entry { key, modified, etag, checksums, size, class }, at))
}

/// `\w+>` at `at` (the regular expression's `\w`, of bytes: ASCII letters, digits, `_`).
fn word_then_close(body: &[u8], at: &mut usize) -> bool {
    let start = *at;
    while *at < body.len() && (body[*at].is_ascii_alphanumeric() || body[*at] == b'_') {
        *at += 1;
    }
    if *at == start || *at >= body.len() || body[*at] != b'>' {
        return false;
    }
    *at += 1;
    true
}

/// `<name>text</name>` at `at`, text holding no `<`: the text, `at` moved past the element.
fn text_element<'a>(body: &'a [u8], at: &mut usize, name: &[u8]) -> Option<&'a [u8]> {
    let rest = &body[*at..];
    if rest.len() < name.len() + 2 || rest[0] != b'<' || &rest[1..=name.len()] != name || rest[name.len() + 1] != b'>' {
        return None;
    }
    let start = *at + name.len() + 2;
    let stop = start + body[start..].iter().position(|&byte| byte == b'<')?;
    let rest = &body[stop..];
    if rest.len() < name.len() + 3 || &rest[..2] != b"</" || &rest[2..2 + name.len()] != name || rest[2 + name.len()] != b'>' {
        return None;
    }
    *at = stop + name.len() + 3;
    Some(&body[start..stop])
}

/// The text of the first `<name>text</name>` in an entry's checksum elements ("" for none).
fn element<'a>(checksums: &'a [u8], name: &[u8]) -> &'a [u8] {
    let mut at = 0;
    while let Some(start) = find(checksums, b"<", at) {
        let mut probe = start;
        if let Some(found) = text_element(checksums, &mut probe, name) {
            return found;
        }
        at = start + 1;
    }
    b""
}

/// (EncodingType is url, IsTruncated is true, the token's range) from the text outside the
/// entries: `<(EncodingType|IsTruncated|NextContinuationToken)>([^<]*)</`, the last of each.
/// None where a value is not UTF-8 or the token holds a reference.
#[allow(clippy::type_complexity)]
fn outside_fields(outside: &[u8]) -> Option<(bool, bool, Option<(usize, usize)>)> {
    let (mut url, mut truncated, mut token) = (false, false, None);
    let mut at = 0;
    while let Some(start) = find(outside, b"<", at) {
        at = start + 1;
        for name in [&b"EncodingType"[..], b"IsTruncated", b"NextContinuationToken"] {
            let rest = &outside[start + 1..];
            if !(rest.starts_with(name) && rest.get(name.len()) == Some(&b'>')) {
                continue;
            }
            let value_start = start + 1 + name.len() + 1;
            let Some(length) = outside[value_start..].iter().position(|&byte| byte == b'<') else {
                continue;
            };
            let value_end = value_start + length;
            if outside.get(value_end + 1) != Some(&b'/') {
                continue;
            }
            let value = &outside[value_start..value_end];
            std::str::from_utf8(value).ok()?;
            match name {
                b"EncodingType" => url = value.eq_ignore_ascii_case(b"url"),
                b"IsTruncated" => truncated = value.eq_ignore_ascii_case(b"true"),
                _ => {
                    if value.contains(&b'&') {
                        return None;
                    }
                    token = Some((value_start, value_end));
                }
            }
            at = value_end + 2;
        }
    }
    Some((url, truncated, token))
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > haystack.len() {
        return None;
    }
    haystack[from..].windows(needle.len()).position(|window| window == needle).map(|at| at + from)
}

fn rfind(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|window| window == needle)
}
