//! Files named relative to a directory the caller opened (`openat`, `renameat`, `linkat`,
//! `unlinkat`), never through a symbolic link in their own name.
//!
//! A download's file is made, written, landed and removed in the directory s3bulk opened for
//! it, one component at a time from the destination's root and never through a link it did not
//! check (s3bulk/_stores/folders.py): a directory of the destination swapped for a link to
//! elsewhere while the download runs cannot send the file there, as a path looked up again at
//! each step would. Each job holds a duplicate of the caller's descriptor, so the caller may
//! close its own whenever it likes once the job is handed over.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Where a job's names are looked up: the current directory (names are paths as given), or a
/// directory the caller opened (names are in it).
pub(crate) enum Folder {
    Current,
    Opened(OwnedFd),
}

impl Folder {
    /// A duplicate of the caller's open directory `fd` (None: the current directory).
    pub(crate) fn of(fd: Option<RawFd>) -> io::Result<Self> {
        let Some(fd) = fd else { return Ok(Folder::Current) };
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        // Safety: the caller's descriptor is open for the length of the call that hands it over.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        Ok(Folder::Opened(borrowed.try_clone_to_owned()?))
    }

    fn raw(&self) -> RawFd {
        match self {
            Folder::Current => libc::AT_FDCWD,
            Folder::Opened(fd) => fd.as_raw_fd(),
        }
    }

    /// The file `name` opened with `flags`, close-on-exec and not through a link.
    pub(crate) fn open(&self, name: &str, flags: libc::c_int) -> io::Result<File> {
        let name = c_name(name)?;
        // Safety: `name` is a NUL-terminated string alive for the call.
        let fd = unsafe { libc::openat(self.raw(), name.as_ptr(), flags | libc::O_CLOEXEC | libc::O_NOFOLLOW, 0o666 as libc::c_uint) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // Safety: a descriptor just opened, owned by nobody else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// A new file `name`, empty (one there is emptied), open to write and read.
    pub(crate) fn create(&self, name: &str) -> io::Result<File> {
        self.open(name, libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC)
    }

    /// `from` renamed to `to`, replacing a file there.
    pub(crate) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (from, to) = (c_name(from)?, c_name(to)?);
        // Safety: NUL-terminated strings alive for the call.
        checked(unsafe { libc::renameat(self.raw(), from.as_ptr(), self.raw(), to.as_ptr()) })
    }

    /// `from` linked as `to`, which fails if anything is there.
    pub(crate) fn link(&self, from: &str, to: &str) -> io::Result<()> {
        let (from, to) = (c_name(from)?, c_name(to)?);
        // Safety: NUL-terminated strings alive for the call.
        checked(unsafe { libc::linkat(self.raw(), from.as_ptr(), self.raw(), to.as_ptr(), 0) })
    }

    /// The file `name` removed.
    pub(crate) fn remove(&self, name: &str) -> io::Result<()> {
        let name = c_name(name)?;
        // Safety: a NUL-terminated string alive for the call.
        checked(unsafe { libc::unlinkat(self.raw(), name.as_ptr(), 0) })
    }
}

/// A job's `folder` as Python hands it: an open directory's descriptor, or None.
pub(crate) fn folder_of(value: &Bound<'_, PyAny>) -> PyResult<Folder> {
    let fd = value.extract::<Option<RawFd>>()?;
    Folder::of(fd).map_err(|err| PyValueError::new_err(format!("folder {fd:?}: {err}")))
}

fn c_name(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn checked(result: libc::c_int) -> io::Result<()> {
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn names_stay_in_the_opened_directory_when_its_path_is_swapped_for_a_link() {
        let base = std::env::temp_dir().join(format!("s3bulk-folder-{}", std::process::id()));
        let (inside, moved, outside) = (base.join("dest"), base.join("moved"), base.join("outside"));
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let opened = File::open(&inside).unwrap();
        let folder = Folder::of(Some(opened.as_raw_fd())).unwrap();
        drop(opened); // the folder holds its own duplicate
        std::fs::rename(&inside, &moved).unwrap();
        std::os::unix::fs::symlink(&outside, &inside).unwrap();
        folder.create("part").unwrap().write_all(b"bytes").unwrap();
        folder.link("part", "landed").unwrap();
        folder.rename("part", "again").unwrap();
        assert!(folder.link("again", "landed").is_err()); // never over what is there
        folder.remove("again").unwrap();
        let mut landed = String::new();
        File::open(moved.join("landed")).unwrap().read_to_string(&mut landed).unwrap();
        assert_eq!(landed, "bytes");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        std::os::unix::fs::symlink(moved.join("landed"), moved.join("link")).unwrap();
        assert!(folder.open("link", libc::O_RDONLY).is_err()); // not through a link
        std::fs::remove_dir_all(&base).unwrap();
    }
}
