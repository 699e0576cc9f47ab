//! GETs of whole objects (up to 8 MiB) into files, handed over in batches.
//!
//! obstore hands each finished request from its runtime to Python on its own: a wake of a
//! blocking-pool thread, which then takes the GIL from the event loop. For a 4 KiB download that
//! hand-off is most of the client's system time (13 futex calls per object, against s5cmd's 0.2).
//! Here the event loop hands over a batch of GETs in one call, a runtime on one thread of its
//! own fetches them with object_store (the crate under obstore: the same HTTP client, signing
//! and configuration), writes each body into its file, gives it its time and hashes it, and
//! when its size and MD5 are right, lands it (a process killed between writing and landing
//! leaves its temporary file behind, so that step is not left to wait for the event loop); one
//! wake-up of the event loop hands over every outcome finished meanwhile (`wake::Outbox`).
//!
//! A small body is written by the runtime thread at once. From `LANES_MIN` a body goes to a
//! writer thread (`Writer`), which hashes the bodies that came meanwhile side by side in SIMD
//! lanes and writes them: a runtime thread writing 1 MiB bodies itself stalls every connection
//! whenever the kernel throttles it for its dirty pages (bench/RESULTS.md, issue 19's tenth
//! session), and one MD5 per body costs 8x the CPU of 16 in lanes.
//! s3bulk/_stores/gets.py is the Python side.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::{File, FileTimes, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::str::FromStr;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, AwsCredential};
use object_store::path::Path as ObjectPath;
use object_store::{CredentialProvider, GetOptions, GetRange, ObjectStore, RetryConfig};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::md5::engine;
use crate::wake::{Outbox, Runner};
use crate::http::options_from;

/// One GET: the object `key`'s bytes `0..end` into a new file at `path`, given the time `mtime`
/// (seconds since the epoch; 0: left as it is), hashed when `hash` says so, and landed as
/// `landing` says.
struct Job {
    ticket: u64,
    key: String,
    end: u64,
    path: String,
    mtime: f64,
    hash: bool,
    landing: Option<Landing>,
}

/// Where the written file goes once it is known to be right: to `target` (replacing a file there
/// when `replace`, else only if none appeared meanwhile), if `size` bytes came and their MD5 is
/// `md5` (None: not checked). Anything else leaves the file where it was written, to the caller.
struct Landing {
    target: String,
    replace: bool,
    size: u64,
    md5: Option<Vec<u8>>,
}

/// What became of a job: bytes written, their MD5 and whether the file landed, or why not.
enum Outcome {
    Written { written: u64, md5: Option<[u8; 16]>, landed: bool },
    /// The local file failed: its errno and message (a full disk stops the job, python side).
    Disk { errno: i32, message: String },
    /// The store failed, in obstore's words, so the same classification reads it.
    Store { message: String },
}

/// Bodies from this size go to the writer thread, to be hashed side by side with others (md5.rs:
/// 16 bodies of 1 MiB in about the time of one); a smaller one costs less to hash at once.
const LANES_MIN: usize = 16 * 1024;
/// Bodies hashed at once: the lanes of an AVX-512 register.
const LANES: usize = 16;
/// The longest a body waits for others still arriving (a stalled body must not hold the rest).
const MAX_WAIT: Duration = Duration::from_millis(5);

/// Which tickets' files may still be written, and which are being written. A ticket is claimed
/// just before its file is written and released once it is written and landed; `cancel` takes
/// a ticket not claimed yet, or waits for its release: so once `cancel` returns, the file is
/// either there already or will never be.
#[derive(Default)]
struct Tickets {
    held: Mutex<(HashSet<u64>, HashSet<u64>)>, // (unwritten, being written)
    released: Condvar,
}

impl Tickets {
    fn add(&self, tickets: impl Iterator<Item = u64>) {
        self.held.lock().unwrap().0.extend(tickets);
    }

    /// Whether the file of `ticket` may be written (it was not cancelled); if so, it is being
    /// written until `release`.
    fn claim(&self, ticket: u64) -> bool {
        let mut held = self.held.lock().unwrap();
        let claimed = held.0.remove(&ticket);
        if claimed {
            held.1.insert(ticket);
        }
        claimed
    }

    /// A GET that failed: it has no file to write.
    fn failed(&self, ticket: u64) {
        self.held.lock().unwrap().0.remove(&ticket);
    }

    fn release(&self, ticket: u64) {
        self.held.lock().unwrap().1.remove(&ticket);
        self.released.notify_all();
    }

    fn cancel(&self, ticket: u64) {
        let mut held = self.held.lock().unwrap();
        held.0.remove(&ticket);
        while held.1.contains(&ticket) {
            held = self.released.wait(held).unwrap();
        }
    }

    fn cancel_all(&self) {
        let mut held = self.held.lock().unwrap();
        held.0.clear();
        while !held.1.is_empty() {
            held = self.released.wait(held).unwrap();
        }
    }
}

/// Bodies waiting for the writer thread, and how many fetches are receiving one.
#[derive(Default)]
struct Waiting {
    bodies: VecDeque<(Job, Bytes)>,
    arriving: usize,
    closed: bool,
}

/// The writer thread's side: bodies from `LANES_MIN` are hashed in lanes with the others that
/// came meanwhile (waiting at most `MAX_WAIT`, and only for bodies already arriving, never for
/// a round trip), then written and landed.
struct Writer {
    waiting: Mutex<Waiting>,
    changed: Condvar,
}

impl Writer {
    fn arriving(&self, change: isize) {
        let mut waiting = self.waiting.lock().unwrap();
        waiting.arriving = waiting.arriving.saturating_add_signed(change);
        drop(waiting);
        self.changed.notify_one();
    }

    fn hand(&self, job: Job, body: Bytes) {
        self.waiting.lock().unwrap().bodies.push_back((job, body));
        self.changed.notify_one();
    }

    fn close(&self) {
        self.waiting.lock().unwrap().closed = true;
        self.changed.notify_all();
    }

    /// The next bodies to hash and write together; None once closed.
    fn next_batch(&self) -> Option<Vec<(Job, Bytes)>> {
        let mut waiting = self.waiting.lock().unwrap();
        let mut deadline: Option<Instant> = None;
        loop {
            if waiting.closed {
                return None;
            }
            if waiting.bodies.is_empty() {
                waiting = self.changed.wait(waiting).unwrap();
                continue;
            }
            if waiting.bodies.len() >= LANES || waiting.arriving == 0 {
                break;
            }
            let until = *deadline.get_or_insert_with(|| Instant::now() + MAX_WAIT);
            let now = Instant::now();
            if now >= until {
                break;
            }
            waiting = self.changed.wait_timeout(waiting, until - now).unwrap().0;
        }
        let count = waiting.bodies.len().min(LANES);
        Some(waiting.bodies.drain(..count).collect())
    }

    fn serve(&self, tickets: &Tickets, outbox: &Outbox<Outcome>) {
        while let Some(batch) = self.next_batch() {
            let hashed: Vec<&[u8]> = batch.iter().filter(|(job, _)| job.hash).map(|(_, body)| &body[..]).collect();
            let mut digests = md5_of(&hashed).into_iter();
            for (job, body) in &batch {
                let md5 = if job.hash { digests.next() } else { None };
                outbox.push(job.ticket, write_and_land(tickets, job, body, md5));
            }
        }
    }
}

/// The writer thread, stopped and joined when dropped.
struct WriterThread {
    writer: Arc<Writer>,
    thread: Option<JoinHandle<()>>,
}

impl WriterThread {
    fn start(tickets: Arc<Tickets>, outbox: Arc<Outbox<Outcome>>) -> std::io::Result<Self> {
        let writer = Arc::new(Writer { waiting: Mutex::default(), changed: Condvar::new() });
        let thread = std::thread::Builder::new().name("s3bulk-writer".into()).spawn({
            let writer = writer.clone();
            move || writer.serve(&tickets, &outbox)
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

/// Credentials handed over by Python (botocore's chain, refreshed there), read at each request.
#[derive(Debug)]
struct Handed(RwLock<Arc<AwsCredential>>);

#[async_trait]
impl CredentialProvider for Handed {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        Ok(self.0.read().unwrap().clone())
    }
}

/// A batch-fed GET client for one bucket, with its own runtime thread.
#[pyclass(module = "s3bulk_native")]
pub struct Gets {
    runner: Runner<Job>,
    outbox: Arc<Outbox<Outcome>>,
    tickets: Arc<Tickets>,
    writer: WriterThread,
    watched: UnixStream,
    credentials: Option<Arc<Handed>>,
}

#[pymethods]
impl Gets {
    /// `config` and `client_options`: obstore's S3Store settings as text (`region`,
    /// `endpoint`, `virtual_hosted_style_request`, `allow_http`, `timeout`, ...). `credentials`:
    /// (key id, secret, token or None), or None for unsigned requests.
    #[new]
    #[pyo3(signature = (bucket, config, client_options, credentials))]
    fn new(
        bucket: String,
        config: HashMap<String, String>,
        client_options: HashMap<String, String>,
        credentials: Option<(String, String, Option<String>)>,
    ) -> PyResult<Self> {
        let mut builder = AmazonS3Builder::new().with_bucket_name(bucket).with_client_options(options_from(client_options)?).with_retry(RetryConfig {
            max_retries: 0, // the engine retries whole items, with its one policy
            retry_timeout: Duration::from_secs(120),
            ..Default::default()
        });
        for (name, value) in config {
            let key = AmazonS3ConfigKey::from_str(&name).map_err(|err| PyValueError::new_err(err.to_string()))?;
            builder = builder.with_config(key, value);
        }
        let handed = credentials.map(|(key_id, secret_key, token)| Arc::new(Handed(RwLock::new(Arc::new(AwsCredential { key_id, secret_key, token })))));
        if let Some(handed) = &handed {
            builder = builder.with_credentials(handed.clone());
        }
        let store = Arc::new(builder.build().map_err(|err| PyValueError::new_err(err.to_string()))?);
        let (outbox, watched) = Outbox::new()?;
        let outbox = Arc::new(outbox);
        let tickets = Arc::new(Tickets::default());
        let writer = WriterThread::start(tickets.clone(), outbox.clone())?;
        let runner = Runner::start("s3bulk-gets", outbox.clone(), {
            let (tickets, hand) = (tickets.clone(), writer.writer.clone());
            move |job: Job| {
                let (store, tickets, hand) = (store.clone(), tickets.clone(), hand.clone());
                async move { fetch(&store, job, &tickets, &hand).await }
            }
        })?;
        Ok(Gets { runner, outbox, tickets, writer, watched, credentials: handed })
    }

    /// The socket to watch: readable when outcomes wait (`take` them, after reading it empty).
    fn fileno(&self) -> i32 {
        self.watched.as_raw_fd()
    }

    /// Start GETs: (ticket, key, end, path, mtime, hash, landing or None) each, landing as
    /// (target, replace, size, md5 or None). One wake-up of the runtime for the whole batch.
    #[allow(clippy::type_complexity)]
    fn submit(&self, jobs: Vec<(u64, String, u64, String, f64, bool, Option<(String, bool, u64, Option<Vec<u8>>)>)>) -> PyResult<()> {
        let jobs = jobs
            .into_iter()
            .map(|(ticket, key, end, path, mtime, hash, landing)| {
                let landing = landing.map(|(target, replace, size, md5)| Landing { target, replace, size, md5 });
                Job { ticket, key, end, path, mtime, hash, landing }
            })
            .collect::<Vec<Job>>();
        self.tickets.add(jobs.iter().map(|job| job.ticket));
        self.runner.send(jobs)
    }

    /// The caller of `ticket` has gone: once this returns, its file is either written (and
    /// landed, if it was right) or never will be. Its outcome still comes.
    fn cancel(&self, py: Python<'_>, ticket: u64) {
        py.detach(|| self.tickets.cancel(ticket));
    }

    /// The outcomes finished since the last call: (ticket, bytes written, MD5 or None, landed,
    /// errno, message). A message means it failed: errno 0 for the store, else the local file's.
    #[allow(clippy::type_complexity)]
    fn take<'py>(&self, py: Python<'py>) -> Vec<(u64, u64, Option<Bound<'py, PyBytes>>, bool, i32, Option<String>)> {
        self.outbox
            .take()
            .into_iter()
            .map(|(ticket, outcome)| match outcome {
                Outcome::Written { written, md5, landed } => (ticket, written, md5.map(|digest| PyBytes::new(py, &digest)), landed, 0, None),
                Outcome::Disk { errno, message } => (ticket, 0, None, false, errno, Some(message)),
                Outcome::Store { message } => (ticket, 0, None, false, 0, Some(message)),
            })
            .collect()
    }

    /// New credentials for the requests from now on.
    fn set_credentials(&self, key_id: String, secret_key: String, token: Option<String>) -> PyResult<()> {
        let handed = self.credentials.as_ref().ok_or_else(|| PyValueError::new_err("unsigned client"))?;
        *handed.0.write().unwrap() = Arc::new(AwsCredential { key_id, secret_key, token });
        Ok(())
    }

    /// Stop: GETs not finished are dropped, and once this returns no file is written any more.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        self.runner.stop(py)?;
        py.detach(|| {
            self.tickets.cancel_all();
            self.writer.stop()
        })
        .then_some(())
        .ok_or_else(|| PyOSError::new_err("the writer thread of the native part panicked"))
    }
}

/// The job's body fetched; a small one written, hashed and landed here (its outcome), a larger
/// one handed to the writer thread (None: the writer gives its outcome).
async fn fetch(store: &AmazonS3, job: Job, tickets: &Tickets, writer: &Writer) -> Option<(u64, Outcome)> {
    let ticket = job.ticket;
    let large = job.end > LANES_MIN as u64; // the body asked for is at most end - 1 bytes long
    let (body, arriving) = get(store, &job.key, job.end, large.then_some(writer)).await;
    let body = match body {
        Ok(body) => body,
        Err(message) => {
            tickets.failed(ticket);
            return Some((ticket, Outcome::Store { message }));
        }
    };
    if body.len() >= LANES_MIN {
        writer.hand(job, body);
        drop(arriving); // handed first: the writer, told none is arriving, finds it waiting
        return None;
    }
    let md5 = job.hash.then(|| md5_of(&[&body[..]])[0]);
    Some((ticket, write_and_land(tickets, &job, &body, md5)))
}

/// A body the writer may wait for: counted while it arrives (until dropped).
struct Arriving<'a>(&'a Writer);

impl<'a> Arriving<'a> {
    fn new(writer: &'a Writer) -> Self {
        writer.arriving(1);
        Arriving(writer)
    }
}

impl Drop for Arriving<'_> {
    fn drop(&mut self) {
        self.0.arriving(-1);
    }
}

/// The body into the job's file, landed if right; nothing if the job was cancelled.
fn write_and_land(tickets: &Tickets, job: &Job, body: &[u8], md5: Option<[u8; 16]>) -> Outcome {
    if !tickets.claim(job.ticket) {
        return Outcome::Store { message: "cancelled".into() };
    }
    let outcome = match write_file(&job.path, body, job.mtime) {
        Ok(()) => {
            let landed = job.landing.as_ref().is_some_and(|landing| land(&job.path, landing, body.len() as u64, md5.as_ref()));
            Outcome::Written { written: body.len() as u64, md5, landed }
        }
        Err(err) => Outcome::Disk { errno: err.raw_os_error().unwrap_or(0), message: err.to_string() },
    };
    tickets.release(job.ticket);
    outcome
}

/// The MD5 of each body, side by side in SIMD lanes.
fn md5_of(inputs: &[&[u8]]) -> Vec<[u8; 16]> {
    let mut digests = vec![[0u8; 16]; inputs.len()];
    engine().hash_many(inputs, &mut digests);
    digests
}

/// The file at `path` moved to its target if its size and MD5 are the ones `landing` expects, as
/// s3bulk/_stores/landing.py would: rename() over a file that was there before, link() (which
/// fails rather than replace) where none was. false: left where it is, for the caller's
/// `land`, which says why it cannot (a directory in the way, a file that appeared, a filesystem
/// without hard links).
fn land(path: &str, landing: &Landing, written: u64, md5: Option<&[u8; 16]>) -> bool {
    let right = written == landing.size && landing.md5.as_deref().is_none_or(|expected| md5.is_some_and(|md5| md5[..] == *expected));
    if !right {
        return false;
    }
    if landing.replace {
        return std::fs::rename(path, &landing.target).is_ok();
    }
    if std::fs::hard_link(path, &landing.target).is_err() {
        return false;
    }
    let _ = std::fs::remove_file(path); // landed: the target holds it now
    true
}

/// The bytes `0..end` of `key`, or the error in obstore's words (errors.classify reads them);
/// `writer` (when given) counts the body as arriving from its first byte on.
async fn get<'a>(store: &AmazonS3, key: &str, end: u64, writer: Option<&'a Writer>) -> (Result<Bytes, String>, Option<Arriving<'a>>) {
    let path = match ObjectPath::parse(key) {
        Ok(path) => path,
        Err(err) => return (Err(format!("Could not parse path: {err}")), None),
    };
    let options = GetOptions { range: Some(GetRange::Bounded(0..end)), ..Default::default() };
    let (body, arriving) = match store.get_opts(&path, options).await {
        Ok(result) => {
            let arriving = writer.map(Arriving::new);
            (result.bytes().await, arriving)
        }
        Err(err) => (Err(err), None),
    };
    (body.map_err(|err| format!("{err}\n\nDebug source:\n{err:#?}")), arriving)
}

/// `data` into a new file at `path`, given the time `mtime` (when not 0) before it is closed.
fn write_file(path: &str, data: &[u8], mtime: f64) -> std::io::Result<()> {
    let mut file: File = OpenOptions::new().write(true).create(true).truncate(true).mode(0o666).open(path)?;
    file.write_all(data)?;
    if mtime != 0.0 {
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs_f64(mtime.max(0.0));
        file.set_times(FileTimes::new().set_modified(time).set_accessed(time))?;
    }
    Ok(())
}
