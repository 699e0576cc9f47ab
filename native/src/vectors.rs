//! The part of a PutVectors body that costs: float32 rows as JSON text, and each row's content
//! hash.
//!
//! orjson writes the same text (the shortest that reads back as the same float32, by zmij), but
//! it holds the GIL for the whole body: 11 ms per batch of 500 x 1024, half of all the loader's
//! work, while the event loop, Parquet and the hashing of other bodies wait. This writes the
//! body with the GIL released, into the bytearray Python will send, so a second builder thread
//! runs beside the event loop; and with zmij patched to move digits without calls to memmove
//! and to write straight into the body (vendor/zmij/PATCHED.md), in ~6 ms.
//!
//! The content hash (`s3bulk_hash`, what `vectors sync` compares by) is made here too, where the
//! row's bytes are already at hand: CRC64NVME of the float32 bytes, then of the metadata's
//! canonical text (orjson's, keys sorted, without the hash key), as one CRC. Made in Python it
//! was a dict copy, an orjson dump, two native calls and a limit check per row, under the GIL.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};

/// The shortest text of a float32 is at most 16 characters ("-0.0000010000001", found by
/// printing every finite float32), and a comma follows it.
const WORST_BYTES_PER_VALUE: usize = 17;
/// zmij writes a value as whole blocks, up to this many bytes from where its text starts.
const ZMIJ_BYTES: usize = 24;
/// What a row's JSON may add around its metadata text: `},"metadata":`, the hash key and its
/// value, the closing braces.
const ROW_FRAME_BYTES: usize = 64;
const METADATA_FIELD: &[u8] = b",\"metadata\":";
/// The key the content hash is kept under, as it follows other metadata keys.
const HASH_FIELD: &[u8] = b",\"s3bulk_hash\":\"";

/// `head`, then entry 0, ",", entry 1, ... and `tail`, where entry i is `before[i]` "[" the
/// floats of row i "]}" then its metadata: `metadata[i]` (the JSON text of an object with at
/// least one key, or None), with the row's content hash added under `s3bulk_hash` where
/// `hashed[i]` is 1 (`hashed` empty: no row's). The JSON before each row (its key) is written
/// by the caller, the rows, metadata and hashes here. Returns a bytearray.
///
/// The bytearray is made with room to spare, written once without the GIL, then cut to its
/// length: no copy from a Rust buffer into Python's. A bytearray keeps its allocation when cut
/// by less than half, so malloc hands the same block to the next body; a bytes object, cut by
/// realloc, faulted in 1,370 fresh pages per body here (+1.2 ms of system time).
#[pyfunction]
pub fn put_vectors_body<'py>(
    py: Python<'py>,
    head: &[u8],
    before: Vec<Bound<'py, PyBytes>>,
    rows: &Bound<'py, PyAny>,
    metadata: Vec<Option<Bound<'py, PyBytes>>>,
    hashed: &[u8],
    tail: &[u8],
) -> PyResult<Bound<'py, PyByteArray>> {
    let buffer = PyBuffer::<f32>::get(rows)?;
    let (values, count, dimension) = float_rows(&buffer)?;
    if before.len() != count || metadata.len() != count || !(hashed.is_empty() || hashed.len() == count) {
        return Err(PyValueError::new_err(format!("{count} rows need {count} befores, metadata and hash flags")));
    }
    if let Some(row) = values.chunks_exact(dimension).position(|row| !row.iter().all(|value| value.is_finite())) {
        return Err(PyValueError::new_err(format!("row {row} holds NaN or infinity, which JSON cannot carry")));
    }
    let before: Vec<&[u8]> = before.iter().map(|piece| piece.as_bytes()).collect();
    let texts = metadata_texts(&metadata)?;
    let pieces: usize = before.iter().chain(texts.iter().flatten()).map(|piece| piece.len()).sum();
    let room = head.len() + pieces + count * ROW_FRAME_BYTES + values.len() * WORST_BYTES_PER_VALUE + tail.len() + ZMIJ_BYTES;
    // Safety: a null source makes an uninitialised bytearray of `room` bytes.
    let body = unsafe {
        let object = ffi::PyByteArray_FromStringAndSize(std::ptr::null(), room as ffi::Py_ssize_t);
        Bound::from_owned_ptr_or_err(py, object)?.cast_into_unchecked::<PyByteArray>()
    };
    let target = Target(unsafe { ffi::PyByteArray_AsString(body.as_ptr()) } as *mut u8, room);
    let entries = Entries { values, dimension, before: &before, metadata: &texts, hashed };
    let length = py.detach(move || {
        let target = target;
        // Safety: the new bytearray's storage, which nothing else holds yet.
        let target = unsafe { std::slice::from_raw_parts_mut(target.0, target.1) };
        write_body(target, head, &entries, tail)
    });
    if unsafe { ffi::PyByteArray_Resize(body.as_ptr(), length as ffi::Py_ssize_t) } != 0 {
        return Err(PyErr::fetch(py));
    }
    Ok(body)
}

/// The content hash of each row of `rows` (a C-contiguous (n, dimension) float32 array) with
/// its metadata's canonical text (`metadata[i]`, or None), as `put_vectors_body` writes it: 16
/// hex digits. Computed with the GIL released: what `vectors sync` compares a source with.
#[pyfunction]
pub fn content_hashes(py: Python<'_>, rows: &Bound<'_, PyAny>, metadata: Vec<Option<Bound<'_, PyBytes>>>) -> PyResult<Vec<String>> {
    let buffer = PyBuffer::<f32>::get(rows)?;
    let (values, count, dimension) = float_rows(&buffer)?;
    if metadata.len() != count {
        return Err(PyValueError::new_err(format!("{count} rows need {count} metadata texts")));
    }
    let texts = metadata_texts(&metadata)?;
    let hashes = py.detach(|| {
        values.chunks_exact(dimension).zip(&texts).map(|(row, text)| String::from_utf8(hex(content_hash(row, *text)).to_vec()).expect("hex digits")).collect()
    });
    Ok(hashes)
}

/// The rows of a float32 buffer as (values, rows, dimension): C-contiguous, two dimensions.
fn float_rows(buffer: &PyBuffer<f32>) -> PyResult<(&[f32], usize, usize)> {
    if buffer.dimensions() != 2 || !buffer.is_c_contiguous() || buffer.shape()[1] == 0 {
        return Err(PyValueError::new_err("rows must be a C-contiguous (n, dimension) float32 array"));
    }
    let (count, dimension) = (buffer.shape()[0], buffer.shape()[1]);
    // Safety: `buffer` keeps the array's memory exported, so alive, while it is borrowed.
    let values = unsafe { std::slice::from_raw_parts(buffer.buf_ptr() as *const f32, count * dimension) };
    Ok((values, count, dimension))
}

/// Each row's metadata text, checked to be an object's with a key (the hash is written into it
/// before its closing brace).
fn metadata_texts<'a>(metadata: &'a [Option<Bound<'_, PyBytes>>]) -> PyResult<Vec<Option<&'a [u8]>>> {
    metadata
        .iter()
        .enumerate()
        .map(|(row, text)| match text.as_ref().map(|text| text.as_bytes()) {
            Some(text) if text.len() < 3 || text[0] != b'{' || text[text.len() - 1] != b'}' => {
                Err(PyValueError::new_err(format!("metadata {row} is not the JSON text of an object with keys")))
            }
            text => Ok(text),
        })
        .collect()
}

/// CRC64NVME of a row's float32 bytes (in this machine's order, as numpy holds them) followed
/// by its metadata's canonical text.
fn content_hash(row: &[f32], metadata: Option<&[u8]>) -> u64 {
    // Safety: f32 has no padding; these are the row's own bytes.
    let bytes = unsafe { std::slice::from_raw_parts(row.as_ptr() as *const u8, std::mem::size_of_val(row)) };
    let mut digest = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc64Nvme);
    digest.update(bytes);
    if let Some(text) = metadata {
        digest.update(text);
    }
    digest.finalize()
}

/// A hash as its 16 lowercase hex digits (its bytes big-endian, as S3 writes a CRC).
fn hex(value: u64) -> [u8; 16] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = [0u8; 16];
    for (place, digit) in text.iter_mut().enumerate() {
        *digit = DIGITS[(value >> (60 - 4 * place) & 0xf) as usize];
    }
    text
}

/// The bytearray's storage, handed to the thread that writes it without the GIL.
struct Target(*mut u8, usize);

// Safety: nothing else holds the new bytearray until it is returned.
unsafe impl Send for Target {}

/// What a body's entries are made of.
struct Entries<'a> {
    values: &'a [f32],
    dimension: usize,
    before: &'a [&'a [u8]],
    metadata: &'a [Option<&'a [u8]>],
    hashed: &'a [u8],
}

/// A cursor over the body being written.
struct Cursor<'a> {
    target: &'a mut [u8],
    at: usize,
}

impl Cursor<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.target[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }

    /// A float's text, written by zmij straight into the body, and a comma. zmij writes whole
    /// blocks up to `ZMIJ_BYTES` from where the text starts and reads back up to 17 bytes of
    /// them; the next value overwrites whatever lies past the comma.
    fn put_value(&mut self, value: f32) {
        assert!(self.at + ZMIJ_BYTES <= self.target.len());
        // Safety: finite (checked before the GIL was released), with ZMIJ_BYTES of room, and
        // the bytes zmij reads back are written first. Written, not only read: a page of the
        // body whose first touch was zmij's read was mapped to the zero page, and the write
        // that followed cost a copy-on-write fault and a TLB flush on both cores (+0.5 s of
        // system time per 100,000 x 1024 here).
        unsafe {
            let start = self.target.as_mut_ptr().add(self.at);
            std::ptr::write_unaligned(start.add(8).cast::<[u8; 16]>(), [0; 16]);
            let end = zmij::write_f32_finite(value, start);
            *end = b',';
            self.at += end.offset_from(start) as usize + 1;
        }
    }

    /// The end of a row's entry: its metadata (the hash added where asked) and closing brace.
    fn put_metadata(&mut self, text: Option<&[u8]>, hash: Option<u64>) {
        match (text, hash) {
            (None, None) => {}
            (Some(text), None) => {
                self.put(METADATA_FIELD);
                self.put(text);
            }
            (text, Some(hash)) => {
                self.put(METADATA_FIELD);
                match text {
                    Some(text) => self.put(&text[..text.len() - 1]), // its keys, then the hash's
                    None => self.put(b"{"),
                }
                self.put(if text.is_some() { HASH_FIELD } else { &HASH_FIELD[1..] });
                self.put(&hex(hash));
                self.put(b"\"}");
            }
        }
        self.put(b"}");
    }
}

/// Writes the body into `target` (room for `WORST_BYTES_PER_VALUE` per value, `ROW_FRAME_BYTES`
/// per row and `ZMIJ_BYTES`) and returns its length.
fn write_body(target: &mut [u8], head: &[u8], rows: &Entries, tail: &[u8]) -> usize {
    let mut body = Cursor { target, at: 0 };
    body.put(head);
    for (row, values) in rows.values.chunks_exact(rows.dimension).enumerate() {
        if row > 0 {
            body.put(b",");
        }
        body.put(rows.before[row]);
        body.put(b"[");
        for value in values {
            body.put_value(*value);
        }
        body.at -= 1; // the last value's comma
        body.put(b"]}");
        let text = rows.metadata[row];
        let hash = (rows.hashed.get(row) == Some(&1)).then(|| content_hash(values, text));
        body.put_metadata(text, hash);
    }
    body.put(tail);
    body.at
}

/// A ListVectors page as ListVectors answers it: each vector's key, its data (`{"float32":
/// [...]}`, read here), its metadata (kept as the JSON text it came as), and the token on.
#[derive(serde::Deserialize)]
struct Page<'a> {
    #[serde(borrow)] // every page has it: a 200 without it (an error's body) is no page
    vectors: Vec<Listed<'a>>,
    #[serde(rename = "nextToken", default)]
    next_token: Option<String>,
}

#[derive(serde::Deserialize)]
struct Listed<'a> {
    #[serde(borrow)]
    key: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    data: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    metadata: Option<&'a serde_json::value::RawValue>,
}

/// What a page holds, read without the GIL.
#[derive(Debug)]
struct Rows {
    keys: Vec<String>,
    values: Vec<f32>,
    with_data: bool,
    metadata: Vec<Option<String>>,
    next_token: Option<String>,
}

/// (keys, the float32 bytes or None, each vector's metadata text or None, the token on or None)
type ListedPage<'py> = (Vec<String>, Option<Bound<'py, PyBytes>>, Vec<Option<String>>, Option<String>);

/// One ListVectors answer (`reply`, its JSON) as (keys, the vectors' float32 bytes, row after
/// row, or None when the page carries no data, each vector's metadata as JSON text or None,
/// the token that goes on or None), read with the GIL released. With orjson and numpy the same
/// page of 1,000 x 1024 cost ~96 ms of parsing into Python floats and 38 ms more to float32,
/// all under the GIL: what bounded an export. Each value is read by Rust's own float32 parser,
/// correctly rounded from its text, as the service wrote it from a float32.
#[pyfunction]
pub fn list_vectors_page<'py>(py: Python<'py>, reply: &[u8], dimension: usize) -> PyResult<ListedPage<'py>> {
    let rows = py.detach(|| read_page(reply, dimension)).map_err(PyValueError::new_err)?;
    let data = if rows.with_data {
        // Safety: f32 has no padding; the bytes are the values' own, in native order (numpy reads
        // them back as float32 on this machine).
        let bytes = unsafe { std::slice::from_raw_parts(rows.values.as_ptr() as *const u8, rows.values.len() * 4) };
        Some(PyBytes::new(py, bytes))
    } else {
        None
    };
    Ok((rows.keys, data, rows.metadata, rows.next_token))
}

fn read_page(reply: &[u8], dimension: usize) -> Result<Rows, String> {
    let page: Page = serde_json::from_slice(reply).map_err(|error| format!("a ListVectors answer that is not its JSON: {error}"))?;
    let with_data = page.vectors.iter().any(|vector| vector.data.is_some());
    let mut rows = Rows {
        keys: Vec::with_capacity(page.vectors.len()),
        values: Vec::with_capacity(if with_data { page.vectors.len() * dimension } else { 0 }),
        with_data,
        metadata: Vec::with_capacity(page.vectors.len()),
        next_token: page.next_token.filter(|token| !token.is_empty()),
    };
    for vector in page.vectors {
        if with_data {
            let data = vector.data.ok_or_else(|| format!("vector {:?} came without its data", vector.key))?;
            let read = read_floats(data.get(), &mut rows.values)?;
            if read != dimension {
                return Err(format!("vector {:?} holds {read} values, not the index's {dimension}", vector.key));
            }
        }
        rows.metadata.push(vector.metadata.map(|text| text.get().to_owned()).filter(|text| text != "null"));
        rows.keys.push(vector.key.into_owned());
    }
    Ok(rows)
}

/// The values of `{"float32": [v, v, ...]}`, appended to `values`; returns how many.
fn read_floats(data: &str, values: &mut Vec<f32>) -> Result<usize, String> {
    let bad = || format!("vector data that is not {{\"float32\": [numbers]}}: {}", &data[..data.len().min(80)]);
    let start = data.find("\"float32\"").ok_or_else(bad)?;
    let open = start + data[start..].find('[').ok_or_else(bad)?;
    let close = open + data[open..].find(']').ok_or_else(bad)?;
    let inside = data[open + 1..close].trim();
    if inside.is_empty() {
        return Ok(0);
    }
    let before = values.len();
    for text in inside.split(',') {
        values.push(text.trim().parse::<f32>().map_err(|_| bad())?);
    }
    Ok(values.len() - before)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(values: &[f32], dimension: usize) -> String {
        written(values, dimension, &vec![None; values.len() / dimension], &[])
    }

    fn written(values: &[f32], dimension: usize, metadata: &[Option<&[u8]>], hashed: &[u8]) -> String {
        let count = values.len() / dimension;
        let before: Vec<Vec<u8>> = (0..count).map(|row| format!("{{\"key\":\"{row}\",\"data\":{{\"float32\":").into_bytes()).collect();
        let before: Vec<&[u8]> = before.iter().map(Vec::as_slice).collect();
        let mut target = vec![0u8; 256 * count + values.len() * WORST_BYTES_PER_VALUE + ZMIJ_BYTES + 32];
        let entries = Entries { values, dimension, before: &before, metadata, hashed };
        let length = write_body(&mut target, b"{\"vectors\":[", &entries, b"]}");
        String::from_utf8(target[..length].to_vec()).unwrap()
    }

    #[test]
    fn rows_are_written_as_json_arrays_of_the_shortest_round_trip_text() {
        let text = body(&[0.5, -1.25, 3.0, 0.1, 1.0e-7, -0.0], 3);
        assert_eq!(text, r#"{"vectors":[{"key":"0","data":{"float32":[0.5,-1.25,3.0]}},{"key":"1","data":{"float32":[0.1,1e-7,-0.0]}}]}"#);
    }

    #[test]
    fn metadata_and_hashes_are_written_into_each_entry() {
        let values = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let genre: &[u8] = br#"{"genre":"x"}"#;
        let text = written(&values, 2, &[Some(genre), None, Some(genre)], &[1, 1, 0]);
        let first = hex(content_hash(&values[0..2], Some(genre)));
        let second = hex(content_hash(&values[2..4], None));
        let (first, second) = (std::str::from_utf8(&first).unwrap(), std::str::from_utf8(&second).unwrap());
        assert_eq!(
            text,
            format!(
                r#"{{"vectors":[{{"key":"0","data":{{"float32":[1.0,2.0]}},"metadata":{{"genre":"x","s3bulk_hash":"{first}"}}}},{{"key":"1","data":{{"float32":[3.0,4.0]}},"metadata":{{"s3bulk_hash":"{second}"}}}},{{"key":"2","data":{{"float32":[5.0,6.0]}},"metadata":{{"genre":"x"}}}}]}}"#
            )
        );
        // one CRC over the row's bytes and then the text: what crc_combine of the two gives
        let mut whole: Vec<u8> = values[0..2].iter().flat_map(|value| value.to_ne_bytes()).collect();
        whole.extend_from_slice(genre);
        assert_eq!(content_hash(&values[0..2], Some(genre)), crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, &whole));
        assert_eq!(&hex(0x0123_4567_89ab_cdef), b"0123456789abcdef");
    }

    #[test]
    fn a_page_is_read_into_keys_values_raw_metadata_and_its_token() {
        let reply = br#"{"vectors":[{"key":"a\u00e9","data":{"float32":[0.1, -2.5e-7,3]},"metadata":{"g":["x",1]}},
            {"key":"b","data":{"float32":[1,2,3]}}],"nextToken":"t1"}"#;
        let rows = read_page(reply, 3).unwrap();
        assert_eq!(rows.keys, vec!["a\u{e9}", "b"]);
        assert_eq!(rows.values, vec![0.1f32, -2.5e-7, 3.0, 1.0, 2.0, 3.0]);
        assert_eq!(rows.metadata, vec![Some(r#"{"g":["x",1]}"#.to_owned()), None]);
        assert_eq!(rows.next_token.as_deref(), Some("t1"));
        let keys_only = read_page(br#"{"vectors":[{"key":"a"}],"nextToken":""}"#, 3).unwrap();
        assert!(!keys_only.with_data && keys_only.next_token.is_none());
        assert!(read_page(br#"{"vectors":[{"key":"a","data":{"float32":[1,2]}}]}"#, 3).unwrap_err().contains("2 values"));
        assert!(read_page(br#"{"vectors":[{"key":"a","data":{"float32":[1,"x",2]}}]}"#, 3).is_err());
        assert!(read_page(br#"{"__type":"InternalServerException","message":"no"}"#, 3).is_err());
    }

    #[test]
    fn every_value_reads_back_as_the_same_float32() {
        let values: Vec<f32> = (0..4096).map(|n| f32::from_bits(0x3000_0000u32.wrapping_add(n * 0x0003_1337))).collect();
        let text = body(&values, 1024);
        let read: Vec<f32> = text
            .split("\"float32\":[")
            .skip(1)
            .flat_map(|row| row.split(']').next().unwrap().split(',').map(|value| value.parse::<f32>().unwrap()).collect::<Vec<_>>())
            .collect();
        assert_eq!(read.iter().map(|value| value.to_bits()).collect::<Vec<_>>(), values.iter().map(|value| value.to_bits()).collect::<Vec<_>>());
    }
}
