//! Helpers for this crate's unit tests.

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh directory under the system's temp dir, held by its real path, removed on drop.
/// Named `lw-<tag>-<pid>-<n>`: unique within the test process whatever the tag.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new(tag: &str) -> Scratch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("lw-{tag}-{}-{n}", std::process::id()));
        let _ignored = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).expect("mkdir");
        Scratch(fs::canonicalize(&p).expect("canon"))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ignored = fs::remove_dir_all(&self.0);
    }
}
