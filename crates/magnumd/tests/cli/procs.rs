//! Guards for what the binary's tests start: child processes (in their own process groups)
//! and throwaway MariaDB databases, both cleaned up however a test ends.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Children in their own process groups, killed (group and all) on drop.
#[derive(Default)]
pub(crate) struct Procs(pub(crate) Vec<Child>);

impl Procs {
    pub(crate) fn spawn(&mut self, mut cmd: Command, log: &Path) -> usize {
        let log = std::fs::File::create(log).unwrap();
        let child = cmd
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.0.push(child);
        self.0.len() - 1
    }

    pub(crate) fn stop(&mut self, i: usize) {
        let c = &mut self.0[i];
        // The group id is the pid of a child this test started (process_group(0)).
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", c.id())])
            .stderr(Stdio::null())
            .status();
        let _ = c.kill();
        let _ = c.wait();
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for i in 0..self.0.len() {
            self.stop(i);
        }
    }
}

/// Drops the test database at the end, also when the test fails.
pub(crate) struct Db(pub(crate) String);

impl Drop for Db {
    fn drop(&mut self) {
        let name = self.0.clone();
        let _ = std::panic::catch_unwind(move || {
            crate::server_exec(
                "MAGNUM_TEST_MYSQL_URL",
                "mysql",
                &format!("DROP DATABASE {name}"),
            );
        });
    }
}

/// A short tag unique to this run, for private exchanges, topics and hosts.
pub(crate) fn tag() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
            % 0xffff_ffff
    )
}
