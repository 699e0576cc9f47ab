//! The one HTTP client of the native part: hyper's HTTP/1 client, pooled by hyper-util, over
//! rustls, through the proxy the environment names (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY,
//! NO_PROXY). The batch GETs (gets.rs) and the signed client's requests (http.rs) send through
//! it; object_store lends its request type and SigV4 signer.
//!
//! Why not reqwest, object_store's own client: its URL type resolves "." and ".." path segments
//! (escaped as %2E too, as the WHATWG rules say), so an S3 key such as `a/../b` was sent as `b`
//! and those keys went through a second HTTP stack (aiohttp); and it does not expose hyper's
//! `http1_max_buf_size`, for which it was vendored and patched. hyper's `Uri` sends a path as it
//! is written.
//!
//! What reqwest did here and this does too: no redirect is followed (one comes back as the
//! answer, which Python reads: S3's wrong-region answers are signed again for the right region,
//! and no header, the session token among them, goes to another host); a connect timeout; a read
//! timeout, from the request until its answer's head and then between two pieces of its body; a
//! total timeout; TLS verified against the platform's roots (or a CA bundle) unless told not to;
//! plain HTTP refused unless allowed.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::uri::Scheme;
use http::{HeaderValue, Uri};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::legacy::Client;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use object_store::client::{HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpResponseBody};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_platform_verifier::BuilderVerifierExt;
use tokio::time::{Instant, Sleep};
use tower_service::Service;

pub type BoxError = Box<dyn StdError + Send + Sync>;

/// A request body as the client sends it: bytes (object_store's `HttpRequestBody`), or a file's
/// range read as it goes (`filebody`).
pub type Outgoing = UnsyncBoxBody<Bytes, BoxError>;

/// The most a connection reads at once, and so the largest piece of a body it hands out. hyper
/// grows a connection's read buffer to ~408 KiB, and every piece of a body shares that buffer:
/// while the writer thread still holds one, the connection's next read needs a new buffer. With
/// 32 GETs of 1 MiB in flight those buffers were the largest part of a download's memory
/// (heaptrack: 37 MiB live at the peak). It also bounds a response's head, which must fit:
/// S3's are a few KiB (user metadata is at most 2 KiB).
const READ_AT_ONCE: usize = 128 * 1024;

/// Sends requests; cheap to clone (one pool of connections for all clones).
#[derive(Clone)]
pub struct Transport {
    client: Client<Connector, Outgoing>,
    proxies: Arc<Matcher>,
    allow_http: bool,
    user_agent: HeaderValue,
    read_timeout: Option<Duration>,
    total_timeout: Option<Duration>,
}

impl Transport {
    /// A client as obstore's options (text, as `_stores/objects.client_options` writes them)
    /// describe one: `allow_http`, `allow_invalid_certificates`, `connect_timeout`, `timeout`,
    /// `read_timeout`, `pool_max_idle_per_host`; Err names the option that is not valid.
    pub fn new(options: &HashMap<String, String>) -> Result<Self, String> {
        let duration = |name: &str| options.get(name).map(|text| humantime::parse_duration(text).map_err(|err| format!("{name}: {err}"))).transpose();
        let flag = |name: &str| options.get(name).is_some_and(|text| text == "true");
        let tls = Arc::new(tls_config(flag("allow_invalid_certificates"), options.get("ca_bundle").map(String::as_str))?);
        let proxies = Arc::new(Matcher::from_env());
        let connector = Connector::new(tls, proxies.clone(), duration("connect_timeout")?);
        let mut builder = Client::builder(TokioExecutor::new());
        builder.timer(TokioTimer::new()).pool_timer(TokioTimer::new()).http1_max_buf_size(READ_AT_ONCE);
        if let Some(most) = options.get("pool_max_idle_per_host") {
            builder.pool_max_idle_per_host(most.parse().map_err(|_| format!("pool_max_idle_per_host: {most}"))?);
        }
        Ok(Transport {
            client: builder.build(connector),
            proxies,
            allow_http: flag("allow_http"),
            user_agent: HeaderValue::from_static(concat!("s3bulk-native/", env!("CARGO_PKG_VERSION"))),
            read_timeout: duration("read_timeout")?,
            total_timeout: duration("timeout")?,
        })
    }

    /// A request whose body object_store built (bytes, or nothing).
    pub async fn execute(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        self.send(request.map(|body| body.map_err(BoxError::from).boxed_unsync())).await
    }

    /// The request sent; its answer as soon as its head came, the body read as it comes (each
    /// piece within the read timeout, all of it within the total one).
    pub async fn send(&self, mut request: http::Request<Outgoing>) -> Result<HttpResponse, HttpError> {
        if request.uri().scheme() != Some(&Scheme::HTTPS) && !self.allow_http {
            return Err(HttpError::new(HttpErrorKind::Request, Refused("plain HTTP is not allowed here (allow_http)")));
        }
        let headers = request.headers_mut();
        headers.entry(http::header::USER_AGENT).or_insert_with(|| self.user_agent.clone());
        if request.uri().scheme() == Some(&Scheme::HTTP) {
            // a plain request through a proxy is sent to it whole (absolute-form): its credentials go along
            if let Some(auth) = self.proxies.intercept(request.uri()).and_then(|proxy| proxy.basic_auth().cloned()) {
                request.headers_mut().insert(http::header::PROXY_AUTHORIZATION, auth);
            }
        }
        let total = self.total_timeout.map(|timeout| Box::pin(tokio::time::sleep(timeout)));
        let head_within = [self.read_timeout, self.total_timeout].into_iter().flatten().min();
        let answer = self.client.request(request);
        let answer = match head_within {
            Some(within) => tokio::time::timeout(within, answer).await.map_err(|_| timed_out())?,
            None => answer.await,
        };
        let answer = answer.map_err(|err| {
            let kind = if err.is_connect() { HttpErrorKind::Connect } else { HttpErrorKind::Request };
            HttpError::new(kind, err)
        })?;
        let read_timeout = self.read_timeout;
        Ok(answer.map(|body| {
            let idle = read_timeout.map(|timeout| Box::pin(tokio::time::sleep(timeout)));
            HttpResponseBody::new(Timed { body, read_timeout, idle, total })
        }))
    }
}

/// A TLS configuration: the platform's roots (and SSL_CERT_FILE); the certificates of a PEM file
/// instead (`ca_bundle`: AWS_CA_BUNDLE or a profile's `ca_bundle`, which botocore trusts in the
/// platform's place too); or, when `trust_any` (`allow_invalid_certificates`, `--no-verify-ssl`),
/// any certificate at all.
fn tls_config(trust_any: bool, ca_bundle: Option<&str>) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().map_err(|err| err.to_string())?;
    let config = if trust_any {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(TrustAny(provider))).with_no_client_auth()
    } else if let Some(path) = ca_bundle {
        builder.with_root_certificates(bundle_roots(path)?).with_no_client_auth()
    } else {
        builder.with_platform_verifier().map_err(|err| format!("cannot read the platform's certificates: {err}"))?.with_no_client_auth()
    };
    Ok(config)
}

/// The certificates of a PEM bundle, as roots; Err names the file and what is wrong with it.
fn bundle_roots(path: &str) -> Result<RootCertStore, String> {
    let unreadable = |err: &dyn fmt::Display| format!("cannot read the CA bundle {path}: {err}");
    let certificates = CertificateDer::pem_file_iter(path).map_err(|err| unreadable(&err))?.collect::<Result<Vec<_>, _>>().map_err(|err| unreadable(&err))?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certificates);
    if added == 0 {
        return Err(format!("the CA bundle {path} holds no certificate (PEM, -----BEGIN CERTIFICATE-----)"));
    }
    Ok(roots)
}

/// Makes connections: straight, or through the proxy the environment names for the URL (a
/// tunnel for HTTPS, the proxy itself for plain HTTP).
#[derive(Clone)]
struct Connector {
    https: HttpsConnector<HttpConnector>,
    tls: Arc<ClientConfig>,
    proxies: Arc<Matcher>,
    timeout: Option<Duration>,
}

impl Connector {
    fn new(tls: Arc<ClientConfig>, proxies: Arc<Matcher>, timeout: Option<Duration>) -> Self {
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        let https = HttpsConnectorBuilder::new().with_tls_config((*tls).clone()).https_or_http().enable_http1().wrap_connector(tcp);
        Connector { https, tls, proxies, timeout }
    }

    async fn connect(mut self, to: Uri) -> Result<Conn, BoxError> {
        let Some(proxy) = self.proxies.intercept(&to) else {
            return Ok(Conn { io: Box::new(self.https.call(to).await?), proxied: false });
        };
        if to.scheme() != Some(&Scheme::HTTPS) {
            return Ok(Conn { io: Box::new(self.https.call(proxy.uri().clone()).await?), proxied: true });
        }
        let mut tunnel = Tunnel::new(proxy.uri().clone(), self.https.clone());
        if let Some(auth) = proxy.basic_auth() {
            tunnel = tunnel.with_auth(auth.clone());
        }
        let tunneled = tunnel.call(to.clone()).await?;
        let host = to.host().ok_or("no host in the URL")?.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_owned())?;
        let tls = tokio_rustls::TlsConnector::from(self.tls.clone()).connect(name, TokioIo::new(tunneled)).await?;
        Ok(Conn { io: Box::new(TokioIo::new(tls)), proxied: false })
    }
}

impl Service<Uri> for Connector {
    type Response = Conn;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Conn, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, to: Uri) -> Self::Future {
        let (connecting, timeout) = (self.clone().connect(to), self.timeout);
        Box::pin(async move {
            match timeout {
                Some(timeout) => tokio::time::timeout(timeout, connecting).await.map_err(|_| BoxError::from(timed_out()))?,
                None => connecting.await,
            }
        })
    }
}

/// A connection of any of the kinds `Connector` makes; `proxied`: to a proxy that is sent
/// plain requests whole (absolute-form).
struct Conn {
    io: Box<dyn Io>,
    proxied: bool,
}

trait Io: Read + Write + Send + Unpin + 'static {}
impl<T: Read + Write + Send + Unpin + 'static> Io for T {}

impl Connection for Conn {
    fn connected(&self) -> Connected {
        Connected::new().proxy(self.proxied)
    }
}

impl Read for Conn {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.io).poll_read(cx, buf)
    }
}

impl Write for Conn {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.io).poll_write_vectored(cx, bufs)
    }
}

/// An answer's body, failing when a piece of it takes longer than the read timeout to come, or
/// all of it longer than the total timeout.
struct Timed {
    body: Incoming,
    read_timeout: Option<Duration>,
    idle: Option<Pin<Box<Sleep>>>,
    total: Option<Pin<Box<Sleep>>>,
}

impl Body for Timed {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = self.get_mut();
        if this.total.as_mut().is_some_and(|total| total.as_mut().poll(cx).is_ready()) {
            return Poll::Ready(Some(Err(timed_out())));
        }
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(frame) => {
                if let (Some(idle), Some(timeout)) = (this.idle.as_mut(), this.read_timeout) {
                    idle.as_mut().reset(Instant::now() + timeout);
                }
                Poll::Ready(frame.map(|frame| frame.map_err(|err| HttpError::new(HttpErrorKind::Interrupted, err))))
            }
            Poll::Pending if this.idle.as_mut().is_some_and(|idle| idle.as_mut().poll(cx).is_ready()) => Poll::Ready(Some(Err(timed_out()))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

fn timed_out() -> HttpError {
    HttpError::new(HttpErrorKind::Timeout, Refused("operation timed out"))
}

/// Why a request was not sent or its answer not waited for, in words.
#[derive(Debug)]
struct Refused(&'static str);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl StdError for Refused {}

/// Accepts any server certificate: for `allow_invalid_certificates` only (a test server's
/// self-signed one), as reqwest's `danger_accept_invalid_certs` did. Signatures are still checked.
#[derive(Debug)]
struct TrustAny(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for TrustAny {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
