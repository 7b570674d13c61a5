//! The few checked libc calls the traffic engine and the interface lookups share: error conversion,
//! owned sockets and socket options.

use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Returns `Err(last OS error)` if a libc call returned a negative value.
pub fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Opens a close-on-exec socket in the calling thread's network namespace.
pub fn socket(
    domain: libc::c_int,
    kind: libc::c_int,
    protocol: libc::c_int,
) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned right away.
    let raw = check(unsafe { libc::socket(domain, kind | libc::SOCK_CLOEXEC, protocol) })?;
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Sets a socket option to the bytes of `value` (an integer, a name...).
pub fn set_option<T: ?Sized>(
    fd: &impl AsRawFd,
    level: libc::c_int,
    option: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` is readable for the length given; the kernel copies it.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            option,
            (value as *const T).cast(),
            mem::size_of_val(value) as libc::socklen_t,
        )
    })
    .map(drop)
}
