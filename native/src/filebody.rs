//! A request body read from a range of a local file as it is sent: a multipart upload's part.
//!
//! A part read whole into memory before it went (Python's `os.pread`, then held by the request)
//! cost its size in memory for as long as it was in flight: 3 x 100 MiB uploaded in 8 MiB parts
//! peaked at 78 MiB against s5cmd's 20 MiB, which streams its parts from the file. Here a part is
//! read twice, both times from the page cache a chunk at a time: once to hash it (its checksum,
//! `x-amz-checksum-*`, and the SHA-256 when SigV4 signs the payload, both of which the service
//! checks against what it receives; the MD5 of Content-MD5 when neither is sent), then again as
//! its chunks are written to the socket.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use ::md5_many::Md5State;
use aws_lc_rs::digest::{Context, SHA256};
use bytes::Bytes;
use futures_util::stream::{self, Stream, StreamExt};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};

use crate::checksums::{Algorithm, Hasher};
use crate::transport::{BoxError, Outgoing};

/// How much of the file is read at a time, to hash it and to send it.
const CHUNK: usize = 256 * 1024;

/// `length` bytes of the file at `path`, from `offset`.
#[derive(Clone)]
pub struct FileRange {
    pub path: PathBuf,
    pub offset: u64,
    pub length: u64,
}

/// What a body is checked by: its checksum (`x-amz-checksum-*`) and the SHA-256 that is signed,
/// either or both; the MD5 sent as Content-MD5 when neither is.
#[derive(Default)]
pub struct Digests {
    pub checksum: Option<Vec<u8>>,
    pub sha256: Option<Vec<u8>>,
    pub md5: Option<[u8; 16]>,
}

impl FileRange {
    /// A buffer to hash the range with (`digest`). Made by the caller's thread, not the
    /// blocking-pool thread that hashes: glibc gives each of those an arena of its own, which
    /// kept what it freed (a 3 x 100 MiB upload peaked 6 MiB higher so).
    pub fn buffer() -> Vec<u8> {
        vec![0u8; CHUNK]
    }

    /// The range hashed, read a chunk at a time into `buffer`: with `checksum`, with SHA-256
    /// when `signed`, with MD5 when `md5` is asked for or neither checks it; and the file it was
    /// read from, to send it from; blocking.
    pub fn digest(&self, signed: bool, checksum: Option<Algorithm>, md5: bool, mut buffer: Vec<u8>) -> io::Result<(Digests, File)> {
        let file = File::open(&self.path)?;
        let mut crc = checksum.map(Hasher::new);
        let mut sha256 = signed.then(|| Context::new(&SHA256));
        let mut md5 = (md5 || (crc.is_none() && sha256.is_none())).then(Md5State::new);
        let end = self.offset + self.length;
        let mut offset = self.offset;
        while offset < end {
            let wanted = CHUNK.min((end - offset) as usize);
            let chunk = &mut buffer[..wanted];
            read_exact_at(&file, chunk, offset, &self.path)?;
            crc.iter_mut().for_each(|hasher| hasher.update(chunk));
            sha256.iter_mut().for_each(|context| context.update(chunk));
            md5.iter_mut().for_each(|state| state.update(chunk));
            offset += wanted as u64;
        }
        let digests = Digests {
            checksum: crc.map(Hasher::finish),
            sha256: sha256.map(|context| context.finish().as_ref().to_vec()),
            md5: md5.map(|state| state.finalize()),
        };
        Ok((digests, file))
    }

    /// The range of `file` as a request body, its chunks read (by a blocking-pool thread) only
    /// when the socket has taken the one before: a part in flight holds a chunk or two, never
    /// itself whole.
    pub fn body(self, file: File) -> Outgoing {
        let frames = self.chunks(file).map(|chunk| chunk.map(Frame::data).map_err(BoxError::from));
        StreamBody::new(frames).boxed_unsync()
    }

    fn chunks(self, file: File) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
        let (file, range) = (Arc::new(file), Arc::new(self));
        stream::try_unfold(range.offset, move |offset| {
            let (file, range) = (file.clone(), range.clone());
            async move {
                let end = range.offset + range.length;
                if offset >= end {
                    return Ok(None);
                }
                let wanted = CHUNK.min((end - offset) as usize);
                let mut buffer = vec![0u8; wanted]; // made here, not in a blocking thread's arena
                let chunk = tokio::task::spawn_blocking(move || {
                    read_exact_at(&file, &mut buffer, offset, &range.path)?;
                    Ok::<_, io::Error>(Bytes::from(buffer))
                })
                .await
                .map_err(io::Error::other)??;
                Ok(Some((chunk, offset + wanted as u64)))
            }
        })
    }
}

/// Fills `buffer` from `offset`; a file that ends first has shrunk since its size was taken.
fn read_exact_at(file: &File, buffer: &mut [u8], offset: u64, path: &std::path::Path) -> io::Result<()> {
    file.read_exact_at(buffer, offset).map_err(|error| match error.kind() {
        io::ErrorKind::UnexpectedEof => io::Error::new(io::ErrorKind::UnexpectedEof, format!("{} shrank while it was being uploaded", path.display())),
        _ => error,
    })
}
