//! The `messaging` / `messagingv2` notifier drivers: CADF events to RabbitMQ through the
//! oslo.messaging publisher (`notifications.info` / `notifications.error` on the control
//! exchange), so a Python notification listener receives what upstream's conductor sends.
//!
//! Unlike upstream (which dropped a notification the broker did not take), every event goes
//! through an outbox: written to a file of its own under `$state_path/notifications/<host>`
//! before the operation goes on, then published in order by one sender task, in batches of up
//! to [`BATCH`] events, and deleted once the broker took the batch; the head of the queue is
//! retried while the broker is away. A restarted conductor sends what its previous run left.
//! Each conductor has its own folder, so no two send the same event.
//!
//! Each batch also records the `_unique_id` of its last event in the host's ledger queue on
//! the broker (keeping only the newest record), so a sender that cannot know whether its last
//! batch went through (killed before removing the files, or the broker's answer lost) reads
//! the ledger and drops, instead of resending, every event up to the recorded one; oslo's
//! listeners keep no history of ids (`use_cache = False`). With classic queues a batch is an
//! AMQP transaction, so it takes effect whole: exactly once. With quorum queues it is sent
//! with publisher confirms, the ledger record last (the harness saw RabbitMQ 3.10 commit
//! transactions whose messages never reached a quorum queue while one of its nodes was
//! down): none is lost, and a batch that fails half-way, or whose sender is killed between
//! the events' confirms and the record's, is sent again whole, so an event may arrive twice. Without a `state_path` folder the queue lives in memory only (still ordered
//! and retried, not kept across a restart), and a warning says so.

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
/// Most events in one transaction: a backlog drains in few commits, and a batch stays small
/// beside the broker's frame and memory limits.
const BATCH: usize = 64;

#[derive(Clone, Debug)]
struct Entry {
    seq: u64,
    priority: String,
    message: Value,
}

struct Outbox {
    publisher: NotificationPublisher,
    /// `[DEFAULT] host`: names the ledger queue on the broker.
    host: String,
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

    /// Sends the head of the queue (up to [`BATCH`] events per transaction) until the broker
    /// commits it, then the next. Whenever the head may already be on the broker (at start,
    /// for what a previous run left, and after a commit whose outcome is unknown) it first
    /// reads the ledger, and drops rather than resends what the ledger shows committed.
    async fn send_forever(self: Arc<Self>) {
        let mut wait = RETRY_FIRST;
        let mut failing = false;
        let mut unsure = true;
        loop {
            let woken = self.wake.notified();
            let batch: Vec<Entry> = self.lock().iter().take(BATCH).cloned().collect();
            if batch.is_empty() {
                woken.await;
                continue;
            }
            let result = if unsure {
                self.publisher
                    .last_recorded(&self.host)
                    .await
                    .map(Step::Settled)
            } else {
                let events: Vec<(&str, &Value)> = batch
                    .iter()
                    .map(|e| (e.priority.as_str(), &e.message))
                    .collect();
                self.publisher
                    .publish_recorded(&events, &self.host)
                    .await
                    .map(|()| Step::Sent)
            };
            match result {
                Ok(Step::Settled(record)) => {
                    unsure = false;
                    let committed = record.and_then(|id| {
                        self.lock().iter().position(|e| {
                            e.message.get(UNIQUE_ID).and_then(Value::as_str) == Some(&id)
                        })
                    });
                    if let Some(k) = committed {
                        tracing::info!(
                            count = k + 1,
                            "notifications whose commit was not seen had reached the broker; \
                             not sending them again"
                        );
                        self.finish(k + 1).await;
                    }
                }
                Ok(Step::Sent) => {
                    if let Some(m) = magnum_core::metrics::metrics() {
                        m.notifications
                            .with_label_values(&["sent"])
                            .inc_by(batch.len() as u64);
                    }
                    if failing {
                        tracing::info!("notifications flowing again");
                        failing = false;
                    }
                    self.finish(batch.len()).await;
                    wait = RETRY_FIRST;
                }
                Err(err) => {
                    unsure = true;
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

    /// Takes the first `n` entries off the queue once their files are gone. Only the sender
    /// removes entries, so the first `n` are the ones it sent.
    async fn finish(&self, n: usize) {
        if let Some(dir) = self.dir.clone() {
            let paths: Vec<PathBuf> = self
                .lock()
                .iter()
                .take(n)
                .map(|e| file_of(&dir, e.seq))
                .collect();
            let removed = tokio::task::spawn_blocking(move || {
                for path in paths {
                    match std::fs::remove_file(&path) {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                            tracing::warn!(
                                file = %path.display(),
                                error = %e,
                                "cannot remove a sent notification; a restart may send it again"
                            );
                        }
                        _ => {}
                    }
                }
            })
            .await;
            if let Err(e) = removed {
                tracing::warn!(error = %e, "removing sent notifications failed");
            }
        }
        let len = {
            let mut q = self.lock();
            let n = n.min(q.len());
            q.drain(..n);
            q.len()
        };
        set_backlog(len);
    }
}

/// What one round of the sender learnt.
enum Step {
    /// The ledger's record: the `_unique_id` of the last event committed, if any.
    Settled(Option<String>),
    /// The batch was committed.
    Sent,
}

pub struct MessagingDriver {
    outbox: Arc<Outbox>,
}

impl MessagingDriver {
    /// `dir`: the outbox folder (None: memory only). What a previous run left there is queued
    /// first, and sent as soon as a runtime runs the sender.
    pub fn new(publisher: NotificationPublisher, dir: Option<PathBuf>, host: &str) -> Self {
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
            host: host.to_owned(),
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

    /// A conductor killed after the broker committed its last batch and before it removed
    /// the files: the next run reads the ledger and sends only what was never committed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restart_after_an_unseen_commit_sends_nothing_twice() {
        use lapin::options::{BasicGetOptions, QueueDeleteOptions};
        use magnum_rpc::oslo::{OsloHandle, OsloSettings};

        let Some(url) = magnum_testkit::env_or_skip("MAGNUM_TEST_RABBIT_URL") else {
            return;
        };
        let tag = uuid::Uuid::new_v4().simple().to_string()[..10].to_owned();
        let topic = format!("notifications-{tag}");
        let host = format!("outbox-{tag}");
        let connect = || async {
            let mut s = OsloSettings::for_url(&url).unwrap();
            s.control_exchange = format!("outboxtest-{tag}");
            s.notification_drivers = vec!["messagingv2".into()];
            s.notification_topics = vec![topic.clone()];
            let h = OsloHandle::connect(s).await.unwrap();
            assert!(h.wait_connected(Duration::from_secs(10)).await);
            h
        };
        let drained = |d: &MessagingDriver| {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            let outbox = d.outbox.clone();
            async move {
                while !outbox.lock().is_empty() {
                    assert!(std::time::Instant::now() < deadline, "outbox not drained");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        let event = |i: u64| {
            json!({"message_id": format!("m{i}"), "_unique_id": format!("u{i}"),
                   "event_type": "magnum.cluster.create", "priority": "INFO", "payload": {}})
        };
        let dir = tempfile::tempdir().unwrap();

        let first = connect().await;
        let d1 = MessagingDriver::new(first.notifier(), Some(dir.path().into()), &host);
        for i in 0..5 {
            d1.outbox.push("INFO", event(i)).await;
        }
        drained(&d1).await;
        // As if killed before removing the last three files, with one more stored and unsent.
        for seq in 2..6 {
            let e = Entry {
                seq,
                priority: "INFO".into(),
                message: event(seq),
            };
            write_entry(dir.path(), &e).unwrap();
        }
        first.close().await;

        let second = connect().await;
        let d2 = MessagingDriver::new(second.notifier(), Some(dir.path().into()), &host);
        assert_eq!(d2.backlog(), 4);
        drained(&d2).await;
        assert_eq!(load_entries(dir.path()).len(), 0, "sent files removed");

        let conn = lapin::Connection::connect(
            &format!(
                "amqp://{}/%2f",
                url.split_once("://").unwrap().1.trim_end_matches('/')
            ),
            lapin::ConnectionProperties::default(),
        )
        .await
        .unwrap();
        let ch = conn.create_channel().await.unwrap();
        let queue = format!("{topic}.info");
        let mut ids = Vec::new();
        while let Some(m) = ch
            .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
        {
            let outer: Value = serde_json::from_slice(&m.delivery.data).unwrap();
            let inner: Value =
                serde_json::from_str(outer["oslo.message"].as_str().unwrap()).unwrap();
            ids.push(inner["message_id"].as_str().unwrap().to_owned());
        }
        assert_eq!(ids, ["m0", "m1", "m2", "m3", "m4", "m5"]);
        second.close().await;
        for q in [queue, magnum_rpc::oslo::ledger_queue(&host)] {
            ch.queue_delete(q.as_str().into(), QueueDeleteOptions::default())
                .await
                .unwrap();
        }
    }
}
