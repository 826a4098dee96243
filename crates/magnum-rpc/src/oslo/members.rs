//! Which conductors in `magnum_service` are ours. Python conductors heartbeat there under the
//! same binary name but cannot run our drivers (and poll every cluster of theirs anyway), so
//! our conductors share the periodic work among themselves only. Each of ours holds, while
//! it is connected, an exclusive queue named after its host; another asks whether that queue
//! exists by publishing an empty, at once expiring, mandatory message to it, which the broker
//! returns when no such queue exists. (A passive declare would tell too, but the broker
//! answers it by closing the channel, 404 or RESOURCE_LOCKED, which lapin logs as an error
//! at every probe.) The broker removes an exclusive queue with its connection, so
//! a SIGKILLed conductor leaves at once, and nothing of this reaches Python processes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use lapin::BasicProperties;
use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use tokio::task::JoinHandle;

use super::connection::{Broker, Live, OPERATION_TIMEOUT};
use super::publisher::{Outgoing, Published, Publisher};
use crate::RpcError;

/// Tells whether a host of `magnum_service` runs one of our conductors.
#[async_trait]
pub trait Peers: Send + Sync {
    /// `None` when it cannot be told (the broker is away and the host was never asked).
    async fn is_peer(&self, host: &str) -> Option<bool>;
}

/// This conductor's own marker queue, and the probe for the others'.
pub struct Membership {
    probes: Publisher,
    prefix: String,
    task: JoinHandle<()>,
    /// The last answer per host, for while the broker cannot be asked.
    known: Mutex<HashMap<String, bool>>,
}

impl std::fmt::Debug for Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership")
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The AMQP reply code of a refused operation (404 NOT_FOUND, 405 RESOURCE_LOCKED...).
fn amqp_code(e: &lapin::Error) -> Option<u16> {
    match e.kind() {
        lapin::ErrorKind::ProtocolError(err) => Some(err.get_id()),
        _ => None,
    }
}

impl Membership {
    /// Holds the marker of `host` on every connection the broker makes from now on.
    pub(crate) fn start(broker: Broker, exchange: &str, topic: &str, host: &str) -> Self {
        let prefix = format!("magnum-rs.members.{exchange}.{topic}.");
        let mine = format!("{prefix}{host}");
        let task = tokio::spawn(hold(broker.clone(), mine));
        Self {
            probes: Publisher::new(broker),
            prefix,
            task,
            known: Mutex::new(HashMap::new()),
        }
    }

    fn queue(&self, host: &str) -> String {
        format!("{}{host}", self.prefix)
    }

    /// Whether `host`'s marker queue exists.
    pub async fn probe(&self, host: &str) -> Result<bool, RpcError> {
        exists(&self.probes, &self.queue(host)).await
    }
}

#[async_trait]
impl Peers for Membership {
    async fn is_peer(&self, host: &str) -> Option<bool> {
        match self.probe(host).await {
            Ok(ours) => {
                if let Ok(mut known) = self.known.lock() {
                    known.insert(host.to_owned(), ours);
                }
                Some(ours)
            }
            Err(e) => {
                tracing::debug!(%host, error = %e, "cannot tell whether a conductor is ours");
                self.known.lock().ok().and_then(|k| k.get(host).copied())
            }
        }
    }
}

/// Declares `queue` (exclusive, so it lives as long as the connection) on each new
/// connection.
/// Whether `queue` exists: an empty, at once expiring, mandatory message comes back when
/// it does not.
async fn exists(probes: &Publisher, queue: &str) -> Result<bool, RpcError> {
    let probe = Outgoing {
        exchange: "",
        routing_key: queue,
        mandatory: true,
        body: b"",
        // Dropped by the queue at once: nobody consumes it.
        props: BasicProperties::default().with_expiration("0".into()),
    };
    match probes.publish(&[], probe, OPERATION_TIMEOUT).await? {
        Published::Delivered => Ok(true),
        Published::Returned => Ok(false),
    }
}

/// How long a marker queue that is in the way may take to go before it is taken for
/// another conductor's with the same host. After a broker node dies, the queue of our own
/// connection that died with it lingers until the cluster has noticed (seconds), and this
/// conductor has usually reconnected before that.
const LOCKED_GRACE: Duration = Duration::from_secs(30);

async fn hold(broker: Broker, queue: String) {
    let mut conns = broker.subscribe();
    let mut down = broker.shutdown_signal();
    let probes = Publisher::new(broker.clone());
    let mut held: Option<u64> = None;
    // Since when the queue has been in the way on this generation.
    let mut in_the_way: Option<(u64, std::time::Instant)> = None;
    loop {
        let live = conns.borrow_and_update().clone();
        if let Some(live) = live.filter(|l| l.is_up())
            && held != Some(live.generation)
        {
            let since = match in_the_way {
                Some((generation, t)) if generation == live.generation => t,
                _ => std::time::Instant::now(),
            };
            let waited = since.elapsed() >= LOCKED_GRACE;
            // Asked first without a declare: the broker answers a declare of a queue that
            // another connection holds by closing the channel, which lapin logs as an error.
            if !waited && matches!(exists(&probes, &queue).await, Ok(true)) {
                tracing::debug!(%queue, "membership queue still held elsewhere; waiting");
                in_the_way = Some((live.generation, since));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            match tokio::time::timeout(OPERATION_TIMEOUT, declare(&live, &queue)).await {
                Ok(Ok(())) => {
                    held = Some(live.generation);
                    in_the_way = None;
                }
                Ok(Err(e)) if amqp_code(&e) == Some(405) && !waited => {
                    tracing::debug!(%queue, "membership queue still held elsewhere; waiting");
                    in_the_way = Some((live.generation, since));
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                Ok(Err(e)) if amqp_code(&e) == Some(405) => {
                    // Another of ours runs with the same `[DEFAULT] host`; it stands for both.
                    tracing::warn!(%queue, "another conductor holds this host's membership queue");
                    held = Some(live.generation);
                    in_the_way = None;
                }
                failed => {
                    let error = match failed {
                        Ok(Err(e)) => e.to_string(),
                        _ => "timed out".to_owned(),
                    };
                    tracing::warn!(%queue, %error, "membership queue not declared; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            }
        }
        tokio::select! {
            r = conns.changed() => if r.is_err() { return },
            _ = down.changed() => if *down.borrow() { return },
        }
    }
}

async fn declare(live: &Arc<Live>, queue: &str) -> Result<(), lapin::Error> {
    let ch = live.channel(false).await?;
    let opts = QueueDeclareOptions {
        exclusive: true,
        auto_delete: true,
        ..QueueDeclareOptions::default()
    };
    ch.queue_declare(queue.into(), opts, FieldTable::default())
        .await?;
    // The queue belongs to the connection; the channel is not needed any more.
    let _ = ch.close(200, "OK".into()).await;
    Ok(())
}
