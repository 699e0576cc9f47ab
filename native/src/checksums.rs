//! The checksums S3 keeps with an object (`x-amz-checksum-*`): CRC64NVME, CRC32C, CRC32,
//! SHA-256 and SHA-1.
//!
//! Since December 2024 S3 stores a full-object CRC64NVME with every new object, and the AWS SDKs
//! send one with every upload: the service refuses a body whose bytes do not match it, and the
//! reader checks the same value. A CRC runs at tens of GB/s per core with SIMD (crc-fast), where
//! the SHA-256 SigV4 signs a payload with costs ~0.5 ms per MiB on both sides of the wire; and
//! the CRCs of a multipart upload's parts combine into the whole object's (`crc_combine`), so a
//! multipart object carries one checksum that does not depend on how it was cut.
//!
//! Values travel as S3 writes them: the digest's bytes, big-endian for a CRC, in base64.

use std::fs::File;
use std::io::Read;
use std::path::PathBuf;

use aws_lc_rs::digest::{Context, SHA1_FOR_LEGACY_USE_ONLY, SHA256};
use crc_fast::CrcAlgorithm;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// One of S3's checksum algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Crc64Nvme,
    Crc32c,
    Crc32,
    Sha256,
    Sha1,
}

impl Algorithm {
    /// Every one, in the order a reader looks for their headers.
    pub const ALL: [Algorithm; 5] = [Self::Crc64Nvme, Self::Crc32c, Self::Crc32, Self::Sha256, Self::Sha1];

    /// The algorithm S3 calls `name` (CRC64NVME, CRC32C, CRC32, SHA256, SHA1), in any case.
    pub fn named(name: &str) -> PyResult<Self> {
        match name.to_ascii_uppercase().as_str() {
            "CRC64NVME" => Ok(Self::Crc64Nvme),
            "CRC32C" => Ok(Self::Crc32c),
            "CRC32" => Ok(Self::Crc32),
            "SHA256" => Ok(Self::Sha256),
            "SHA1" => Ok(Self::Sha1),
            _ => Err(PyValueError::new_err(format!("no such checksum algorithm: {name}"))),
        }
    }

    /// What S3 calls it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Crc64Nvme => "CRC64NVME",
            Self::Crc32c => "CRC32C",
            Self::Crc32 => "CRC32",
            Self::Sha256 => "SHA256",
            Self::Sha1 => "SHA1",
        }
    }

    fn crc(self) -> Option<CrcAlgorithm> {
        match self {
            Self::Crc64Nvme => Some(CrcAlgorithm::Crc64Nvme),
            Self::Crc32c => Some(CrcAlgorithm::Crc32Iscsi),
            Self::Crc32 => Some(CrcAlgorithm::Crc32IsoHdlc),
            Self::Sha256 | Self::Sha1 => None,
        }
    }

    /// The header a request carries the value in.
    pub fn header(self) -> &'static str {
        match self {
            Self::Crc64Nvme => "x-amz-checksum-crc64nvme",
            Self::Crc32c => "x-amz-checksum-crc32c",
            Self::Crc32 => "x-amz-checksum-crc32",
            Self::Sha256 => "x-amz-checksum-sha256",
            Self::Sha1 => "x-amz-checksum-sha1",
        }
    }

    /// How many bytes a value has.
    pub fn width(self) -> usize {
        match self {
            Self::Crc64Nvme => 8,
            Self::Crc32c | Self::Crc32 => 4,
            Self::Sha256 => 32,
            Self::Sha1 => 20,
        }
    }
}

/// A checksum being computed, a chunk at a time.
pub enum Hasher {
    Crc(Algorithm, Box<crc_fast::Digest>),
    Sha(Context),
}

impl Hasher {
    pub fn new(algorithm: Algorithm) -> Self {
        match (algorithm.crc(), algorithm) {
            (Some(crc), _) => Self::Crc(algorithm, Box::new(crc_fast::Digest::new(crc))),
            (None, Algorithm::Sha256) => Self::Sha(Context::new(&SHA256)),
            (None, _) => Self::Sha(Context::new(&SHA1_FOR_LEGACY_USE_ONLY)),
        }
    }

    pub fn update(&mut self, data: &[u8]) {
        match self {
            Self::Crc(_, digest) => digest.update(data),
            Self::Sha(context) => context.update(data),
        }
    }

    /// The value, as S3 keeps it (a CRC's bytes big-endian).
    pub fn finish(self) -> Vec<u8> {
        match self {
            Self::Crc(algorithm, digest) => crc_bytes(algorithm, digest.finalize()),
            Self::Sha(context) => context.finish().as_ref().to_vec(),
        }
    }
}

fn crc_bytes(algorithm: Algorithm, value: u64) -> Vec<u8> {
    value.to_be_bytes()[8 - algorithm.width()..].to_vec()
}

fn crc_value(algorithm: Algorithm, bytes: &[u8]) -> PyResult<u64> {
    if bytes.len() != algorithm.width() {
        return Err(PyValueError::new_err(format!("a {algorithm:?} value has {} bytes, not {}", algorithm.width(), bytes.len())));
    }
    Ok(bytes.iter().fold(0u64, |value, byte| value << 8 | u64::from(*byte)))
}

/// Where a buffer's bytes are, handed to the thread that hashes them without the GIL.
struct Span(*const u8, usize);

// Safety: the span points into a buffer that `checksum` keeps exported until it returns.
unsafe impl Send for Span {}

/// The checksum `algorithm` (CRC64NVME, CRC32C, CRC32, SHA256, SHA1) of `data` (any
/// C-contiguous buffer of bytes), as S3 keeps it, computed with the GIL released.
#[pyfunction]
pub fn checksum<'py>(py: Python<'py>, algorithm: &str, data: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let algorithm = Algorithm::named(algorithm)?;
    let buffer = PyBuffer::<u8>::get(&data)?;
    if !buffer.is_c_contiguous() {
        return Err(PyValueError::new_err("the buffer is not contiguous"));
    }
    let span = Span(buffer.buf_ptr() as *const u8, buffer.len_bytes());
    let value = py.detach(move || {
        let span = span;
        // Safety: the span is the memory of `buffer`, alive and exported until this returns.
        let bytes = unsafe { std::slice::from_raw_parts(span.0, span.1) };
        let mut hasher = Hasher::new(algorithm);
        hasher.update(bytes);
        hasher.finish()
    });
    drop(buffer);
    Ok(PyBytes::new(py, &value))
}

/// The checksum `algorithm` of the file at `path`, read a MiB at a time with the GIL released
/// (a download checked against the full-object checksum the service keeps). OSError when the
/// file cannot be read.
#[pyfunction]
pub fn checksum_file<'py>(py: Python<'py>, algorithm: &str, path: PathBuf) -> PyResult<Bound<'py, PyBytes>> {
    let algorithm = Algorithm::named(algorithm)?;
    let value = py.detach(move || -> std::io::Result<Vec<u8>> {
        let mut file = File::open(&path)?;
        let (mut hasher, mut buffer) = (Hasher::new(algorithm), vec![0u8; 1 << 20]);
        loop {
            match file.read(&mut buffer)? {
                0 => return Ok(hasher.finish()),
                read => hasher.update(&buffer[..read]),
            }
        }
    })?;
    Ok(PyBytes::new(py, &value))
}

/// The checksum `algorithm` of each part of the file at `path`, the parts of `sizes` one after
/// the other from its start, read with the GIL released: a multipart object's composite
/// checksum ("…-N") is the checksum of these. OSError when the file cannot be read or is
/// shorter than the parts.
#[pyfunction]
pub fn checksum_file_parts<'py>(py: Python<'py>, algorithm: &str, path: PathBuf, sizes: Vec<u64>) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let algorithm = Algorithm::named(algorithm)?;
    let values = py.detach(move || -> std::io::Result<Vec<Vec<u8>>> {
        let mut file = File::open(&path)?;
        let mut buffer = vec![0u8; 1 << 20];
        let mut values = Vec::with_capacity(sizes.len());
        for size in sizes {
            let (mut hasher, mut left) = (Hasher::new(algorithm), size);
            while left > 0 {
                let chunk = &mut buffer[..usize::try_from(left).unwrap_or(usize::MAX).min(1 << 20)];
                file.read_exact(chunk)?;
                hasher.update(chunk);
                left -= chunk.len() as u64;
            }
            values.push(hasher.finish());
        }
        Ok(values)
    })?;
    Ok(values.iter().map(|value| PyBytes::new(py, value)).collect())
}

/// The CRC of two byte strings one after the other, from the CRC of each and the length of
/// the second: a multipart object's full-object checksum from its parts'. ValueError for an
/// algorithm that is no CRC (a SHA does not combine) or a value of the wrong width.
#[pyfunction]
pub fn crc_combine<'py>(py: Python<'py>, algorithm: &str, first: &[u8], second: &[u8], second_length: u64) -> PyResult<Bound<'py, PyBytes>> {
    let named = Algorithm::named(algorithm)?;
    let crc = named.crc().ok_or_else(|| PyValueError::new_err(format!("{algorithm} values do not combine: it is no CRC")))?;
    let combined = crc_fast::checksum_combine(crc, crc_value(named, first)?, crc_value(named, second)?, second_length);
    Ok(PyBytes::new(py, &crc_bytes(named, combined)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(algorithm: Algorithm, data: &[u8]) -> Vec<u8> {
        let mut hasher = Hasher::new(algorithm);
        hasher.update(data);
        hasher.finish()
    }

    #[test]
    fn check_values_are_the_catalogues() {
        // "123456789", the check value every CRC catalogue gives
        assert_eq!(of(Algorithm::Crc32, b"123456789"), 0xcbf43926u32.to_be_bytes());
        assert_eq!(of(Algorithm::Crc32c, b"123456789"), 0xe3069283u32.to_be_bytes());
        assert_eq!(of(Algorithm::Crc64Nvme, b"123456789"), 0xae8b14860a799888u64.to_be_bytes());
    }

    #[test]
    fn parts_combine_into_the_whole() {
        let whole = of(Algorithm::Crc64Nvme, b"123456789");
        let (first, second) = (of(Algorithm::Crc64Nvme, b"1234"), of(Algorithm::Crc64Nvme, b"56789"));
        let first = crc_value(Algorithm::Crc64Nvme, &first).unwrap();
        let second = crc_value(Algorithm::Crc64Nvme, &second).unwrap();
        let combined = crc_fast::checksum_combine(CrcAlgorithm::Crc64Nvme, first, second, 5);
        assert_eq!(crc_bytes(Algorithm::Crc64Nvme, combined), whole);
    }
}
