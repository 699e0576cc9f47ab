//! Signed S3 requests, sent by a runtime thread of their own and handed back in batches.
//!
//! The signed client (s3bulk/_stores/s3.py) sends what obstore cannot: listings with raw
//! StartAfter and tokens, keys of any shape, multipart steps. Through aiohttp and botocore's
//! signer, importing them was most of a short command's start-up (`ls` of one key: 0.22 of
//! 0.29 s, against a bare obstore loop's 0.05 s in all). Here object_store's SigV4 signer (the
//! crate under obstore) signs them and the native part's client sends them (`transport`): the
//! event loop hands over the requests one of its turns asks for in one call, and one wake-up
//! hands back every answer finished meanwhile (`wake`). s3bulk/_stores/native_http.py is
//! the Python side; it keeps what decides (retries, errors, regions) in Python.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::checksums::Algorithm;
use crate::filebody::{Digests, FileRange};
use crate::pace::{whole, Pace};
use crate::transport::Transport;
use crate::wake::{Outbox, Runner};
use base64::prelude::{Engine, BASE64_STANDARD};
use bytes::Bytes;
use object_store::aws::{AwsAuthorizer, AwsCredential};
use object_store::client::{HttpErrorKind, HttpRequest, HttpRequestBody};
use object_store::{ClientConfigKey, ClientOptions};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;

/// One request: sent as it is, signed first when `credentials` are given.
struct Request {
    ticket: u64,
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Body,
    signing: Option<Signing>,
}

/// What a request sends.
enum Body {
    /// Python's bytes object itself, held (not copied) until the request is done.
    Bytes(Bytes),
    /// A range of a file, read as it is sent (`filebody`), with what checks it.
    File(FileRange, Check),
}

/// What a file's range is sent with, besides the SHA-256 of a signed payload: its checksum
/// (x-amz-checksum-*), its Content-MD5 (always, or only when nothing else checks it).
#[derive(Clone, Copy)]
enum Check {
    Checksum(Algorithm),
    Md5,
    Unnamed,
}

impl Check {
    /// The algorithm Python names: one of S3's checksums, "MD5", or None.
    fn named(name: Option<&str>) -> PyResult<Self> {
        match name {
            None => Ok(Self::Unnamed),
            Some(name) if name.eq_ignore_ascii_case("MD5") => Ok(Self::Md5),
            Some(name) => Algorithm::named(name).map(Self::Checksum),
        }
    }

    fn algorithm(self) -> Option<Algorithm> {
        match self {
            Self::Checksum(algorithm) => Some(algorithm),
            Self::Md5 | Self::Unnamed => None,
        }
    }
}

/// What SigV4 needs besides the request: who signs, for which service and region, the body's
/// SHA-256 when the caller hashed it already (else it is hashed here), and whether the payload
/// is signed at all (else it goes as UNSIGNED-PAYLOAD, protected by its checksum).
struct Signing {
    credential: AwsCredential,
    service: String,
    region: String,
    body_sha256: Option<Vec<u8>>,
    sign_payload: bool,
}

/// A request as Python's `native_http.Request` names its fields.
#[derive(FromPyObject)]
struct RequestArg {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: BodyArg,
    signing: Option<SigningArg>,
}

/// A body as Python gives it: bytes, or a range of a file (`native_http.FileRange`).
#[derive(FromPyObject)]
enum BodyArg {
    Bytes(PyBackedBytes),
    File(FileArg),
}

/// `native_http.FileRange`: `length` bytes of the file at `path` from `offset`, sent with its
/// `checksum` (an algorithm, "MD5", or None).
#[derive(FromPyObject)]
struct FileArg {
    path: PathBuf,
    offset: u64,
    length: u64,
    checksum: Option<String>,
}

/// `Signing` as Python's `native_http.Signing` names its fields.
#[derive(FromPyObject)]
struct SigningArg {
    key_id: String,
    secret_key: String,
    token: Option<String>,
    service: String,
    region: String,
    body_sha256: Option<Vec<u8>>,
    sign_payload: bool,
}

impl RequestArg {
    fn request(self, ticket: u64) -> PyResult<Request> {
        let RequestArg { method, url, headers, body, signing } = self;
        let body = match body {
            BodyArg::Bytes(body) => Body::Bytes(Bytes::from_owner(body)),
            BodyArg::File(FileArg { path, offset, length, checksum }) => Body::File(FileRange { path, offset, length }, Check::named(checksum.as_deref())?),
        };
        Ok(Request { ticket, method, url, headers, body, signing: signing.map(SigningArg::signing) })
    }
}

impl SigningArg {
    fn signing(self) -> Signing {
        let SigningArg { key_id, secret_key, token, service, region, body_sha256, sign_payload } = self;
        Signing { credential: AwsCredential { key_id, secret_key, token }, service, region, body_sha256, sign_payload }
    }
}

/// An answer (status, headers with names in lower case, body, the checksum this side computed of
/// a file's range and sent), or why none came: whether no connection was made, and the client's
/// words.
enum Answer {
    Reply { status: u16, headers: Vec<(String, String)>, body: Vec<Bytes>, checksum: Option<(String, String)> },
    Failed { unreachable: bool, message: String },
}

/// An answer `Http.take` hands back: its request's ticket, the status, the headers (names in
/// lower case), the body, and the checksum a file's range was sent with ((header, value), or
/// None).
#[pyclass(module = "s3bulk_native", frozen, get_all)]
pub struct Reply {
    ticket: u64,
    status: u16,
    headers: Vec<(String, String)>,
    body: Py<PyBytes>,
    checksum: Option<(String, String)>,
}

/// A request that got no answer (or a body cut short), as `Http.take` and `Gets.take` hand it
/// back: its ticket, whether no connection was made at all, and the client's words.
#[pyclass(module = "s3bulk_native", frozen, get_all)]
pub struct Unanswered {
    pub ticket: u64,
    pub unreachable: bool,
    pub message: String,
}

/// A client for signed requests, with its own runtime thread.
#[pyclass(module = "s3bulk_native")]
pub struct Http {
    runner: Runner<Request>,
    outbox: Arc<Outbox<Answer>>,
    watched: UnixStream,
}

#[pymethods]
impl Http {
    /// `client_options`: obstore's client options as text (`allow_http`, `timeout`, ...).
    #[new]
    fn new(client_options: HashMap<String, String>) -> PyResult<Self> {
        options_from(client_options.clone())?; // a bad option is refused here, as object_store would
        let transport = Transport::new(&client_options).map_err(PyValueError::new_err)?;
        let window = Pace::from_options(&client_options);
        let (outbox, watched) = Outbox::new()?;
        let outbox = Arc::new(outbox);
        let runner = Runner::start("s3bulk-http", outbox.clone(), move |request: Request| {
            let transport = transport.clone();
            async move {
                let ticket = request.ticket;
                let answer = match &request.body {
                    Body::File(range, check) => send_file(&transport, &request, range.clone(), *check, window).await,
                    Body::Bytes(body) => send(&transport, &request, body.clone(), window).await,
                };
                Some((ticket, answer.unwrap_or_else(|message| Answer::Failed { unreachable: false, message })))
            }
        })?;
        Ok(Http { runner, outbox, watched })
    }

    /// The socket to watch: readable when answers wait (`take` them, after reading it empty).
    fn fileno(&self) -> i32 {
        self.watched.as_raw_fd()
    }

    /// Send requests: (ticket, request) each, the request as Python's `native_http.Request`:
    /// a body as bytes, or a range of a file, read as it is sent (its checksum found here and
    /// sent as x-amz-checksum-*, its SHA-256 when the payload is signed; its MD5 goes as
    /// Content-MD5 when asked for or neither checks it); signed when `signing` is given.
    fn submit(&self, requests: Vec<(u64, RequestArg)>) -> PyResult<()> {
        let sent = requests.into_iter().map(|(ticket, request)| request.request(ticket)).collect::<PyResult<Vec<Request>>>()?;
        self.runner.send(sent)
    }

    /// The answers finished since the last call: a `Reply` each, or an `Unanswered`.
    fn take(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        self.outbox
            .take()
            .into_iter()
            .map(|(ticket, answer)| match answer {
                Answer::Reply { status, headers, body, checksum } => {
                    let body = python_bytes(py, &body).unbind();
                    Ok(Py::new(py, Reply { ticket, status, headers, body, checksum })?.into_any())
                }
                Answer::Failed { unreachable, message } => Ok(Py::new(py, Unanswered { ticket, unreachable, message })?.into_any()),
            })
            .collect()
    }

    /// Stop: requests not answered are dropped.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        self.runner.stop(py)
    }
}

/// The request as object_store's signer and `transport` take it, headers added and signed (with
/// `digest`, the body's SHA-256, when the caller has it); Err: a header that is not valid.
fn signed(request: &Request, body: HttpRequestBody, extra: &[(String, String)], digest: Option<&[u8]>) -> Result<HttpRequest, String> {
    let signer = request.signing.as_ref().map(|signing| {
        let authorizer = AwsAuthorizer::new(&signing.credential, &signing.service, &signing.region).with_sign_payload(signing.sign_payload);
        (authorizer, digest.or(signing.body_sha256.as_deref()))
    });
    built(&request.method, &request.url, request.headers.iter().chain(extra), body, signer)
}

/// A request as object_store's type has it, with `headers`, signed by `signer` (with the
/// body's SHA-256 when known, else the body is hashed) when given; Err: a header or URL that is
/// not valid. The batch GETs (gets.rs) build theirs here too.
pub fn built<'a>(
    method: &str,
    url: &str,
    headers: impl Iterator<Item = &'a (String, String)>,
    body: HttpRequestBody,
    signer: Option<(AwsAuthorizer<'_>, Option<&[u8]>)>,
) -> Result<HttpRequest, String> {
    let mut built: HttpRequest = http::Request::builder().method(method).uri(url).body(body).map_err(|err| err.to_string())?;
    for (name, value) in headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|err| err.to_string())?;
        let value = http::HeaderValue::from_str(value).map_err(|err| err.to_string())?;
        built.headers_mut().insert(name, value);
    }
    if let Some((authorizer, digest)) = signer {
        authorizer.try_authorize(&mut built, digest).map_err(|err| err.to_string())?;
    }
    Ok(built)
}

/// The request signed and sent; Err: it could not be built (a header that is not valid).
async fn send(transport: &Transport, request: &Request, body: Bytes, window: Duration) -> Result<Answer, String> {
    let built = signed(request, HttpRequestBody::from(body), &[], None)?;
    let response = match transport.execute(built).await {
        Ok(response) => response,
        Err(err) => return Ok(failed(matches!(err.kind(), HttpErrorKind::Connect), &err)),
    };
    let status = response.status().as_u16();
    let headers = header_pairs(response.headers());
    Ok(answered(status, headers, whole(response.into_body().bytes_stream(), window, |err| message_of(false, &err)).await, None))
}

/// A body's chunks copied into one Python bytes object: the only copy made of it.
fn python_bytes<'py>(py: Python<'py>, chunks: &[Bytes]) -> Bound<'py, PyBytes> {
    let size = chunks.iter().map(Bytes::len).sum();
    PyBytes::new_with(py, size, |buffer| {
        let mut at = 0;
        for chunk in chunks {
            buffer[at..at + chunk.len()].copy_from_slice(chunk);
            at += chunk.len();
        }
        Ok(())
    })
    .expect("a bytes object of the body's size")
}

/// The answer, or why its body did not come.
fn answered(status: u16, headers: Vec<(String, String)>, body: Result<Vec<Bytes>, String>, checksum: Option<(String, String)>) -> Answer {
    match body {
        Ok(body) => Answer::Reply { status, headers, body, checksum },
        Err(message) => Answer::Failed { unreachable: false, message },
    }
}

/// An answer's headers, names in lower case (as `http` keeps them), values as text.
pub fn header_pairs(headers: &http::HeaderMap) -> Vec<(String, String)> {
    headers.iter().map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned())).collect()
}

/// A request whose body is a range of a file: hashed first (by a blocking-pool thread: its
/// `checksum`, and its SHA-256 when the payload is signed), then signed and sent as the file is
/// read (object_store's request body is whole in memory: the signed request takes this one).
async fn send_file(transport: &Transport, request: &Request, range: FileRange, check: Check, window: Duration) -> Result<Answer, String> {
    let checksum = check.algorithm();
    let signed_payload = request.signing.as_ref().is_some_and(|signing| signing.sign_payload);
    let hashed = tokio::task::spawn_blocking({
        let (range, buffer) = (range.clone(), FileRange::buffer());
        move || range.digest(signed_payload, checksum, matches!(check, Check::Md5), buffer)
    })
    .await
    .map_err(|err| err.to_string())?;
    let (digests, file) = match hashed {
        Ok(hashed) => hashed,
        Err(err) => return Ok(Answer::Failed { unreachable: false, message: format!("cannot read {}: {err}", range.path.display()) }),
    };
    let headers = digest_headers(&range, checksum, &digests);
    let sent = checksum.and_then(|algorithm| headers.iter().find(|(name, _)| name == algorithm.header()).cloned());
    let built = signed(request, HttpRequestBody::empty(), &headers, digests.sha256.as_deref())?;
    let streamed = built.map(|_| range.body(file));
    let response = match transport.send(streamed).await {
        Ok(response) => response,
        Err(err) => return Ok(failed(matches!(err.kind(), HttpErrorKind::Connect), &err)),
    };
    let status = response.status().as_u16();
    let headers = header_pairs(response.headers());
    let body = whole(response.into_body().bytes_stream(), window, |err| message_of(false, &err)).await;
    Ok(answered(status, headers, body, sent))
}

/// The headers a file's range goes with: its length, and what checks it (its checksum, else its
/// Content-MD5 when the payload is not signed either).
fn digest_headers(range: &FileRange, checksum: Option<Algorithm>, digests: &Digests) -> Vec<(String, String)> {
    let mut headers = vec![("content-length".to_owned(), range.length.to_string())];
    if let (Some(algorithm), Some(value)) = (checksum, &digests.checksum) {
        headers.push((algorithm.header().to_owned(), BASE64_STANDARD.encode(value)));
    }
    if let Some(md5) = &digests.md5 {
        headers.push(("content-md5".to_owned(), BASE64_STANDARD.encode(md5)));
    }
    headers
}

/// Why no answer came, in the client's words: for a connection never made, only the innermost
/// cause ("tcp connect error: Connection refused (os error 111)"), which says it all; else each
/// cause the message does not already hold.
fn failed(unreachable: bool, err: &dyn std::error::Error) -> Answer {
    Answer::Failed { unreachable, message: message_of(unreachable, err) }
}

pub fn message_of(unreachable: bool, err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if unreachable {
            message = cause_text;
        } else if !message.contains(&cause_text) {
            message = format!("{message}: {cause_text}");
        }
        source = cause.source();
    }
    message
}

/// obstore's client options (text, as `_stores/objects.client_options` writes them) as
/// object_store's: the batch GETs and these requests are configured alike. `ca_bundle` (a PEM
/// file's path) is the transport's own, which object_store has no key for (`transport.rs`).
pub fn options_from(client_options: HashMap<String, String>) -> PyResult<ClientOptions> {
    let mut options = ClientOptions::new();
    for (name, value) in client_options {
        if name == "ca_bundle" {
            continue;
        }
        let key = ClientConfigKey::from_str(&name).map_err(|err| PyValueError::new_err(err.to_string()))?;
        options = options.with_config(key, value);
    }
    Ok(options)
}
