//! The part of a PutVectors body that costs: float32 rows as JSON text.
//!
//! orjson writes the same text (the shortest that reads back as the same float32, by zmij), but
//! it holds the GIL for the whole body: 11 ms per batch of 500 x 1024, half of all the loader's
//! work, while the event loop, Parquet and the hashing of other bodies wait. This writes the
//! body with the GIL released, into the bytearray Python will send, so a second builder thread
//! runs beside the event loop; and with zmij patched to move digits without calls to memmove
//! (vendor/zmij/PATCHED.md), in ~7 ms.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};

/// The shortest text of a float32 is at most 16 characters ("-0.0000010000001", found by
/// printing every finite float32), and a comma follows it.
const WORST_BYTES_PER_VALUE: usize = 17;
/// Each value is copied as one fixed block of this many bytes (a store, not a call to memcpy).
const BLOCK: usize = 16;

/// `head`, then entry 0, ",", entry 1, ... and `tail`, where entry i is
/// `before[i]` "[" the floats of row i "]" `after[i]`: the JSON around the rows (keys,
/// metadata) is written by the caller, the rows here. Returns a bytearray.
///
/// The bytearray is made with room to spare, written once without the GIL, then cut to its
/// length: no copy from a Rust buffer into Python's. A bytearray keeps its allocation when cut
/// by less than half, so malloc hands the same block to the next body; a bytes object, cut by
/// realloc, faulted in 1,370 fresh pages per body here (+1.2 ms of system time).
#[pyfunction]
fn put_vectors_body<'py>(
    py: Python<'py>,
    head: &[u8],
    before: Vec<Bound<'py, PyBytes>>,
    rows: &Bound<'py, PyAny>,
    after: Vec<Bound<'py, PyBytes>>,
    tail: &[u8],
) -> PyResult<Bound<'py, PyByteArray>> {
    let buffer = PyBuffer::<f32>::get(rows)?;
    if buffer.dimensions() != 2 || !buffer.is_c_contiguous() || buffer.shape()[1] == 0 {
        return Err(PyValueError::new_err("rows must be a C-contiguous (n, dimension) float32 array"));
    }
    let (count, dimension) = (buffer.shape()[0], buffer.shape()[1]);
    if before.len() != count || after.len() != count {
        return Err(PyValueError::new_err(format!("{count} rows need {count} befores and afters")));
    }
    // Safety: `buffer` keeps the array's memory exported, so alive, until it drops at the end.
    let values: &[f32] = unsafe { std::slice::from_raw_parts(buffer.buf_ptr() as *const f32, count * dimension) };
    if let Some(row) = values.chunks_exact(dimension).position(|row| !row.iter().all(|value| value.is_finite())) {
        return Err(PyValueError::new_err(format!("row {row} holds NaN or infinity, which JSON cannot carry")));
    }
    let before: Vec<&[u8]> = before.iter().map(|piece| piece.as_bytes()).collect();
    let after: Vec<&[u8]> = after.iter().map(|piece| piece.as_bytes()).collect();
    let pieces: usize = before.iter().chain(&after).map(|piece| piece.len() + 3).sum();
    let room = head.len() + pieces + values.len() * WORST_BYTES_PER_VALUE + tail.len() + BLOCK;
    // Safety: a null source makes an uninitialised bytearray of `room` bytes.
    let body = unsafe {
        let object = ffi::PyByteArray_FromStringAndSize(std::ptr::null(), room as ffi::Py_ssize_t);
        Bound::from_owned_ptr_or_err(py, object)?.cast_into_unchecked::<PyByteArray>()
    };
    let target = Target(unsafe { ffi::PyByteArray_AsString(body.as_ptr()) } as *mut u8, room);
    let length = py.detach(move || {
        let target = target;
        // Safety: the new bytearray's storage, which nothing else holds yet.
        let target = unsafe { std::slice::from_raw_parts_mut(target.0, target.1) };
        write_body(target, head, &before, values, dimension, &after, tail)
    });
    if unsafe { ffi::PyByteArray_Resize(body.as_ptr(), length as ffi::Py_ssize_t) } != 0 {
        return Err(PyErr::fetch(py));
    }
    Ok(body)
}

/// The bytearray's storage, handed to the thread that writes it without the GIL.
struct Target(*mut u8, usize);

// Safety: nothing else holds the new bytearray until it is returned.
unsafe impl Send for Target {}

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

    /// A float's text and a comma. The text is copied as one fixed block from the formatter's
    /// buffer, and the next value overwrites whatever lies past the comma.
    fn put_value(&mut self, printed: &[u8]) {
        let end = self.at + printed.len();
        // Safety: `printed` starts zmij's 24-byte buffer, which our zmij zeroes when made.
        let block = unsafe { std::ptr::read_unaligned(printed.as_ptr() as *const [u8; BLOCK]) };
        self.target[self.at..self.at + BLOCK].copy_from_slice(&block);
        self.target[end] = b',';
        self.at = end + 1;
    }
}

/// Writes the body into `target` (room for `WORST_BYTES_PER_VALUE` per value and a `BLOCK`)
/// and returns its length.
fn write_body(
    target: &mut [u8],
    head: &[u8],
    before: &[&[u8]],
    values: &[f32],
    dimension: usize,
    after: &[&[u8]],
    tail: &[u8],
) -> usize {
    let mut body = Cursor { target, at: 0 };
    let mut floats = zmij::Buffer::new();
    body.put(head);
    for (row, values) in values.chunks_exact(dimension).enumerate() {
        if row > 0 {
            body.put(b",");
        }
        body.put(before[row]);
        body.put(b"[");
        for value in values {
            body.put_value(floats.format_finite(*value).as_bytes());
        }
        body.at -= 1; // the last value's comma
        body.put(b"]");
        body.put(after[row]);
    }
    body.put(tail);
    body.at
}

#[pymodule]
fn s3bulk_native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(put_vectors_body, module)?)
}
