//! s3bulk's native part: the work per byte that Python would do under the GIL, done without it.
//!
//! - `vectors`: the float32 rows of PutVectors bodies as JSON text, and read back from
//!   ListVectors pages.
//! - `checksums`: the CRC64NVME, CRC32C, CRC32, SHA-256 and SHA-1 S3 keeps with an object.
//! - `md5`: the MD5s that check downloads against their ETags, many bodies (or parts) at once.
//! - `gets`: GETs into files, handed over in batches rather than one by one; `parthash`: a
//!   large download's parts hashed as its ranges come; `folder`: their files named in a
//!   directory the caller opened.
//! - `http`: the signed client's requests (listings, multipart steps), sent the same way;
//!   `filebody`: a multipart upload's part read from its file as it is sent; `pace`: a body
//!   that comes too slowly fails.
//! - `listpage`: a ListObjectsV2 page read into columns.

use pyo3::prelude::*;

mod checksums;
mod filebody;
mod folder;
mod gets;
mod http;
mod listpage;
mod md5;
mod pace;
mod parthash;
mod transport;
mod vectors;
mod wake;

#[pymodule]
fn s3bulk_native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(vectors::put_vectors_body, module)?)?;
    module.add_function(wrap_pyfunction!(vectors::list_vectors_page, module)?)?;
    module.add_function(wrap_pyfunction!(vectors::content_hashes, module)?)?;
    module.add_function(wrap_pyfunction!(listpage::list_page_columns, module)?)?;
    module.add_function(wrap_pyfunction!(md5::md5_many, module)?)?;
    module.add_function(wrap_pyfunction!(md5::md5_file_parts, module)?)?;
    module.add_function(wrap_pyfunction!(checksums::checksum, module)?)?;
    module.add_function(wrap_pyfunction!(checksums::checksum_file, module)?)?;
    module.add_function(wrap_pyfunction!(checksums::checksum_file_parts, module)?)?;
    module.add_function(wrap_pyfunction!(checksums::crc_combine, module)?)?;
    module.add_class::<gets::Gets>()?;
    module.add_class::<http::Http>()?;
    module.add_class::<http::Reply>()?;
    module.add_class::<http::Unanswered>()?;
    module.add_class::<gets::Written>()?;
    module.add_class::<gets::DiskFailed>()?;
    module.add_class::<gets::Refused>()?;
    // the package's version, written once (native/Cargo.toml): the wheel's metadata takes it
    // from there too, and `s3bulk --version` prints both, which must agree
    module.add("__version__", env!("CARGO_PKG_VERSION"))
}
