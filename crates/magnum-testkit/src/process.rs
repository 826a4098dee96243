//! Child processes that cannot outlive their test: killed and waited for on drop, so a
//! failing assertion never leaks a server.

use std::ops::{Deref, DerefMut};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// One child, killed and reaped on drop. Made by [`ChildGuard::spawn`] it leads its own
/// process group, and the whole group is killed (a Python server's workers too).
pub struct ChildGuard {
    child: Child,
    group: bool,
    /// Our own process's log, kept for the secrets scan once it stopped.
    log: Option<PathBuf>,
}

impl ChildGuard {
    /// Guards a child spawned elsewhere (only the child itself is killed).
    pub fn new(child: Child) -> Self {
        Self {
            child,
            group: false,
            log: None,
        }
    }

    /// Spawns `cmd` in a process group of its own.
    pub fn spawn(cmd: &mut Command) -> Self {
        let child = cmd.process_group(0).spawn().unwrap();
        Self {
            child,
            group: true,
            log: None,
        }
    }

    /// Marks `path` as this child's log: a `magnumd` whose output the suite-wide secrets
    /// scan reads ([`crate::scan`]).
    pub fn keep_log(mut self, path: &Path) -> Self {
        self.log = Some(path.to_owned());
        self
    }

    /// Kills the child (and its group) and reaps it. Idempotent.
    pub fn stop(&mut self) {
        if self.group {
            // The group id is the pid of a child this test started (process_group(0)).
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", self.child.id())])
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(log) = self.log.take() {
            crate::scan::keep_log(&log);
        }
    }
}

impl Deref for ChildGuard {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.child
    }
}

impl DerefMut for ChildGuard {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Several guarded children, addressed by the index [`Children::spawn`] returns.
#[derive(Default)]
pub struct Children(pub Vec<ChildGuard>);

impl Children {
    /// Spawns `cmd` in its own process group, stdout discarded, stderr to the file `log`
    /// (kept for the secrets scan when `cmd` is our `magnumd`).
    pub fn spawn(&mut self, mut cmd: Command, log: &Path) -> usize {
        let ours = Path::new(cmd.get_program())
            .file_name()
            .is_some_and(|n| n == "magnumd");
        let file = std::fs::File::create(log).unwrap();
        let mut child = ChildGuard::spawn(cmd.stdout(Stdio::null()).stderr(file));
        if ours {
            child = child.keep_log(log);
        }
        self.0.push(child);
        self.0.len() - 1
    }

    pub fn stop(&mut self, i: usize) {
        self.0[i].stop();
    }
}

/// A short tag unique to this run, for private exchanges, topics, hosts and names.
pub fn tag() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
            % 0xffff_ffff
    )
}
