//! GETs of small objects into files, handed over in batches.
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
//! s3bulk/_stores/gets.py is the Python side.

use std::collections::{HashMap, HashSet};
use std::fs::{File, FileTimes, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::str::FromStr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, AwsCredential};
use object_store::path::Path as ObjectPath;
use object_store::{CredentialProvider, GetOptions, GetRange, ObjectStore, RetryConfig};
use pyo3::exceptions::PyValueError;
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

/// The tickets whose files are not written yet. A ticket leaves this set when its file is about
/// to be written (which happens while the set is held) or when it is cancelled: so once `cancel`
/// returns, the file is either there already or will never be.
type Unwritten = Mutex<HashSet<u64>>;

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
    unwritten: Arc<Unwritten>,
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
        let unwritten = Arc::new(Unwritten::default());
        let runner = Runner::start("s3bulk-gets", outbox.clone(), {
            let unwritten = unwritten.clone();
            move |job: Job| {
                let (store, unwritten) = (store.clone(), unwritten.clone());
                async move { (job.ticket, fetch(&store, job, &unwritten).await) }
            }
        })?;
        Ok(Gets { runner, outbox, unwritten, watched, credentials: handed })
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
        self.unwritten.lock().unwrap().extend(jobs.iter().map(|job| job.ticket));
        self.runner.send(jobs)
    }

    /// The caller of `ticket` has gone: once this returns, its file is either written (and
    /// landed, if it was right) or never will be. Its outcome still comes.
    fn cancel(&self, ticket: u64) {
        self.unwritten.lock().unwrap().remove(&ticket);
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
        self.runner.stop(py)
    }
}

async fn fetch(store: &AmazonS3, job: Job, unwritten: &Mutex<HashSet<u64>>) -> Outcome {
    let body = get(store, &job.key, job.end).await;
    let mut held = unwritten.lock().unwrap(); // held until the file is written and landed
    if !held.remove(&job.ticket) {
        return Outcome::Store { message: "cancelled".into() };
    }
    let body = match body {
        Ok(body) => body,
        Err(message) => return Outcome::Store { message },
    };
    // Small bodies (the caller's choice): written on this thread, which has nothing else to do.
    if let Err(err) = write_file(&job.path, &body, job.mtime) {
        return Outcome::Disk { errno: err.raw_os_error().unwrap_or(0), message: err.to_string() };
    }
    let md5 = job.hash.then(|| {
        let mut digest = [[0u8; 16]];
        engine().hash_many(&[&body[..]], &mut digest);
        digest[0]
    });
    let landed = job.landing.is_some_and(|landing| land(&job.path, &landing, body.len() as u64, md5.as_ref()));
    drop(held);
    Outcome::Written { written: body.len() as u64, md5, landed }
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

/// The bytes `0..end` of `key`, or the error in obstore's words (errors.classify reads them).
async fn get(store: &AmazonS3, key: &str, end: u64) -> Result<impl std::ops::Deref<Target = [u8]>, String> {
    let path = ObjectPath::parse(key).map_err(|err| format!("Could not parse path: {err}"))?;
    let options = GetOptions { range: Some(GetRange::Bounded(0..end)), ..Default::default() };
    let body = match store.get_opts(&path, options).await {
        Ok(result) => result.bytes().await,
        Err(err) => Err(err),
    };
    body.map_err(|err| format!("{err}\n\nDebug source:\n{err:#?}"))
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
