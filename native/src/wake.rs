//! Outcomes of a runtime thread, handed to Python's event loop in batches.
//!
//! A finished request woken into Python on its own costs a thread wake-up and the GIL taken from
//! the event loop each time. Here outcomes wait in a queue, and only the first one after the queue
//! was emptied writes one byte to a socket the event loop watches: one wake-up of the loop takes
//! every outcome finished meanwhile.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::Mutex;

pub struct Outbox<T> {
    /// The outcomes by ticket, and whether the event loop has been woken for them yet.
    held: Mutex<(Vec<(u64, T)>, bool)>,
    wake: UnixStream,
}

impl<T> Outbox<T> {
    /// The outbox, and the socket end the event loop watches (readable when outcomes wait).
    pub fn new() -> std::io::Result<(Self, UnixStream)> {
        let (wake, watched) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        watched.set_nonblocking(true)?;
        Ok((Outbox { held: Mutex::new((Vec::new(), false)), wake }, watched))
    }

    pub fn push(&self, ticket: u64, outcome: T) {
        let mut held = self.held.lock().unwrap();
        held.0.push((ticket, outcome));
        if !held.1 {
            held.1 = true;
            // Non-blocking: a full socket already holds a wake-up.
            let _ = (&self.wake).write(&[1]);
        }
    }

    /// Every outcome finished since the last call; the next one wakes the loop again.
    pub fn take(&self) -> Vec<(u64, T)> {
        let mut held = self.held.lock().unwrap();
        held.1 = false;
        std::mem::take(&mut held.0)
    }
}
