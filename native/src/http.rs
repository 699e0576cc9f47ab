//! Signed S3 requests, sent by a runtime thread of their own and handed back in batches.
//!
//! The signed client (s3bulk/_stores/s3.py) sends what obstore cannot: listings with raw
//! StartAfter and tokens, keys of any shape, multipart steps. Through aiohttp and botocore's
//! signer, importing them was most of a short command's start-up (`ls` of one key: 0.22 of
//! 0.29 s, against a bare obstore loop's 0.05 s in all). Here object_store's HTTP client and
//! SigV4 signer (the crate under obstore, already part of this module) send them instead: the
//! event loop hands over the requests one of its turns asks for in one call, and one wake-up
//! hands back every answer finished meanwhile (`wake`). s3bulk/_stores/native_http.py is
//! the Python side; it keeps what decides (retries, errors, regions) in Python.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::str::FromStr;
use std::sync::Arc;

use bytes::Bytes;
use object_store::aws::{AwsAuthorizer, AwsCredential};
use object_store::client::{HttpClient, HttpConnector, HttpErrorKind, HttpRequest, HttpRequestBody, ReqwestConnector};
use object_store::{ClientConfigKey, ClientOptions};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;
use crate::wake::{Outbox, Runner};

/// One request: sent as it is, signed first when `credentials` are given.
struct Request {
    ticket: u64,
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Bytes, // Python's bytes object itself, held (not copied) until the request is done
    signing: Option<Signing>,
}

/// What SigV4 needs besides the request: who signs, for which service and region, and the
/// body's SHA-256 when the caller hashed it already (else it is hashed here).
struct Signing {
    credential: AwsCredential,
    service: String,
    region: String,
    body_sha256: Option<Vec<u8>>,
}

/// An answer (status, headers with names in lower case, body), or why none came: whether no
/// connection was made, and the client's words.
enum Answer {
    Reply { status: u16, headers: Vec<(String, String)>, body: Bytes },
    Failed { unreachable: bool, message: String },
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
        let options = options_from(client_options)?;
        let client = ReqwestConnector::default().connect(&options).map_err(|err| PyValueError::new_err(err.to_string()))?;
        let (outbox, watched) = Outbox::new()?;
        let outbox = Arc::new(outbox);
        let runner = Runner::start("s3bulk-http", outbox.clone(), move |request: Request| {
            let client = client.clone();
            async move {
                let ticket = request.ticket;
                Some((ticket, send(&client, request).await.unwrap_or_else(|message| Answer::Failed { unreachable: false, message })))
            }
        })?;
        Ok(Http { runner, outbox, watched })
    }

    /// The socket to watch: readable when answers wait (`take` them, after reading it empty).
    fn fileno(&self) -> i32 {
        self.watched.as_raw_fd()
    }

    /// Send requests: (ticket, method, url, headers, body, signing or None) each, signing as
    /// ((key id, secret, token or None), service, region, body's SHA-256 or None).
    #[allow(clippy::type_complexity)]
    fn submit(
        &self,
        requests: Vec<(u64, String, String, Vec<(String, String)>, PyBackedBytes, Option<((String, String, Option<String>), String, String, Option<Vec<u8>>)>)>,
    ) -> PyResult<()> {
        let sent = requests
            .into_iter()
            .map(|(ticket, method, url, headers, body, signing)| {
                let signing = signing.map(|((key_id, secret_key, token), service, region, body_sha256)| Signing {
                    credential: AwsCredential { key_id, secret_key, token },
                    service,
                    region,
                    body_sha256,
                });
                Request { ticket, method, url, headers, body: Bytes::from_owner(body), signing }
            })
            .collect();
        self.runner.send(sent)
    }

    /// The answers finished since the last call: (ticket, status, headers, body, failure or None),
    /// failure as (no connection was made, message).
    #[allow(clippy::type_complexity)]
    fn take<'py>(&self, py: Python<'py>) -> Vec<(u64, u16, Vec<(String, String)>, Bound<'py, PyBytes>, Option<(bool, String)>)> {
        self.outbox
            .take()
            .into_iter()
            .map(|(ticket, answer)| match answer {
                Answer::Reply { status, headers, body } => (ticket, status, headers, PyBytes::new(py, &body), None),
                Answer::Failed { unreachable, message } => (ticket, 0, Vec::new(), PyBytes::new(py, b""), Some((unreachable, message))),
            })
            .collect()
    }

    /// Stop: requests not answered are dropped.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        self.runner.stop(py)
    }
}

/// The request signed and sent; Err: it could not be built (a header that is not valid).
async fn send(client: &HttpClient, request: Request) -> Result<Answer, String> {
    let mut built: HttpRequest = http::Request::builder()
        .method(request.method.as_str())
        .uri(request.url.as_str())
        .body(HttpRequestBody::from(request.body))
        .map_err(|err| err.to_string())?;
    for (name, value) in &request.headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|err| err.to_string())?;
        let value = http::HeaderValue::from_str(value).map_err(|err| err.to_string())?;
        built.headers_mut().insert(name, value);
    }
    if let Some(signing) = &request.signing {
        AwsAuthorizer::new(&signing.credential, &signing.service, &signing.region)
            .try_authorize(&mut built, signing.body_sha256.as_deref())
            .map_err(|err| err.to_string())?;
    }
    let response = match client.execute(built).await {
        Ok(response) => response,
        Err(err) => return Ok(failed(err.kind(), &err)),
    };
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
        .collect();
    match response.into_body().bytes().await {
        Ok(body) => Ok(Answer::Reply { status, headers, body }),
        Err(err) => Ok(failed(err.kind(), &err)),
    }
}

/// Why no answer came, in the client's words: for a connection never made, only the innermost
/// cause ("tcp connect error: Connection refused (os error 111)"), which says it all; else each
/// cause the message does not already hold.
fn failed(kind: HttpErrorKind, err: &dyn std::error::Error) -> Answer {
    let unreachable = matches!(kind, HttpErrorKind::Connect);
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
    Answer::Failed { unreachable, message }
}

/// obstore's client options (text, as `_stores/objects.client_options` writes them) as
/// object_store's: the batch GETs and these requests are configured alike.
pub fn options_from(client_options: HashMap<String, String>) -> PyResult<ClientOptions> {
    let mut options = ClientOptions::new();
    for (name, value) in client_options {
        let key = ClientConfigKey::from_str(&name).map_err(|err| PyValueError::new_err(err.to_string()))?;
        options = options.with_config(key, value);
    }
    Ok(options)
}
