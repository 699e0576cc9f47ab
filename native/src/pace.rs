//! A body that comes too slowly is a failure, not a wait: a server (or a middlebox) that sends
//! a byte a second never trips the read timeout, which watches for silence, and one attempt of
//! an 8 MiB range took the whole request timeout (600 s) to fail, six attempts an hour.
//!
//! Over each window of the read timeout's length, a body must bring at least
//! `LEAST_BYTES_PER_SECOND` for each second of it (curl's --speed-limit and --speed-time): far
//! below any link that moves data, far above a trickle.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};

/// The slowest a body may come, on average over a window.
pub const LEAST_BYTES_PER_SECOND: u64 = 1024;

/// How a body has come over its current window.
pub struct Pace {
    window: Duration,
    since: Instant,
    got: u64,
}

impl Pace {
    /// A window of the read timeout's length (`read_timeout` in obstore's options), 60 s without one.
    pub fn from_options(options: &HashMap<String, String>) -> Duration {
        options.get("read_timeout").and_then(|text| humantime::parse_duration(text).ok()).unwrap_or(Duration::from_secs(60))
    }

    pub fn new(window: Duration) -> Self {
        Pace { window, since: Instant::now(), got: 0 }
    }

    /// `bytes` more came; Err once a whole window brought too few.
    pub fn took(&mut self, bytes: usize) -> Result<(), String> {
        self.got += bytes as u64;
        let elapsed = self.since.elapsed();
        if elapsed < self.window {
            return Ok(());
        }
        let least = LEAST_BYTES_PER_SECOND * elapsed.as_secs().max(1);
        if self.got < least {
            return Err(format!(
                "the body came too slowly: {} bytes in {:.0} s, where at least {} bytes/s are due: request or response body error",
                self.got,
                elapsed.as_secs_f64(),
                LEAST_BYTES_PER_SECOND
            ));
        }
        self.since = Instant::now();
        self.got = 0;
        Ok(())
    }
}

/// A body's chunks, all of them, as long as they come no slower than `Pace` allows; `said`
/// words a failure of the stream itself. Kept as they came: joined, a body is copied once more
/// (a range of 8 MiB, eight in flight, held 64 MiB twice over).
pub async fn whole<E>(stream: impl Stream<Item = Result<Bytes, E>> + Unpin, window: Duration, said: impl Fn(E) -> String) -> Result<Vec<Bytes>, String> {
    at_most(stream, u64::MAX, window, said).await
}

/// `whole`, but no more than `most` bytes: the rest is not read (a whole object's GET that
/// asks for one byte past its listed size, to tell that it grew, reads no further).
pub async fn at_most<E>(
    mut stream: impl Stream<Item = Result<Bytes, E>> + Unpin,
    most: u64,
    window: Duration,
    said: impl Fn(E) -> String,
) -> Result<Vec<Bytes>, String> {
    let (mut pace, mut chunks, mut left) = (Pace::new(window), Vec::new(), most);
    while left > 0 {
        let Some(chunk) = stream.next().await else { break };
        let mut chunk = chunk.map_err(&said)?;
        pace.took(chunk.len())?;
        chunk.truncate(usize::try_from(left).unwrap_or(usize::MAX));
        left -= chunk.len() as u64;
        chunks.push(chunk);
    }
    Ok(chunks)
}

/// Chunks as one buffer (a copy only when there are several).
pub fn joined(mut chunks: Vec<Bytes>) -> Bytes {
    if chunks.len() == 1 {
        chunks.pop().unwrap_or_default()
    } else {
        Bytes::from(chunks.concat())
    }
}
