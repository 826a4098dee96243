//! The `messaging` / `messagingv2` notifier drivers: CADF events to RabbitMQ through the
//! oslo.messaging publisher (`notifications.info` / `notifications.error` on the control
//! exchange), so a Python notification listener receives what upstream's conductor sends.
//!
//! Unlike upstream (which dropped a notification the broker did not take), every event goes
//! through an outbox: written to a file of its own under `$state_path/notifications/<host>`
//! before the operation goes on, then published in order by one sender task, which deletes
//! the file only once the broker confirmed it and retries the head of the queue while the
//! broker is away. A restarted conductor sends what its previous run left. Each conductor has
//! its own folder, so no two conductors send the same event. A crash between the broker's
//! confirmation and the file's removal resends it once, with the same `message_id` and
//! `_unique_id`: the one duplicate this allows. oslo's notification listener does not drop it
//! (its duplicate check keeps no history for notifications, `use_cache = False`), so a
//! consumer that must see each event once dedupes on `message_id`. Without a `state_path`
//! folder the queue lives in memory only
//! (still ordered and retried, not kept across a restart), and a warning says so.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use magnum_core::{Error, Result};
use magnum_rpc::oslo::NotificationPublisher;
use magnum_rpc::oslo::envelope::{UNIQUE_ID, new_id};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{Notification, NotifierDriver};

/// First and longest wait before sending the head of the queue again.
const RETRY_FIRST: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
struct Entry {
    seq: u64,
    priority: String,
    message: Value,
}

struct Outbox {
    publisher: NotificationPublisher,
    dir: Option<PathBuf>,
    queue: Mutex<VecDeque<Entry>>,
    next_seq: AtomicU64,
    wake: Notify,
    sender: OnceLock<()>,
}

fn file_of(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:020}.json"))
}

fn set_backlog(len: usize) {
    if let Some(m) = magnum_core::metrics::metrics() {
        m.notification_backlog
            .set(i64::try_from(len).unwrap_or(i64::MAX));
    }
}

/// Writes one entry durably: a temporary file, flushed, then renamed into place.
fn write_entry(dir: &Path, e: &Entry) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let body = json!({"priority": e.priority, "message": e.message}).to_string();
    let tmp = dir.join(format!(".{:020}.tmp", e.seq));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(body.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, file_of(dir, e.seq))?;
    // The rename itself is durable once the folder is.
    std::fs::File::open(dir)?.sync_all()
}

/// What a previous run left, in order; unreadable files are set aside, not resent forever.
fn load_entries(dir: &Path) -> Vec<Entry> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut entries = Vec::new();
    for item in read.flatten() {
        let path = item.path();
        let Some(seq) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let parsed = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        match parsed {
            Some(mut v) => entries.push(Entry {
                seq,
                priority: v["priority"].as_str().unwrap_or("INFO").to_owned(),
                message: v["message"].take(),
            }),
            None => {
                tracing::warn!(file = %path.display(), "unreadable stored notification set aside");
                let _ = std::fs::rename(&path, path.with_extension("bad"));
            }
        }
    }
    entries.sort_by_key(|e| e.seq);
    entries
}

impl Outbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Entry>> {
        // The queue stays consistent whatever panicked while holding it.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn start_sender(self: &Arc<Self>) {
        if self.sender.set(()).is_ok() {
            let me = self.clone();
            tokio::spawn(async move { me.send_forever().await });
        }
    }

    async fn push(self: &Arc<Self>, priority: &str, mut message: Value) {
        if let Value::Object(m) = &mut message {
            m.entry(UNIQUE_ID)
                .or_insert_with(|| Value::String(new_id()));
        }
        let e = Entry {
            seq: self.next_seq.fetch_add(1, Ordering::SeqCst),
            priority: priority.to_owned(),
            message,
        };
        if let Some(dir) = self.dir.clone() {
            let stored = e.clone();
            let written = tokio::task::spawn_blocking(move || write_entry(&dir, &stored)).await;
            match written {
                Ok(Ok(())) => {}
                Ok(Err(err)) => tracing::warn!(
                    error = %err,
                    "notification kept in memory only: cannot store it"
                ),
                Err(err) => tracing::warn!(error = %err, "notification store task failed"),
            }
        }
        let len = {
            let mut q = self.lock();
            q.push_back(e);
            q.len()
        };
        set_backlog(len);
        self.wake.notify_one();
        self.start_sender();
    }

    /// Sends the head of the queue until the broker confirms it, then the next one.
    async fn send_forever(self: Arc<Self>) {
        let mut wait = RETRY_FIRST;
        let mut failing = false;
        loop {
            let woken = self.wake.notified();
            let head = self.lock().front().cloned();
            let Some(e) = head else {
                woken.await;
                continue;
            };
            match self.publisher.publish(&e.priority, e.message.clone()).await {
                Ok(()) => {
                    if let Some(m) = magnum_core::metrics::metrics() {
                        m.notifications.with_label_values(&["sent"]).inc();
                    }
                    if failing {
                        tracing::info!("notifications flowing again");
                        failing = false;
                    }
                    if let Some(dir) = self.dir.clone() {
                        let path = file_of(&dir, e.seq);
                        let _ =
                            tokio::task::spawn_blocking(move || std::fs::remove_file(path)).await;
                    }
                    let len = {
                        let mut q = self.lock();
                        if q.front().is_some_and(|h| h.seq == e.seq) {
                            q.pop_front();
                        }
                        q.len()
                    };
                    set_backlog(len);
                    wait = RETRY_FIRST;
                }
                Err(err) => {
                    if let Some(m) = magnum_core::metrics::metrics() {
                        m.notifications.with_label_values(&["failed"]).inc();
                    }
                    if !failing {
                        tracing::warn!(
                            error = %err,
                            backlog = self.lock().len(),
                            "notifications held until the broker takes them"
                        );
                        failing = true;
                    }
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(RETRY_MAX);
                }
            }
        }
    }
}

pub struct MessagingDriver {
    outbox: Arc<Outbox>,
}

impl MessagingDriver {
    /// `dir`: the outbox folder (None: memory only). What a previous run left there is queued
    /// first, and sent as soon as a runtime runs the sender.
    pub fn new(publisher: NotificationPublisher, dir: Option<PathBuf>) -> Self {
        let left = dir.as_deref().map(load_entries).unwrap_or_default();
        let next = left.last().map_or(0, |e| e.seq + 1);
        if !left.is_empty() {
            tracing::info!(
                count = left.len(),
                "resending notifications a previous run stored"
            );
        }
        let outbox = Arc::new(Outbox {
            publisher,
            dir,
            next_seq: AtomicU64::new(next),
            queue: Mutex::new(left.into()),
            wake: Notify::new(),
            sender: OnceLock::new(),
        });
        let pending = outbox.lock().len();
        set_backlog(pending);
        if pending > 0 && tokio::runtime::Handle::try_current().is_ok() {
            outbox.start_sender();
        }
        Self { outbox }
    }

    /// Notifications stored and not yet confirmed.
    pub fn backlog(&self) -> usize {
        self.outbox.lock().len()
    }
}

#[async_trait]
impl NotifierDriver for MessagingDriver {
    fn name(&self) -> &str {
        "messaging"
    }

    /// Queued (and stored) for the sender: only a failure to queue would be an error.
    async fn emit(&self, n: &Notification) -> Result<()> {
        if !self.outbox.publisher.is_enabled() {
            return Ok(());
        }
        self.outbox.push(n.priority.as_str(), n.to_message()).await;
        Ok::<(), Error>(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn stored_entries_come_back_in_order_and_bad_ones_are_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        for seq in [7u64, 2, 30] {
            let e = Entry {
                seq,
                priority: "INFO".into(),
                message: json!({"message_id": format!("m{seq}")}),
            };
            write_entry(dir.path(), &e).unwrap();
        }
        std::fs::write(dir.path().join("00000000000000000009.json"), b"{not json").unwrap();
        let back = load_entries(dir.path());
        let seqs: Vec<u64> = back.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [2, 7, 30]);
        assert_eq!(back[1].message["message_id"], "m7");
        assert!(dir.path().join("00000000000000000009.bad").exists());
    }
}
