//! GETs of whole objects (up to 8 MiB) into files, handed over in batches.
//!
//! obstore hands each finished request from its runtime to Python on its own: a wake of a
//! blocking-pool thread, which then takes the GIL from the event loop. For a 4 KiB download that
//! hand-off is most of the client's system time (13 futex calls per object, against s5cmd's 0.2).
//! Here the event loop hands over a batch of GETs in one call, a runtime on one thread of its
//! own sends them (object_store's SigV4 signer and the native part's client, `transport`, as
//! http.rs sends the signed client's requests), writes each body into its file, gives it its
//! time and checks it, and when its size and checksum are right, lands it (a process killed
//! between writing and landing leaves its temporary file behind, so that step is not left to
//! wait for the event loop); one wake-up of the event loop hands over every outcome finished
//! meanwhile (`wake::Outbox`).
//!
//! A small body is written by the runtime thread at once. From `STREAM_MIN` a body is streamed
//! to a writer thread (`Writer`) chunk by chunk as it comes: the writer writes the chunks that
//! came into its file (one `pwritev` for those of a body that came together); when bodies end,
//! it reads their files back from the page cache a window at a time and hashes them side by
//! side in SIMD lanes (one MD5 per body costs 8x the CPU of 16 in
//! lanes), then lands each. A runtime thread writing 1 MiB bodies itself stalls every connection whenever the
//! kernel throttles it for its dirty pages (bench/RESULTS.md, issue 19's tenth session); and a
//! request in flight holds a chunk, not its whole body, so the byte budget need not count bodies
//! whole (storage.py: `bytes_held`).
//! The ranges of a large object come the same way, each written at its offset into the file the
//! caller made, without a hash of its own: the file's parts are hashed as they are written, by
//! the hasher thread (parthash.rs). Through obstore, each chunk went to the event loop, which
//! wrote it (0.1 s of a 3 x 100 MiB download's wall, the loop busy meanwhile).
//! A whole object is asked for in checksum mode (`x-amz-checksum-mode: ENABLED`): where the
//! service keeps a full-object checksum (CRC64NVME, CRC32C, CRC32, SHA-256, SHA-1), the answer
//! carries it, and the body is checked by it as it is written (a CRC64NVME costs ~0.05 ms of a
//! core per MiB, an MD5 in lanes ~0.15); only a body that comes without one is hashed with MD5
//! for its ETag. A range carries none (no service sends the object's checksum for a part of it).
//! s3bulk/_stores/gets.py is the Python side.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::{File, FileTimes};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use base64::prelude::{Engine, BASE64_STANDARD};
use bytes::Bytes;
use futures_util::Stream as BodyStream;
use futures_util::StreamExt;
use memmap2::Mmap;
use object_store::aws::{AwsAuthorizer, AwsCredential};
use object_store::client::{HttpErrorKind, HttpRequestBody, HttpResponse};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::checksums::{self, Algorithm};
use crate::folder::{folder_of, Folder};
use crate::http::{built, header_pairs, message_of, options_from, Unanswered};
use crate::md5::{engine, update_in_lockstep, window};
use crate::pace::{at_most, joined, whole, Pace};
use crate::parthash::{Hasher, HasherThread};
use crate::transport::Transport;
use crate::wake::{Outbox, Runner};
use ::md5_many::Md5State;

/// One GET of the object at `url` (signed for `region`): its bytes, up to `end` of them, into a
/// new file `path` of `folder` (a directory the caller opened, folder.rs; None: the current one),
/// given the time `mtime` (seconds since the epoch; 0: left as it is), asked for in checksum
/// mode and checked by the checksum that comes when `check` says so, else hashed with MD5 when
/// `hash` says so, and landed as `landing` says. With `start`, one range of a large object
/// instead: its bytes `start..end` written at that offset into the file `path` of `folder`,
/// which the caller made (a range never makes it again: once the caller removed it, a
/// range still to come fails rather than leave it behind), their checksum `compute` found (the
/// caller combines the ranges' CRCs into the object's). With `if_match`, only while the object
/// has that ETag. Read by name from Python's `gets.GetJob`; the ticket comes beside it.
#[derive(FromPyObject)]
struct Job {
    #[pyo3(default)]
    ticket: u64,
    url: String,
    region: String,
    start: Option<u64>,
    end: u64,
    /// The range's file is hashed part by part as it is written (parthash.rs): its id there.
    hashed: Option<u64>,
    #[pyo3(from_py_with = folder_of)]
    folder: Folder,
    path: String,
    mtime: f64,
    hash: bool,
    check: bool,
    #[pyo3(from_py_with = algorithm_named)]
    compute: Option<Algorithm>,
    landing: Option<Landing>,
    /// The ETag the object must still have (If-Match): a range of another version is refused
    /// (412), never written beside ranges of the one before.
    #[pyo3(default)]
    if_match: Option<String>,
}

/// A checksum algorithm Python names (None: none).
fn algorithm_named(name: &Bound<'_, PyAny>) -> PyResult<Option<Algorithm>> {
    name.extract::<Option<String>>()?.as_deref().map(Algorithm::named).transpose()
}

/// The checksum being computed of a body's bytes as they come, and for a whole object, the
/// full-object one its answer gave.
struct Checksumming {
    algorithm: Algorithm,
    expected: Option<Vec<u8>>,
    computed: checksums::Hasher,
}

/// A body's checksum: its algorithm, its value, and whether it is the one its answer gave (None:
/// none was given, as for a range).
struct Summed {
    algorithm: Algorithm,
    value: Vec<u8>,
    matched: Option<bool>,
}

impl Checksumming {
    /// The full-object checksum a whole object's answer carries (checksum mode), if any: not a
    /// composite one ("value-N", of the parts' values), which only the part layout could check.
    fn from_answer(headers: &http::HeaderMap) -> Option<Self> {
        if headers.get("x-amz-checksum-type").is_some_and(|kind| kind.as_bytes().eq_ignore_ascii_case(b"COMPOSITE")) {
            return None;
        }
        let (algorithm, value) = Algorithm::ALL.into_iter().find_map(|algorithm| Some((algorithm, headers.get(algorithm.header())?)))?;
        let expected = BASE64_STANDARD.decode(value.as_bytes()).ok().filter(|value| value.len() == algorithm.width())?;
        Some(Checksumming { algorithm, expected: Some(expected), computed: checksums::Hasher::new(algorithm) })
    }

    /// For a range: its checksum, with nothing to compare it with.
    fn of_range(algorithm: Algorithm) -> Self {
        Checksumming { algorithm, expected: None, computed: checksums::Hasher::new(algorithm) }
    }

    fn update(&mut self, chunks: &[Bytes]) {
        chunks.iter().for_each(|chunk| self.computed.update(chunk));
    }

    fn summed(self) -> Summed {
        let value = self.computed.finish();
        let matched = self.expected.map(|expected| expected == value);
        Summed { algorithm: self.algorithm, value, matched }
    }
}

/// Where the written file goes once it is known to be right: to `target`, in the job's folder
/// (replacing a file there when `replace`, else only if none appeared meanwhile), if `size`
/// bytes came and they match the checksum their answer carried, or where none came, their MD5 is
/// `md5` (None: not checked). Anything else leaves the file where it was written, to the
/// caller. Python's `gets.Landing`.
#[derive(FromPyObject)]
struct Landing {
    target: String,
    replace: bool,
    size: u64,
    md5: Option<Vec<u8>>,
}

/// What became of a job: bytes written, their MD5 (when hashed), whether they matched the
/// checksum their answer carried (when one came), and whether the file landed; or why not.
/// A GET whose body was written into its file, as `Gets.take` hands it back: the bytes
/// written, their MD5 (when asked for), the checksum computed of them (`algorithm`, `checksum`)
/// and whether it is the one the answer carried (`checked`: None when none came), and whether
/// the file landed.
#[pyclass(module = "s3bulk_native", frozen, get_all)]
pub struct Written {
    ticket: u64,
    written: u64,
    md5: Option<Py<PyBytes>>,
    algorithm: Option<&'static str>,
    checksum: Option<Py<PyBytes>>,
    checked: Option<bool>,
    landed: bool,
}

/// A GET whose local file failed (its errno and message: a full disk stops the job).
#[pyclass(module = "s3bulk_native", frozen, get_all)]
pub struct DiskFailed {
    ticket: u64,
    errno: i32,
    message: String,
}

/// A GET the service answered with an error: its status, headers and body.
#[pyclass(module = "s3bulk_native", frozen, get_all)]
pub struct Refused {
    ticket: u64,
    status: u16,
    headers: Vec<(String, String)>,
    body: Py<PyBytes>,
}

enum Outcome {
    Written {
        written: u64,
        md5: Option<[u8; 16]>,
        checksum: Option<Summed>,
        landed: bool,
    },
    /// The local file failed: its errno and message (a full disk stops the job, python side).
    Disk {
        errno: i32,
        message: String,
    },
    /// The service answered with an error: its status, headers and body, read as the signed
    /// client reads one (`S3Client.error`).
    Refused {
        status: u16,
        headers: Vec<(String, String)>,
        body: Bytes,
    },
    /// No answer, or a body cut short: whether no connection was made, and the client's words.
    Failed {
        unreachable: bool,
        message: String,
    },
}

impl Outcome {
    fn failed(message: impl Into<String>) -> Self {
        Outcome::Failed { unreachable: false, message: message.into() }
    }
}

/// Bodies from this size are streamed to the writer thread, hashed side by side with others
/// (md5.rs: 16 bodies of 1 MiB in about the time of one); a smaller one costs less to hash and
/// write at once. s3bulk/_stores/storage.py's `STREAMED_MIN` is the same size.
const STREAM_MIN: u64 = 16 * 1024;
/// Bytes of chunks waiting for the writer thread, at most (and the most a chunk waits for).
const QUEUED_MAX: usize = 4 * 1024 * 1024;
/// Bodies hashed at once: the lanes of an AVX-512 register.
const LANES: usize = 16;
/// The longest a body that ended waits for others to end with it (its landing is delayed by it).
/// A pass over 16 lanes costs about what a pass over 2 does (md5.rs), so fuller passes cost less
/// per byte: at ~600 bodies/s, ~3 end within 5 ms and ~12 within 20 (2,000 x 1 MiB download,
/// pairs in turns against 5 ms: client CPU 0.96x at RTT 0, 0.88x at 20 ms RTT; wall 0.99x and
/// 0.98x; bench/RESULTS.md). The same wait as the Python lanes' (`_stores/digests.py`). A body
/// waits while any other GET is in flight, not only while other bodies are streaming: at RTT 0
/// the writer, faster than the network, often had none streaming for a moment and hashed 6.8
/// bodies a pass; waiting for those about to start took 2,000 x 1 MiB from 2.75 to 2.51 s of
/// client CPU at RTT 0 (s5cmd: 2.47 s), 2.81 to 2.59 s at 20 ms RTT, wall 0.96x and 0.98x (6
/// rounds in turns). With no other GET in flight (one object, the last ones) nothing is awaited.
const MAX_WAIT: Duration = Duration::from_millis(20);
/// How much of each file is mapped at once while its MD5 is found (a multiple of the page size).
const HASH_WINDOW: u64 = 256 * 1024;

/// Which tickets' files may still be written, and which are being written. A ticket is claimed
/// for each write into its file (a streamed body's chunk, or its landing) and released after it;
/// `cancel` takes a ticket out, or waits for the write under way: so once `cancel` returns,
/// nothing more is written into its file, and a file it left is the caller's to remove.
#[derive(Default)]
struct Tickets {
    held: Mutex<Held>,
    released: Condvar,
}

#[derive(Default)]
struct Held {
    live: HashSet<u64>,
    being_written: HashSet<u64>,
    /// Cancels waiting for a write to end: a release wakes them only when there are some (a
    /// wake-up is a system call, and there is a release for every chunk written).
    waiting: usize,
}

impl Tickets {
    fn add(&self, tickets: impl Iterator<Item = u64>) {
        self.held.lock().unwrap().live.extend(tickets);
    }

    /// GETs handed over and not done with yet (those whose bodies ended and wait to be hashed
    /// among them).
    fn in_flight(&self) -> usize {
        self.held.lock().unwrap().live.len()
    }

    /// Whether the file of `ticket` may be written (it was not cancelled); if so, it is being
    /// written until `release`.
    fn claim(&self, ticket: u64) -> bool {
        let mut held = self.held.lock().unwrap();
        let claimed = held.live.contains(&ticket);
        if claimed {
            held.being_written.insert(ticket);
        }
        claimed
    }

    /// A GET that failed, or whose file is done with: nothing more is written for it.
    fn done(&self, ticket: u64) {
        self.held.lock().unwrap().live.remove(&ticket);
    }

    /// The write that `claim` allowed is over; `done`: the last one (the file landed, or is left
    /// to the caller).
    fn release(&self, ticket: u64, done: bool) {
        let mut held = self.held.lock().unwrap();
        held.being_written.remove(&ticket);
        if done {
            held.live.remove(&ticket);
        }
        let waiting = held.waiting > 0;
        drop(held);
        if waiting {
            self.released.notify_all();
        }
    }

    fn cancel(&self, ticket: u64) {
        let mut held = self.held.lock().unwrap();
        held.live.remove(&ticket);
        self.wait_until(held, |held| !held.being_written.contains(&ticket));
    }

    fn cancel_all(&self) {
        let mut held = self.held.lock().unwrap();
        held.live.clear();
        self.wait_until(held, |held| held.being_written.is_empty());
    }

    fn wait_until(&self, mut held: std::sync::MutexGuard<'_, Held>, done: impl Fn(&Held) -> bool) {
        held.waiting += 1;
        while !done(&held) {
            held = self.released.wait(held).unwrap();
        }
        held.waiting -= 1;
    }
}

/// A piece of a streamed body on its way to the writer thread, in the order it came.
enum Piece {
    /// The GET's answer came, with the checksum its body is checked by: the body's chunks follow.
    Start(Box<(Job, Option<Checksumming>)>),
    /// The next bytes of the ticket's body, holding their room in the queue until written.
    Chunk(u64, Bytes, OwnedSemaphorePermit),
    /// The ticket's body ended: whole (None), or cut, in the client's words.
    End(u64, Option<String>),
}

/// The writer thread's side: the chunks of bodies from `STREAM_MIN` bytes, written into their
/// files as they come; the files of bodies that ended together hashed side by side in SIMD lanes,
/// then landed. A GET in flight holds its connection's buffers, not its whole body, so the byte
/// budget need not count the body (storage.py's `bytes_held`: counted whole, 16 MiB admitted 16
/// GETs of 1 MiB, too few at 20 ms RTT; bench/RESULTS.md, issue 19's seventh and twelfth sessions).
struct Writer {
    queue: Mutex<Queue>,
    changed: Condvar,
    /// Room for chunks in the queue: a runtime that fills it waits, so the kernel's
    /// back-pressure, not memory, absorbs a writer slower than the network.
    room: Arc<Semaphore>,
}

#[derive(Default)]
struct Queue {
    pieces: VecDeque<Piece>,
    closed: bool,
    /// The writer waits for pieces: only then does a piece sent wake it (a wake-up is a system
    /// call, and a 1 MiB body comes in 8 or more chunks).
    waiting: bool,
}

impl Writer {
    fn new() -> Self {
        Writer { queue: Mutex::default(), changed: Condvar::new(), room: Arc::new(Semaphore::new(QUEUED_MAX)) }
    }

    fn send(&self, piece: Piece) {
        let mut queue = self.queue.lock().unwrap();
        queue.pieces.push_back(piece);
        let waiting = queue.waiting;
        drop(queue);
        if waiting {
            self.changed.notify_one();
        }
    }

    /// Room in the queue for a chunk of `size` bytes (a larger chunk than the whole queue waits
    /// for all of it); None once closed.
    async fn room(&self, size: usize) -> Option<OwnedSemaphorePermit> {
        self.room.clone().acquire_many_owned(size.clamp(1, QUEUED_MAX) as u32).await.ok()
    }

    fn close(&self) {
        self.queue.lock().unwrap().closed = true;
        self.room.close();
        self.changed.notify_all();
    }

    /// Every piece sent since the last call, waiting for one until `deadline` (then none);
    /// None once closed.
    fn next_pieces(&self, deadline: Option<Instant>) -> Option<VecDeque<Piece>> {
        let mut queue = self.queue.lock().unwrap();
        loop {
            if queue.closed {
                return None;
            }
            if !queue.pieces.is_empty() {
                queue.waiting = false;
                return Some(std::mem::take(&mut queue.pieces));
            }
            queue.waiting = true;
            match deadline {
                None => queue = self.changed.wait(queue).unwrap(),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        queue.waiting = false;
                        return Some(VecDeque::new());
                    }
                    queue = self.changed.wait_timeout(queue, deadline - now).unwrap().0;
                }
            }
        }
    }

    /// Writes the chunks that came (those of one body with one system call), and lets them go; a
    /// body that ended and is to be hashed waits for others to end with it (up to `LANES` of them,
    /// at most `MAX_WAIT`, and only while other GETs are in flight), so that their files are
    /// hashed together in SIMD lanes, read back from the page cache. Then each is landed. A body
    /// not to be hashed (a range) is done at once.
    fn serve(&self, tickets: &Tickets, outbox: &Outbox<Outcome>, hasher: &Hasher) {
        let mut streams: HashMap<u64, Stream> = HashMap::new();
        let mut ended: Vec<(Stream, Option<String>)> = Vec::new();
        let mut first_end: Option<Instant> = None;
        while let Some(pieces) = self.next_pieces(first_end.map(|at| at + MAX_WAIT)) {
            // The chunks of each body in this batch, written with one system call per body
            // (a 1 MiB body comes in 8 or more chunks of up to 128 KiB).
            let mut unwritten: HashMap<u64, Unwritten> = HashMap::new();
            for piece in pieces {
                match piece {
                    Piece::Start(started) => {
                        let (job, checksum) = *started;
                        streams.insert(job.ticket, Stream::new(job, checksum, hasher));
                    }
                    Piece::Chunk(ticket, chunk, room) => unwritten.entry(ticket).or_default().add(chunk, room),
                    Piece::End(ticket, failure) => {
                        if let Some(chunks) = unwritten.remove(&ticket) {
                            chunks.write_into(streams.get_mut(&ticket), tickets, hasher);
                        }
                        match streams.remove(&ticket) {
                            Some(stream) if !stream.to_hash(&failure) => outbox.push(ticket, stream.finish(tickets, failure, None)),
                            Some(stream) => {
                                ended.push((stream, failure));
                                first_end.get_or_insert_with(Instant::now);
                            }
                            None => {}
                        }
                    }
                }
            }
            for (ticket, chunks) in unwritten {
                chunks.write_into(streams.get_mut(&ticket), tickets, hasher);
            }
            let due = ended.len() >= LANES || first_end.is_some_and(|at| at.elapsed() >= MAX_WAIT) || (!ended.is_empty() && tickets.in_flight() <= ended.len());
            if due {
                first_end = None;
                let digests = hash_files(&ended);
                for ((stream, failure), md5) in ended.drain(..).zip(digests) {
                    outbox.push(stream.job.ticket, stream.finish(tickets, failure, md5));
                }
            }
        }
    }
}

/// The chunks of a body that came in one batch, not written yet, and the room they hold in the
/// queue: given back once for the body (each giving back wakes a runtime waiting for room, a
/// system call and a switch of threads), not once per chunk of up to 128 KiB.
#[derive(Default)]
struct Unwritten {
    chunks: Vec<Bytes>,
    room: Option<OwnedSemaphorePermit>,
}

impl Unwritten {
    fn add(&mut self, chunk: Bytes, room: OwnedSemaphorePermit) {
        self.chunks.push(chunk);
        match &mut self.room {
            Some(held) => held.merge(room),
            None => self.room = Some(room),
        }
    }

    /// Into the body's file (none: the GET is not being written, e.g. cancelled); the room they
    /// held is given back when this is dropped, after.
    fn write_into(self, stream: Option<&mut Stream>, tickets: &Tickets, hasher: &Hasher) {
        if let Some(stream) = stream {
            stream.write(tickets, &self.chunks, hasher);
        }
    }
}

/// A body being written into its file by the writer thread.
struct Stream {
    job: Job,
    file: Option<File>,
    written: u64,
    /// (file id, range index) in the hasher, for a range whose file is hashed as it is written
    /// (not when a checksum checks it).
    hashed: Option<(u64, usize)>,
    checksum: Option<Checksumming>,
    /// The file failed: nothing more is written, and the outcome says why.
    failed: Option<std::io::Error>,
    cancelled: bool,
}

impl Stream {
    fn new(job: Job, checksum: Option<Checksumming>, hasher: &Hasher) -> Self {
        let hashed = job.hashed.filter(|_| checksum.is_none()).and_then(|id| Some((id, hasher.range(id, job.start.unwrap_or(0))?)));
        Stream { job, file: None, written: 0, hashed, checksum, failed: None, cancelled: false }
    }

    /// The chunks into the file (made at the first one), one after the other, unless the GET was
    /// cancelled or the file failed before.
    fn write(&mut self, tickets: &Tickets, chunks: &[Bytes], hasher: &Hasher) {
        if self.cancelled || self.failed.is_some() {
            return;
        }
        if !tickets.claim(self.job.ticket) {
            self.cancelled = true; // the caller removes what was written
            self.file = None;
            return;
        }
        let offset = self.job.start.unwrap_or(0) + self.written;
        let length: u64 = chunks.iter().map(|chunk| chunk.len() as u64).sum();
        match self.file().and_then(|file| write_all_at(file, chunks, offset)) {
            Ok(()) => {
                self.written += length;
                if let Some(checksum) = &mut self.checksum {
                    checksum.update(chunks);
                }
                if let Some((id, index)) = self.hashed {
                    hasher.wrote(id, index, offset + length);
                }
            }
            Err(err) => self.failed = Some(err),
        }
        tickets.release(self.job.ticket, false);
    }

    fn file(&mut self) -> std::io::Result<&mut File> {
        if self.file.is_none() {
            self.file = Some(match self.job.start {
                None => self.job.folder.create(&self.job.path)?,
                Some(_) => self.job.folder.open(&self.job.path, libc::O_WRONLY)?, // the caller's
            });
        }
        Ok(self.file.as_mut().expect("just made"))
    }

    /// The file and the bytes written into it (no file: none written, and none made for them
    /// here: a file is made only under a claim).
    fn written(&self) -> (Option<&File>, u64) {
        (self.file.as_ref(), self.written)
    }

    /// Whether the body came whole into its file and its MD5 is asked for (no checksum came).
    fn to_hash(&self, failure: &Option<String>) -> bool {
        self.job.hash && self.checksum.is_none() && failure.is_none() && self.failed.is_none() && !self.cancelled
    }

    /// The body ended: the file given its time and landed if right (`md5`: its bytes' MD5, when
    /// asked); or, when the body was cut, removed (the item is fetched again, maybe into the same
    /// path).
    fn finish(mut self, tickets: &Tickets, failure: Option<String>, md5: Option<std::io::Result<[u8; 16]>>) -> Outcome {
        let ticket = self.job.ticket;
        if self.cancelled || !tickets.claim(ticket) {
            return Outcome::failed("cancelled");
        }
        let outcome = if let Some(err) = self.failed.take() {
            disk(&err)
        } else if let Some(message) = failure {
            if self.file.take().is_some() && self.job.start.is_none() {
                let _ = self.job.folder.remove(&self.job.path);
            }
            Outcome::failed(message)
        } else {
            let mtime = self.job.mtime;
            match (self.file().and_then(|file| set_time(file, mtime)), md5.transpose()) {
                (Ok(()), Ok(md5)) => {
                    self.file = None; // closed before it lands
                    let checksum = self.checksum.take().map(Checksumming::summed);
                    let checked = checksum.as_ref().and_then(|summed| summed.matched);
                    let landed =
                        self.job.landing.as_ref().is_some_and(|landing| land(&self.job.folder, &self.job.path, landing, self.written, md5.as_ref(), checked));
                    Outcome::Written { written: self.written, md5, checksum, landed }
                }
                (Err(err), _) | (_, Err(err)) => disk(&err),
            }
        };
        tickets.release(ticket, true);
        outcome
    }
}

/// The chunks one after the other into the file from `offset`, in as few system calls as the
/// kernel takes them (`pwritev`).
fn write_all_at(file: &File, chunks: &[Bytes], mut offset: u64) -> std::io::Result<()> {
    let mut slices: Vec<&[u8]> = chunks.iter().map(|chunk| &chunk[..]).filter(|chunk| !chunk.is_empty()).collect();
    let mut first = 0;
    while first < slices.len() {
        let iovecs: Vec<libc::iovec> =
            slices[first..].iter().take(IOV_MAX).map(|slice| libc::iovec { iov_base: slice.as_ptr() as *mut libc::c_void, iov_len: slice.len() }).collect();
        // Safety: the iovecs point into `chunks`, alive and unchanged for the call.
        let wrote = unsafe { libc::pwritev(file.as_raw_fd(), iovecs.as_ptr(), iovecs.len() as libc::c_int, offset as libc::off_t) };
        if wrote < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if wrote == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        offset += wrote as u64;
        let mut left = wrote as usize;
        while left > 0 {
            let slice = slices[first];
            if left < slice.len() {
                slices[first] = &slice[left..];
                left = 0;
            } else {
                left -= slice.len();
                first += 1;
            }
        }
    }
    Ok(())
}

/// The most buffers one `pwritev` takes (Linux's UIO_MAXIOV).
const IOV_MAX: usize = 1024;

/// The MD5 of each whole body whose MD5 is asked for (None for the others), read back from its
/// file (in the page cache: just written), side by side in SIMD lanes.
fn hash_files(ended: &[(Stream, Option<String>)]) -> Vec<Option<std::io::Result<[u8; 16]>>> {
    let wanted: Vec<Option<(Option<&File>, u64)>> = ended.iter().map(|(stream, failure)| stream.to_hash(failure).then(|| stream.written())).collect();
    let mut digests = md5_of_files(&wanted.iter().flatten().copied().collect::<Vec<_>>()).into_iter();
    wanted.into_iter().map(|wanted| wanted.map(|_| digests.next().expect("one digest per body read"))).collect()
}

/// The MD5 of each file's first `size` bytes, in lanes, a window of each mapped at a time: the
/// files of 16 bodies of 1 MiB mapped whole at once added their size to the process's memory
/// (RssFile: 41-45 MiB at the peak of a 2,000 x 1 MiB download, against 21 MiB for the
/// interpreter alone); windows add at most 16 x `HASH_WINDOW`.
fn md5_of_files(files: &[(Option<&File>, u64)]) -> Vec<std::io::Result<[u8; 16]>> {
    let mut states = vec![Md5State::new(); files.len()];
    let mut failed: Vec<Option<std::io::Error>> = files.iter().map(|_| None).collect();
    let longest = files.iter().map(|(_, size)| *size).max().unwrap_or(0);
    for offset in (0..longest).step_by(HASH_WINDOW as usize) {
        let windows: Vec<Option<Mmap>> = files
            .iter()
            .zip(failed.iter_mut())
            .map(|((file, size), failed)| match file {
                Some(file) if failed.is_none() && offset < *size => {
                    window(file, offset, HASH_WINDOW.min(size - offset)).map_err(|err| *failed = Some(err)).ok()
                }
                _ => None,
            })
            .collect();
        update_in_lockstep(&mut states, windows.iter().map(|window| window.as_deref().unwrap_or_default()).collect());
    }
    let mut digests = vec![[0u8; 16]; files.len()];
    engine().finalize_many(&states, &mut digests);
    failed.into_iter().zip(digests).map(|(failed, digest)| failed.map_or(Ok(digest), Err)).collect()
}

/// The writer thread, stopped and joined when dropped.
struct WriterThread {
    writer: Arc<Writer>,
    thread: Option<JoinHandle<()>>,
}

impl WriterThread {
    fn start(tickets: Arc<Tickets>, outbox: Arc<Outbox<Outcome>>, hasher: Arc<Hasher>) -> std::io::Result<Self> {
        let writer = Arc::new(Writer::new());
        let thread = std::thread::Builder::new().name("s3bulk-writer".into()).spawn({
            let writer = writer.clone();
            move || writer.serve(&tickets, &outbox, &hasher)
        })?;
        Ok(WriterThread { writer, thread: Some(thread) })
    }

    fn stop(&mut self) -> bool {
        self.writer.close();
        self.thread.take().is_none_or(|thread| thread.join().is_ok())
    }
}

impl Drop for WriterThread {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What sends a GET: the HTTP client, the credentials Python handed over (botocore's chain,
/// refreshed there; None: unsigned), and the headers every GET of this bucket carries (SSE-C's
/// key, requester pays).
struct Getter {
    client: Transport,
    credentials: Option<RwLock<Arc<AwsCredential>>>,
    headers: Vec<(String, String)>,
    /// A directory bucket's session (CreateSession): the service its requests are signed for,
    /// and its token, sent as x-amz-s3session-token. None: the credentials' own.
    session: RwLock<Option<(String, String)>>,
}

impl Getter {
    /// The answer to the job's GET (its body still to come), or the outcome of a GET that got
    /// none.
    async fn get(&self, job: &Job) -> Result<HttpResponse, Outcome> {
        let own = match job.start {
            Some(start) => Some(("range".to_owned(), format!("bytes={start}-{}", job.end - 1))),
            None if job.check => Some(("x-amz-checksum-mode".to_owned(), "ENABLED".to_owned())),
            None => None,
        };
        let condition = job.if_match.as_ref().map(|etag| ("if-match".to_owned(), etag.clone()));
        let credential = self.credentials.as_ref().map(|credentials| credentials.read().unwrap().clone());
        let session = self.session.read().unwrap().clone();
        let service = session.as_ref().map_or("s3", |(service, _)| service.as_str());
        let signer = credential.as_ref().map(|credential| (AwsAuthorizer::new(credential, service, &job.region), None));
        let token = session.as_ref().map(|(_, token)| ("x-amz-s3session-token".to_owned(), token.clone()));
        let headers = self.headers.iter().chain(own.as_ref()).chain(condition.as_ref()).chain(token.as_ref());
        let request = built("GET", &job.url, headers, HttpRequestBody::empty(), signer).map_err(Outcome::failed)?;
        self.client
            .execute(request)
            .await
            .map_err(|err| Outcome::Failed { unreachable: matches!(err.kind(), HttpErrorKind::Connect), message: message_of(false, &err) })
    }
}

/// A batch-fed GET client, with its own runtime thread.
#[pyclass(module = "s3bulk_native")]
pub struct Gets {
    runner: Runner<Job>,
    outbox: Arc<Outbox<Outcome>>,
    tickets: Arc<Tickets>,
    writer: WriterThread,
    hasher: Arc<Hasher>,
    hasher_thread: HasherThread,
    watched: UnixStream,
    getter: Arc<Getter>,
}

#[pymethods]
impl Gets {
    /// `client_options`: obstore's client options as text (`allow_http`, `timeout`, ...).
    /// `credentials`: (key id, secret, token or None), or None for unsigned requests; `headers`:
    /// what every GET carries besides.
    #[new]
    fn new(client_options: HashMap<String, String>, credentials: Option<(String, String, Option<String>)>, headers: Vec<(String, String)>) -> PyResult<Self> {
        options_from(client_options.clone())?; // a bad option is refused here, as object_store would
        let client = Transport::new(&client_options).map_err(PyValueError::new_err)?;
        let credentials = credentials.map(|(key_id, secret_key, token)| RwLock::new(Arc::new(AwsCredential { key_id, secret_key, token })));
        let getter = Arc::new(Getter { client, credentials, headers, session: RwLock::new(None) });
        let (outbox, watched) = Outbox::new()?;
        let outbox = Arc::new(outbox);
        let tickets = Arc::new(Tickets::default());
        let (hasher, hasher_thread) = Hasher::start()?;
        let writer = WriterThread::start(tickets.clone(), outbox.clone(), hasher.clone())?;
        let window = Pace::from_options(&client_options);
        let runner = Runner::start("s3bulk-gets", outbox.clone(), {
            let (tickets, hand, getter) = (tickets.clone(), writer.writer.clone(), getter.clone());
            move |job: Job| {
                let (getter, tickets, hand) = (getter.clone(), tickets.clone(), hand.clone());
                async move { fetch(&getter, job, &tickets, &hand, window).await }
            }
        })?;
        Ok(Gets { runner, outbox, tickets, writer, hasher, hasher_thread, watched, getter })
    }

    /// The socket to watch: readable when outcomes wait (`take` them, after reading it empty).
    fn fileno(&self) -> i32 {
        self.watched.as_raw_fd()
    }

    /// Start GETs: (ticket, job) each, the job as Python's `gets.GetJob`. One wake-up of the
    /// runtime for the whole batch.
    fn submit(&self, jobs: Vec<(u64, Job)>) -> PyResult<()> {
        let jobs: Vec<Job> = jobs.into_iter().map(|(ticket, job)| Job { ticket, ..job }).collect();
        self.tickets.add(jobs.iter().map(|job| job.ticket));
        self.runner.send(jobs)
    }

    /// The caller of `ticket` has gone: once this returns, its file is either written (and
    /// landed, if it was right) or never will be. Its outcome still comes.
    fn cancel(&self, py: Python<'_>, ticket: u64) {
        py.detach(|| self.tickets.cancel(ticket));
    }

    /// The outcomes finished since the last call, one of these each: `Written` (its file),
    /// `DiskFailed` (the local file's failure), `Refused` (the service's error answer),
    /// `Unanswered` (no answer, or a body cut short).
    fn take(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        self.outbox
            .take()
            .into_iter()
            .map(|(ticket, outcome)| {
                Ok(match outcome {
                    Outcome::Written { written, md5, checksum, landed } => {
                        let md5 = md5.map(|digest| PyBytes::new(py, &digest).unbind());
                        let (algorithm, checksum, checked) = match checksum {
                            Some(summed) => (Some(summed.algorithm.name()), Some(PyBytes::new(py, &summed.value).unbind()), summed.matched),
                            None => (None, None, None),
                        };
                        Py::new(py, Written { ticket, written, md5, algorithm, checksum, checked, landed })?.into_any()
                    }
                    Outcome::Disk { errno, message } => Py::new(py, DiskFailed { ticket, errno, message })?.into_any(),
                    Outcome::Refused { status, headers, body } => {
                        let body = PyBytes::new(py, &body).unbind();
                        Py::new(py, Refused { ticket, status, headers, body })?.into_any()
                    }
                    Outcome::Failed { unreachable, message } => Py::new(py, Unanswered { ticket, unreachable, message })?.into_any(),
                })
            })
            .collect()
    }

    /// The file `path` of `folder` (an open directory, or None: the current one; the file made
    /// by the caller), of `size` bytes, is to be hashed part by part (parts of `part_size`) as
    /// the ranges given its id write into it: its id.
    #[pyo3(signature = (path, size, part_size, folder=None))]
    fn hash_parts(&self, path: String, size: u64, part_size: u64, folder: Option<i32>) -> PyResult<u64> {
        if part_size == 0 {
            return Err(PyValueError::new_err("part_size must be positive"));
        }
        let file = Folder::of(folder)?.open(&path, libc::O_RDONLY)?;
        Ok(self.hasher.add(file, size, part_size))
    }

    /// The MD5 of each part of file `id`, once all are hashed: call it once every byte of the
    /// file was written. None when it cannot tell (closed meanwhile, or not known); OSError when
    /// the file could not be read back. The file is forgotten.
    fn part_digests<'py>(&self, py: Python<'py>, id: u64) -> PyResult<Option<Vec<Bound<'py, PyBytes>>>> {
        let digests = py.detach(|| self.hasher.digests(id)).map_err(PyOSError::new_err)?;
        Ok(digests.map(|digests| digests.iter().map(|digest| PyBytes::new(py, digest)).collect()))
    }

    /// File `id` will not be asked for (its download failed).
    fn forget_parts(&self, id: u64) {
        self.hasher.forget(id);
    }

    /// New credentials for the requests from now on; `session`: a directory bucket's session
    /// (the service to sign for, its token), whose key id and secret these are.
    #[pyo3(signature = (key_id, secret_key, token, session=None))]
    fn set_credentials(&self, key_id: String, secret_key: String, token: Option<String>, session: Option<(String, String)>) -> PyResult<()> {
        let handed = self.getter.credentials.as_ref().ok_or_else(|| PyValueError::new_err("unsigned client"))?;
        *handed.write().unwrap() = Arc::new(AwsCredential { key_id, secret_key, token });
        *self.getter.session.write().unwrap() = session;
        Ok(())
    }

    /// Stop: GETs not finished are dropped, and once this returns no file is written any more.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        self.runner.stop(py)?;
        py.detach(|| {
            self.tickets.cancel_all();
            self.writer.stop() & self.hasher_thread.stop()
        })
        .then_some(())
        .ok_or_else(|| PyOSError::new_err("the writer thread of the native part panicked"))
    }
}

/// The job's body fetched: a small one written, checked and landed here (its outcome), a larger
/// one streamed to the writer thread as it comes (None: the writer gives its outcome).
async fn fetch(getter: &Getter, job: Job, tickets: &Tickets, writer: &Writer, window: Duration) -> Option<(u64, Outcome)> {
    let ticket = job.ticket;
    let answer = match getter.get(&job).await {
        Ok(answer) if answer.status().as_u16() < 300 => answer,
        Ok(refused) => return Some((ticket, done(tickets, ticket, refusal(refused, window).await))),
        Err(outcome) => return Some((ticket, done(tickets, ticket, outcome))),
    };
    let whole_object = job.start.is_none() && answer.status().as_u16() == 200;
    let checksum = match job.compute {
        Some(algorithm) if job.start.is_some() => Some(Checksumming::of_range(algorithm)),
        _ if job.check && whole_object => Checksumming::from_answer(answer.headers()),
        _ => None,
    };
    let body = answer.into_body().bytes_stream();
    if job.end > STREAM_MIN || job.start.is_some() {
        stream_to(writer, job, checksum, body, window).await;
        return None;
    }
    let chunks = match at_most(body, job.end, window, |err| message_of(false, &err)).await {
        Ok(chunks) => chunks,
        Err(message) => return Some((ticket, done(tickets, ticket, Outcome::failed(message)))),
    };
    let checksum = checksum.map(|mut checksum| {
        checksum.update(&chunks);
        checksum.summed()
    });
    let body = joined(chunks);
    let md5 = (job.hash && checksum.is_none()).then(|| md5_of(&[&body[..]])[0]);
    Some((ticket, write_and_land(tickets, &job, &body, md5, checksum)))
}

/// The job is over with this outcome: nothing more is written for it.
fn done(tickets: &Tickets, ticket: u64, outcome: Outcome) -> Outcome {
    tickets.done(ticket);
    outcome
}

/// The service's error answer, its body read whole (a short XML document).
async fn refusal(answer: HttpResponse, window: Duration) -> Outcome {
    let (status, headers) = (answer.status().as_u16(), header_pairs(answer.headers()));
    match whole(answer.into_body().bytes_stream(), window, |err| message_of(false, &err)).await {
        Ok(body) => Outcome::Refused { status, headers, body: joined(body) },
        Err(message) => Outcome::failed(message),
    }
}

/// The body's chunks to the writer thread as they come, each once there is room for it, as long
/// as they come no slower than `Pace` allows, up to the job's `end` (a whole object that grew
/// since it was listed is read no further than the byte that tells it).
async fn stream_to<E: std::error::Error>(
    writer: &Writer,
    job: Job,
    checksum: Option<Checksumming>,
    mut body: impl BodyStream<Item = Result<Bytes, E>> + Unpin,
    window: Duration,
) {
    let ticket = job.ticket;
    let mut left = job.end - job.start.unwrap_or(0);
    writer.send(Piece::Start(Box::new((job, checksum))));
    let mut pace = Pace::new(window);
    let failure = loop {
        if left == 0 {
            break None;
        }
        match body.next().await {
            None => break None,
            Some(Ok(mut chunk)) => {
                if let Err(message) = pace.took(chunk.len()) {
                    break Some(message);
                }
                chunk.truncate(usize::try_from(left).unwrap_or(usize::MAX));
                left -= chunk.len() as u64;
                match writer.room(chunk.len()).await {
                    Some(room) => writer.send(Piece::Chunk(ticket, chunk, room)),
                    None => break Some("closed".to_string()),
                }
            }
            Some(Err(err)) => break Some(message_of(false, &err)),
        }
    };
    writer.send(Piece::End(ticket, failure));
}

/// The body into the job's file, landed if right; nothing if the job was cancelled.
fn write_and_land(tickets: &Tickets, job: &Job, body: &[u8], md5: Option<[u8; 16]>, checksum: Option<Summed>) -> Outcome {
    if !tickets.claim(job.ticket) {
        return Outcome::failed("cancelled");
    }
    let outcome = match write_file(&job.folder, &job.path, body, job.mtime) {
        Ok(()) => {
            let written = body.len() as u64;
            let checked = checksum.as_ref().and_then(|summed| summed.matched);
            let landed = job.landing.as_ref().is_some_and(|landing| land(&job.folder, &job.path, landing, written, md5.as_ref(), checked));
            Outcome::Written { written, md5, checksum, landed }
        }
        Err(err) => disk(&err),
    };
    tickets.release(job.ticket, true);
    outcome
}

fn disk(err: &std::io::Error) -> Outcome {
    Outcome::Disk { errno: err.raw_os_error().unwrap_or(0), message: err.to_string() }
}

/// The MD5 of each body, side by side in SIMD lanes.
fn md5_of(inputs: &[&[u8]]) -> Vec<[u8; 16]> {
    let mut digests = vec![[0u8; 16]; inputs.len()];
    engine().hash_many(inputs, &mut digests);
    digests
}

/// The file `path` of `folder` moved to its target there if its size is the one `landing`
/// expects and its bytes matched the checksum their answer carried (`checked`), or where none
/// came, their MD5 is the one `landing` expects, as s3bulk/_stores/landing.py would: rename()
/// over a file that was there before, link() (which fails rather than replace) where none was.
/// false: left where it is, for the caller's `land`, which says why it cannot (a directory in
/// the way, a file that appeared, a filesystem without hard links).
fn land(folder: &Folder, path: &str, landing: &Landing, written: u64, md5: Option<&[u8; 16]>, checked: Option<bool>) -> bool {
    let by_md5 = || landing.md5.as_deref().is_none_or(|expected| md5.is_some_and(|md5| md5[..] == *expected));
    let right = written == landing.size && checked.unwrap_or_else(by_md5);
    if !right {
        return false;
    }
    if landing.replace {
        return folder.rename(path, &landing.target).is_ok();
    }
    if folder.link(path, &landing.target).is_err() {
        return false;
    }
    let _ = folder.remove(path); // landed: the target holds it now
    true
}

/// The file given the time `mtime` (when not 0).
fn set_time(file: &File, mtime: f64) -> std::io::Result<()> {
    if mtime == 0.0 {
        return Ok(());
    }
    let time = SystemTime::UNIX_EPOCH + Duration::from_secs_f64(mtime.max(0.0));
    file.set_times(FileTimes::new().set_modified(time).set_accessed(time))
}

/// `data` into a new file `path` of `folder`, given the time `mtime` (when not 0) before it is
/// closed.
fn write_file(folder: &Folder, path: &str, data: &[u8], mtime: f64) -> std::io::Result<()> {
    let mut file = folder.create(path)?;
    file.write_all(data)?;
    set_time(&file, mtime)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(headers: &[(&'static str, &str)]) -> http::HeaderMap {
        headers.iter().map(|(name, value)| (http::HeaderName::from_static(name), http::HeaderValue::from_str(value).unwrap())).collect()
    }

    #[test]
    fn a_full_object_checksum_checks_the_body() {
        // CRC64NVME of "123456789", the catalogue's check value, in base64
        let value = BASE64_STANDARD.encode(0xae8b14860a799888u64.to_be_bytes());
        let headers = answer(&[("x-amz-checksum-crc64nvme", &value), ("x-amz-checksum-type", "FULL_OBJECT")]);
        let mut right = Checksumming::from_answer(&headers).expect("a full-object checksum");
        right.update(&[Bytes::from_static(b"1234"), Bytes::from_static(b"56789")]);
        assert_eq!(right.summed().matched, Some(true));
        let mut wrong = Checksumming::from_answer(&headers).unwrap();
        wrong.update(&[Bytes::from_static(b"123456788")]);
        assert_eq!(wrong.summed().matched, Some(false));
    }

    #[test]
    fn no_check_by_a_composite_value_or_one_of_the_wrong_width() {
        let composite = [("x-amz-checksum-sha256", "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=-2"), ("x-amz-checksum-type", "COMPOSITE")];
        assert!(Checksumming::from_answer(&answer(&composite)).is_none());
        assert!(Checksumming::from_answer(&answer(&[("x-amz-checksum-crc32", "AAAAAAAA")])).is_none()); // 6 bytes, not 4
        assert!(Checksumming::from_answer(&answer(&[("etag", "\"abc\"")])).is_none());
    }
}
