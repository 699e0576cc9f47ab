//! The part of a PutVectors body that costs: float32 rows as JSON text.
//!
//! orjson writes the same text (the shortest that reads back as the same float32, by zmij), but
//! it holds the GIL for the whole body: 11 ms per batch of 500 x 1024, half of all the loader's
//! work, while the event loop, Parquet and the hashing of other bodies wait. This writes the
//! body with the GIL released, into the bytearray Python will send, so a second builder thread
//! runs beside the event loop; and with zmij patched to move digits without calls to memmove
//! and to write straight into the body (vendor/zmij/PATCHED.md), in ~6 ms.

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

/// `head`, then entry 0, ",", entry 1, ... and `tail`, where entry i is
/// `before[i]` "[" the floats of row i "]" `after[i]`: the JSON around the rows (keys,
/// metadata) is written by the caller, the rows here. Returns a bytearray.
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
    let room = head.len() + pieces + values.len() * WORST_BYTES_PER_VALUE + tail.len() + ZMIJ_BYTES;
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
}

/// Writes the body into `target` (room for `WORST_BYTES_PER_VALUE` per value and `ZMIJ_BYTES`)
/// and returns its length.
fn write_body(target: &mut [u8], head: &[u8], before: &[&[u8]], values: &[f32], dimension: usize, after: &[&[u8]], tail: &[u8]) -> usize {
    let mut body = Cursor { target, at: 0 };
    body.put(head);
    for (row, values) in values.chunks_exact(dimension).enumerate() {
        if row > 0 {
            body.put(b",");
        }
        body.put(before[row]);
        body.put(b"[");
        for value in values {
            body.put_value(*value);
        }
        body.at -= 1; // the last value's comma
        body.put(b"]");
        body.put(after[row]);
    }
    body.put(tail);
    body.at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(values: &[f32], dimension: usize) -> String {
        let rows = values.len() / dimension;
        let before: Vec<Vec<u8>> = (0..rows).map(|row| format!("{{\"key\":\"{row}\",\"data\":{{\"float32\":").into_bytes()).collect();
        let before: Vec<&[u8]> = before.iter().map(Vec::as_slice).collect();
        let after: Vec<&[u8]> = vec![b"}}".as_slice(); rows];
        let mut target = vec![0u8; 64 * rows + values.len() * WORST_BYTES_PER_VALUE + ZMIJ_BYTES + 32];
        let length = write_body(&mut target, b"{\"vectors\":[", &before, values, dimension, &after, b"]}");
        String::from_utf8(target[..length].to_vec()).unwrap()
    }

    #[test]
    fn rows_are_written_as_json_arrays_of_the_shortest_round_trip_text() {
        let text = body(&[0.5, -1.25, 3.0, 0.1, 1.0e-7, -0.0], 3);
        assert_eq!(text, r#"{"vectors":[{"key":"0","data":{"float32":[0.5,-1.25,3.0]}},{"key":"1","data":{"float32":[0.1,1e-7,-0.0]}}]}"#);
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
