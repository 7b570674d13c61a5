//! `--pcap DIR` (simple_switch's): every frame a port receives and every frame it sends, in
//! `DIR/<interface>_in.pcap` and `DIR/<interface>_out.pcap`, as BMv2 names them. Each frame is
//! written as it passes (no buffering), so a reader sees it at once; the timestamps are the wall
//! clock's.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use pcap_file::pcap::{PcapPacket, PcapWriter};
use softswitch_device::engine::Transmit;

/// One pcap file, written frame by frame; its clones write into the same file.
#[derive(Clone)]
pub struct Capture {
    writer: Arc<Mutex<PcapWriter<File>>>,
    failed: Arc<AtomicBool>,
    path: Arc<str>,
}

impl Capture {
    /// Creates (or truncates) the pcap file at `path`, with its header (Ethernet, microseconds).
    pub fn create(path: &Path) -> anyhow::Result<Capture> {
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
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

/// A port's transmitter that also records each frame it sends.
pub struct Recorded {
    /// The port's own transmitter.
    pub inner: Box<dyn Transmit>,
    /// Where the frames it sends go.
    pub capture: Capture,
}

impl Transmit for Recorded {
    fn send(&mut self, frame: &[u8]) -> std::io::Result<()> {
        let sent = self.inner.send(frame);
        if sent.is_ok() {
            self.capture.record(frame);
        }
        sent
    }

    fn flush(&mut self) {
        self.inner.flush();
    }

    fn room(&mut self) -> Option<u32> {
        self.inner.room()
    }
}
