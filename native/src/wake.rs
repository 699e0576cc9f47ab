//! A runtime thread fed batches of jobs, whose outcomes go back to Python's event loop in batches.
//!
//! A finished request woken into Python on its own costs a thread wake-up and the GIL taken from
//! the event loop each time. Here the event loop hands over the jobs one of its turns asks for in
//! one call (`Runner::send`); each runs as a task of a runtime on a thread of its own, and its
//! outcome waits in a queue (`Outbox`). Only the first outcome after the queue was emptied writes
//! one byte to a socket the event loop watches: one wake-up of the loop takes every outcome
//! finished meanwhile. `gets.rs` and `http.rs` are both built this way.

use std::future::Future;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use tokio::sync::mpsc;

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

/// The runtime thread: each job sent runs `run` as a task of its own, and the (ticket, outcome)
/// it gives goes to the outbox (None: the job's outcome goes there another way, gets.rs's
/// writer thread).
pub struct Runner<J> {
    sender: Option<mpsc::UnboundedSender<Vec<J>>>,
    thread: Option<JoinHandle<()>>,
}

impl<J: Send + 'static> Runner<J> {
    pub fn start<T, F, Fut>(name: &str, outbox: Arc<Outbox<T>>, run: F) -> std::io::Result<Self>
    where
        T: Send + 'static,
        F: Fn(J) -> Fut + Send + 'static,
        Fut: Future<Output = Option<(u64, T)>> + Send + 'static,
    {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (sender, mut receiver) = mpsc::unbounded_channel::<Vec<J>>();
        let thread = std::thread::Builder::new().name(name.into()).spawn(move || {
            runtime.block_on(async move {
                while let Some(jobs) = receiver.recv().await {
                    for job in jobs {
                        let (outbox, outcome) = (outbox.clone(), run(job));
                        tokio::spawn(async move {
                            if let Some((ticket, outcome)) = outcome.await {
                                outbox.push(ticket, outcome);
                            }
                        });
                    }
                }
            })
        })?;
        Ok(Runner { sender: Some(sender), thread: Some(thread) })
    }

    /// Jobs to start, in one wake-up of the runtime.
    pub fn send(&self, jobs: Vec<J>) -> PyResult<()> {
        let sender = self.sender.as_ref().ok_or_else(|| PyValueError::new_err("closed"))?;
        sender.send(jobs).map_err(|_| PyValueError::new_err("closed"))
    }

    /// Stop: jobs not finished are dropped (between two of their steps), and once this returns
    /// the thread has ended, so none of them does anything more.
    pub fn stop(&mut self, py: Python<'_>) -> PyResult<()> {
        self.sender = None;
        if let Some(thread) = self.thread.take() {
            py.detach(|| thread.join()).map_err(|_| PyOSError::new_err("a runtime thread of the native part panicked"))?;
        }
        Ok(())
    }
}

impl<J> Drop for Runner<J> {
    fn drop(&mut self) {
        self.sender = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
