//! `--pcap DIR` (simple_switch's): every frame a port receives and every frame it sends, in
//! `DIR/<interface>_in.pcap` and `DIR/<interface>_out.pcap`, as BMv2 names them. Each frame is
//! written as it passes (no buffering), so a reader sees it at once; the timestamps are the wall
//! clock's.
//!
//! DIR may be writable by others (`/tmp`, or the default `.`), and the switch runs as root: a
//! capture file is created without following a link, and what is already there at its name is
//! truncated only if it is a regular file of the switch's own user with no other link to it
//! (a capture of an earlier run); a symbolic link, a FIFO or device, another user's file or a
//! hard link is refused, and the switch does not start.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use pcap_file::pcap::{PcapPacket, PcapWriter};

/// One pcap file, written frame by frame; its clones write into the same file.
#[derive(Clone)]
pub struct Capture {
    writer: Arc<Mutex<PcapWriter<File>>>,
    failed: Arc<AtomicBool>,
    path: Arc<str>,
}

impl Capture {
    /// Creates the pcap file at `path` (or truncates a capture of an earlier run there, see the
    /// module's comment), with its header (Ethernet, microseconds).
    pub fn create(path: &Path) -> anyhow::Result<Capture> {
        let file = open_capture_file(path)
            .with_context(|| format!("creating the capture file {}", path.display()))?;
        let writer = PcapWriter::new(file)
            .with_context(|| format!("writing the pcap header of {}", path.display()))?;
        Ok(Capture {
            writer: Arc::new(Mutex::new(writer)),
            failed: Arc::new(AtomicBool::new(false)),
            path: path.display().to_string().into(),
        })
    }

    /// Appends `frame`. A write that fails (a full disk) is logged once; the switch goes on.
    pub fn record(&self, frame: &[u8]) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let written = match self.writer.lock() {
            Ok(mut w) => w.write_packet(&PcapPacket::new(now, len, frame)).map(drop),
            Err(_) => return,
        };
        if let Err(e) = written {
            if !self.failed.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    path = &*self.path,
                    "pcap: {e}; frames after this one may be missing"
                );
            }
        }
    }
}

/// Opens `path` to write a capture: a new file, made without following a link, or an earlier
/// capture of ours, emptied; anything else at that name is refused.
fn open_capture_file(path: &Path) -> io::Result<File> {
    let refused = |why: String| io::Error::new(io::ErrorKind::PermissionDenied, why);
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o644)
        .open(path)
    {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        created => return created,
    }
    // Something is there. Opened without following a link and without waiting (a FIFO
    // without a reader), then judged by what it is.
    let file = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refused(
                "it is a symbolic link, and softswitch does not follow links where it writes \
                 captures: remove it"
                    .into(),
            ),
            _ => e,
        })?;
    let meta = file.metadata()?;
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if !meta.file_type().is_file() {
        return Err(refused("it is there and is not a regular file".into()));
    }
    if meta.uid() != uid {
        return Err(refused(format!(
            "it is there and belongs to user {}, not to softswitch's ({uid})",
            meta.uid()
        )));
    }
    if meta.nlink() != 1 {
        return Err(refused(format!(
            "it is there with {} hard links: softswitch empties only a file of its own",
            meta.nlink()
        )));
    }
    file.set_len(0)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    use testkit::TempDir as Dir;

    /// The start of a pcap file's header (magic, version 2.4), as pcap-file writes it.
    fn is_capture(bytes: &[u8]) -> bool {
        bytes.len() == 24 && bytes[..4] == 0xa1b2_c3d4u32.to_le_bytes()
    }

    #[test]
    fn a_planted_symlink_is_refused_and_its_target_left_alone() {
        let dir = Dir::new("softswitch", "pcap-symlink");
        let target = dir.0.join("precious");
        std::fs::write(&target, "precious data\n").unwrap();
        let capture = dir.0.join("veth1_in.pcap");
        std::os::unix::fs::symlink(&target, &capture).unwrap();
        let e = Capture::create(&capture).err().unwrap();
        assert!(format!("{e:#}").contains("symbolic link"), "{e:#}");
        assert_eq!(std::fs::read(&target).unwrap(), b"precious data\n");
        // A dangling link is refused too: nothing is created where it points.
        let nowhere = dir.0.join("nowhere");
        let dangling = dir.0.join("veth1_out.pcap");
        std::os::unix::fs::symlink(&nowhere, &dangling).unwrap();
        assert!(Capture::create(&dangling).is_err());
        assert!(!nowhere.exists());
    }

    #[test]
    fn a_fifo_a_hard_link_and_another_users_file_are_refused() {
        let dir = Dir::new("softswitch", "pcap-others");
        let fifo = dir.0.join("fifo.pcap");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        // Refused at once (no reader to wait for), whatever the error says.
        assert!(Capture::create(&fifo).is_err());
        let original = dir.0.join("original");
        std::fs::write(&original, "keep").unwrap();
        let linked = dir.0.join("linked.pcap");
        std::fs::hard_link(&original, &linked).unwrap();
        let e = Capture::create(&linked).err().unwrap();
        assert!(format!("{e:#}").contains("hard links"), "{e:#}");
        assert_eq!(std::fs::read(&original).unwrap(), b"keep");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let theirs = dir.0.join("theirs.pcap");
            std::fs::write(&theirs, "theirs").unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let e = Capture::create(&theirs).err().unwrap();
            assert!(format!("{e:#}").contains("belongs to user 65534"), "{e:#}");
            assert_eq!(std::fs::read(&theirs).unwrap(), b"theirs");
        }
    }

    #[test]
    fn a_new_file_is_created_and_an_earlier_capture_emptied() {
        let dir = Dir::new("softswitch", "pcap-own");
        let path = dir.0.join("veth1_in.pcap");
        drop(Capture::create(&path).unwrap());
        assert!(is_capture(&std::fs::read(&path).unwrap()));
        std::fs::write(&path, vec![7u8; 4096]).unwrap();
        drop(Capture::create(&path).unwrap());
        assert!(is_capture(&std::fs::read(&path).unwrap()));
    }
}
