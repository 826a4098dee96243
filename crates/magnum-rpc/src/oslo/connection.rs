//! One AMQP connection per process, kept alive by a supervisor task.
//!
//! The supervisor connects to the URL's hosts in order (round-robin failover), waits
//! `rabbit_retry_interval + n * rabbit_retry_backoff` (at most `rabbit_interval_max`)
//! between failed attempts, and publishes each live connection with a generation number.
//! Clients, servers and the notifier follow that: they rebuild their channels, queues and
//! consumers for every new generation, and fail fast while there is none. We do not use
//! lapin's own recovery: its replay cannot fail over to another host, and our reply queues
//! and in-flight calls need our own handling anyway.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use lapin::options::{ConfirmSelectOptions, ExchangeDeclareOptions, QueueDeclareOptions};
use lapin::tcp::{OwnedIdentity, OwnedTLSConfig};
use lapin::types::{FieldTable, LongString};
use lapin::uri::{AMQPAuthority, AMQPQueryString, AMQPScheme, AMQPUri, AMQPUserInfo};
use lapin::{Channel, Connection, ConnectionProperties, Event, ExchangeKind};
use tokio::sync::{Mutex, Notify, watch};
use tokio::task::JoinHandle;

use super::options::{Flags, OsloSettings, RabbitOptions};
use super::url::TransportHost;
use crate::transport::RpcError;

/// How long one TCP + AMQP handshake may take before the next host is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on any single broker operation (declare, bind, consume, publish confirm), so a
/// half-dead connection never hangs a caller.
pub(crate) const OPERATION_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the supervisor checks the connection state besides lapin's events.
const LIVENESS_POLL: Duration = Duration::from_millis(250);

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot read {what} {path}: {reason}")]
    TlsFile {
        what: &'static str,
        path: String,
        reason: String,
    },
}

/// A connection the supervisor considers up. Holders must drop it when it dies.
pub struct Live {
    pub(crate) conn: Connection,
    pub(crate) generation: u64,
    pub(crate) address: String,
    /// The `connection_name` client property RabbitMQ shows for this connection.
    pub(crate) name: String,
}

impl Live {
    pub(crate) fn is_up(&self) -> bool {
        self.conn.status().connected()
    }

    /// A new channel, in confirm mode if `confirms` (every publishing channel is, rpc-wire.md §5).
    pub(crate) async fn channel(&self, confirms: bool) -> Result<Channel, lapin::Error> {
        let ch = self.conn.create_channel().await?;
        if confirms {
            ch.confirm_select(ConfirmSelectOptions::default()).await?;
        }
        Ok(ch)
    }
}

struct Inner {
    hosts: Vec<TransportHost>,
    vhost: String,
    rabbit: RabbitOptions,
    tls: Option<OwnedTLSConfig>,
    state: watch::Sender<Option<Arc<Live>>>,
    shutdown: watch::Sender<bool>,
    /// A user saw a broker error: check the connection now rather than at the next poll.
    kick: Notify,
    generation: AtomicU64,
    /// Set once every host was tried (or one answered), so startup need not wait longer.
    first_round: watch::Sender<bool>,
    supervisor: Mutex<Option<JoinHandle<()>>>,
}

/// The process's broker connection (cheap to clone).
#[derive(Clone)]
pub struct Broker {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field(
                "hosts",
                &self
                    .inner
                    .hosts
                    .iter()
                    .map(TransportHost::address)
                    .collect::<Vec<_>>(),
            )
            .field("vhost", &self.inner.vhost)
            .field("connected", &self.current().is_some())
            .finish()
    }
}

fn read_file(what: &'static str, path: &str) -> Result<Vec<u8>, ConnectError> {
    std::fs::read(path).map_err(|e| ConnectError::TlsFile {
        what,
        path: path.into(),
        reason: e.to_string(),
    })
}

fn tls_config(o: &RabbitOptions) -> Result<Option<OwnedTLSConfig>, ConnectError> {
    if !o.ssl {
        return Ok(None);
    }
    let cert_chain = if o.ssl_ca_file.is_empty() {
        None
    } else {
        let pem = read_file("ssl_ca_file", &o.ssl_ca_file)?;
        Some(String::from_utf8_lossy(&pem).into_owned())
    };
    let identity = if o.ssl_cert_file.is_empty() || o.ssl_key_file.is_empty() {
        None
    } else {
        Some(OwnedIdentity::PKCS8 {
            pem: read_file("ssl_cert_file", &o.ssl_cert_file)?,
            key: read_file("ssl_key_file", &o.ssl_key_file)?,
        })
    };
    Ok(Some(OwnedTLSConfig {
        identity,
        cert_chain,
    }))
}

impl Broker {
    /// Starts the supervisor and waits (briefly) for the first connection attempt to each
    /// host. The broker being down is not an error: the supervisor keeps trying, and users
    /// fail fast with `Unavailable` meanwhile.
    pub async fn start(settings: &OsloSettings) -> Result<Self, ConnectError> {
        let tls = tls_config(&settings.rabbit)?;
        let (state, _) = watch::channel(None);
        let (shutdown, _) = watch::channel(false);
        let (first_round, _) = watch::channel(false);
        let broker = Self {
            inner: Arc::new(Inner {
                hosts: settings.url.hosts.clone(),
                vhost: settings.url.vhost().to_owned(),
                rabbit: settings.rabbit.clone(),
                tls,
                state,
                shutdown,
                kick: Notify::new(),
                generation: AtomicU64::new(0),
                first_round,
                supervisor: Mutex::new(None),
            }),
        };
        let mut tried = broker.inner.first_round.subscribe();
        let task = tokio::spawn(supervise(broker.inner.clone()));
        *broker.inner.supervisor.lock().await = Some(task);
        let hosts = u32::try_from(broker.inner.hosts.len()).unwrap_or(1);
        let _ = tokio::time::timeout(
            (CONNECT_TIMEOUT * hosts).min(Duration::from_secs(15)),
            tried.wait_for(|t| *t),
        )
        .await;
        Ok(broker)
    }

    /// The live connection, or `None` while disconnected.
    pub(crate) fn current(&self) -> Option<Arc<Live>> {
        self.inner.state.borrow().clone().filter(|l| l.is_up())
    }

    /// The live connection or the error every caller gets while there is none.
    pub(crate) fn live(&self) -> Result<Arc<Live>, RpcError> {
        self.current()
            .ok_or_else(|| RpcError::Unavailable("not connected to the message broker".into()))
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Option<Arc<Live>>> {
        self.inner.state.subscribe()
    }

    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.inner.shutdown.subscribe()
    }

    pub(crate) fn rabbit(&self) -> &RabbitOptions {
        &self.inner.rabbit
    }

    /// Tells the supervisor a broker operation failed, so a dead connection is noticed now.
    pub(crate) fn report_failure(&self) {
        self.inner.kick.notify_one();
    }

    /// Drops connection `generation` if it is still the current one, so the supervisor
    /// connects to the next host (a publish refused on it).
    pub(crate) async fn reconnect(&self, generation: u64) {
        let live = self.inner.state.borrow().clone();
        if let Some(live) = live.filter(|l| l.generation == generation) {
            let _ = tokio::time::timeout(
                OPERATION_TIMEOUT,
                live.conn.close(200, "publish refused; reconnecting".into()),
            )
            .await;
        }
        self.inner.kick.notify_one();
    }

    /// The live connection of a generation after `generation`, waiting at most `timeout`.
    pub(crate) async fn newer_than(&self, generation: u64, timeout: Duration) -> Option<Arc<Live>> {
        let mut rx = self.subscribe();
        let wait = async {
            loop {
                let live = rx.borrow_and_update().clone();
                if let Some(live) = live.filter(|l| l.generation > generation && l.is_up()) {
                    return Some(live);
                }
                if rx.changed().await.is_err() {
                    return None;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.ok().flatten()
    }

    pub fn is_connected(&self) -> bool {
        self.current().is_some()
    }

    /// The current connection's `connection_name` (`<argv0>:<pid>:<uuid>`), as RabbitMQ
    /// lists it; `None` while disconnected.
    pub fn connection_name(&self) -> Option<String> {
        self.current().map(|l| l.name.clone())
    }

    /// Waits until connected, at most `timeout`; true when connected.
    pub async fn wait_connected(&self, timeout: Duration) -> bool {
        let mut rx = self.subscribe();
        let wait = async {
            loop {
                if rx.borrow_and_update().as_ref().is_some_and(|l| l.is_up()) {
                    return;
                }
                if rx.changed().await.is_err() {
                    // The supervisor is gone; nothing will connect.
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok()
    }

    /// Closes the connection and stops reconnecting. Servers should be stopped first.
    pub async fn close(&self) {
        self.inner.shutdown.send_replace(true);
        self.inner.kick.notify_one();
        if let Some(task) = self.inner.supervisor.lock().await.take() {
            let _ = task.await;
        }
    }

    /// Declares a topic or fanout exchange the way oslo does, including its fallback: a
    /// durable declare refused as inequivalent is retried non-durable (on a fresh channel,
    /// since the refusal closes the channel). Returns the channel to keep using.
    pub(crate) async fn declare_exchange(
        &self,
        live: &Live,
        ch: Channel,
        confirms: bool,
        name: &str,
        kind: ExchangeKind,
        flags: Flags,
    ) -> Result<Channel, lapin::Error> {
        let Flags {
            durable,
            auto_delete,
        } = flags;
        let opts = |durable| ExchangeDeclareOptions {
            durable,
            auto_delete,
            ..ExchangeDeclareOptions::default()
        };
        match ch
            .exchange_declare(
                name.into(),
                kind.clone(),
                opts(durable),
                FieldTable::default(),
            )
            .await
        {
            Ok(()) => Ok(ch),
            Err(e) if durable && is_inequivalent_durable(&e) => {
                tracing::warn!(
                    exchange = name,
                    "exchange exists non-durable; using it as is"
                );
                let ch = live.channel(confirms).await?;
                ch.exchange_declare(name.into(), kind, opts(false), FieldTable::default())
                    .await?;
                Ok(ch)
            }
            Err(e) => Err(e),
        }
    }

    /// Declares a queue, with oslo's non-durable fallback. Returns the channel to keep using
    /// and the durability actually declared.
    pub(crate) async fn declare_queue(
        &self,
        live: &Live,
        ch: Channel,
        confirms: bool,
        name: &str,
        flags: Flags,
        args: FieldTable,
    ) -> Result<(Channel, bool), lapin::Error> {
        let Flags {
            durable,
            auto_delete,
        } = flags;
        let opts = |durable| QueueDeclareOptions {
            durable,
            auto_delete,
            ..QueueDeclareOptions::default()
        };
        match ch
            .queue_declare(name.into(), opts(durable), args.clone())
            .await
        {
            Ok(_) => Ok((ch, durable)),
            Err(e) if durable && is_inequivalent_durable(&e) => {
                tracing::warn!(queue = name, "queue exists non-durable; using it as is");
                let ch = live.channel(confirms).await?;
                ch.queue_declare(name.into(), opts(false), args).await?;
                Ok((ch, false))
            }
            Err(e) => Err(e),
        }
    }
}

fn is_inequivalent_durable(e: &lapin::Error) -> bool {
    e.to_string().contains("inequivalent arg 'durable'")
}

fn amqp_uri(host: &TransportHost, vhost: &str, o: &RabbitOptions) -> AMQPUri {
    let (username, password) = host.credentials();
    AMQPUri {
        scheme: if o.ssl {
            AMQPScheme::AMQPS
        } else {
            AMQPScheme::AMQP
        },
        authority: AMQPAuthority {
            userinfo: AMQPUserInfo {
                username: username.to_owned(),
                password: password.to_owned(),
            },
            host: host.host.clone(),
            port: host.port,
        },
        vhost: vhost.to_owned(),
        query: AMQPQueryString {
            heartbeat: Some(o.heartbeat_timeout_threshold),
            ..AMQPQueryString::default()
        },
    }
}

/// `<argv0>:<pid>:<uuid4>`, as oslo names its connections (cosmetic, shown by RabbitMQ).
fn connection_name() -> String {
    let argv0 = std::env::args()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "magnum-rs".into());
    format!(
        "{argv0}:{}:{}",
        std::process::id(),
        uuid::Uuid::new_v4().hyphenated()
    )
}

async fn connect_one(
    inner: &Inner,
    host: &TransportHost,
    name: &str,
) -> Result<Connection, String> {
    let uri = amqp_uri(host, &inner.vhost, &inner.rabbit);
    let props = ConnectionProperties::default().with_connection_name(LongString::from(name));
    let runtime = lapin::runtime::default_runtime().map_err(|e| e.to_string())?;
    let tls = inner.tls.clone().unwrap_or_default();
    match tokio::time::timeout(
        CONNECT_TIMEOUT,
        Connection::connect_uri_with_config(uri, props, tls, runtime),
    )
    .await
    {
        Ok(Ok(c)) => Ok(c),
        // lapin's errors name no credentials.
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {CONNECT_TIMEOUT:?}")),
    }
}

async fn supervise(inner: Arc<Inner>) {
    let mut shutdown = inner.shutdown.subscribe();
    let mut next_host = 0usize;
    let mut failures = 0u32;
    loop {
        if *shutdown.borrow() {
            break;
        }
        let host = &inner.hosts[next_host % inner.hosts.len()];
        let address = host.address();
        let name = connection_name();
        match connect_one(&inner, host, &name).await {
            Ok(conn) => {
                failures = 0;
                let generation = inner.generation.fetch_add(1, Ordering::SeqCst) + 1;
                tracing::info!(broker = %address, generation, "connected to the message broker");
                let mut events = conn.events_listener();
                let live = Arc::new(Live {
                    conn,
                    generation,
                    address: address.clone(),
                    name,
                });
                inner.state.send_replace(Some(live.clone()));
                inner.first_round.send_replace(true);
                let reason = loop {
                    tokio::select! {
                        _ = shutdown.changed() => break None,
                        ev = events.next() => match ev {
                            Some(Event::Error(e)) if !live.is_up() => break Some(e.to_string()),
                            Some(Event::ConnectionBlocked(why)) => {
                                tracing::warn!(broker = %address, reason = %why, "broker blocked publishing");
                            }
                            Some(_) => {}
                            None => break Some("connection gone".into()),
                        },
                        _ = inner.kick.notified() => {}
                        _ = tokio::time::sleep(LIVENESS_POLL) => {}
                    }
                    if *shutdown.borrow() {
                        break None;
                    }
                    if !live.is_up() {
                        break Some("connection closed".into());
                    }
                };
                inner.state.send_replace(None);
                match reason {
                    None => {
                        let _ = tokio::time::timeout(
                            OPERATION_TIMEOUT,
                            live.conn.close(200, "OK".into()),
                        )
                        .await;
                        break;
                    }
                    Some(reason) => {
                        tracing::warn!(broker = %address, %reason, "lost the message broker; reconnecting");
                        // The next host first: the one we lost may be the one going away.
                        next_host += 1;
                    }
                }
            }
            Err(e) => {
                next_host += 1;
                if next_host >= inner.hosts.len() {
                    inner.first_round.send_replace(true);
                }
                // The next host at once; a pause only once every host has failed.
                if !next_host.is_multiple_of(inner.hosts.len()) {
                    tracing::warn!(broker = %address, error = %e, "cannot connect to the message broker; trying the next host");
                    continue;
                }
                let delay = inner.rabbit.reconnect_delay(failures);
                tracing::warn!(
                    broker = %address,
                    error = %e,
                    retry_in = ?delay,
                    "cannot connect to the message broker"
                );
                failures = failures.saturating_add(1);
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shutdown.changed() => {}
                }
            }
        }
    }
    inner.state.send_replace(None);
}
