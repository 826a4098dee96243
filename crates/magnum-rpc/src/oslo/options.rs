//! The options that shape what goes on the wire (rpc-wire.md §2.2): `[oslo_messaging_rabbit]` from
//! the configuration, overridden by the transport URL's query, plus the `[DEFAULT]`,
//! `[conductor]` and `[oslo_messaging_notifications]` values the transport needs.

use std::time::Duration;

use lapin::types::{AMQPValue, FieldTable, ShortString};
use magnum_conf::config::Config;

use super::url::{TransportUrl, UrlError};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OptionsError {
    #[error(transparent)]
    Url(#[from] UrlError),
    #[error("transport_url query option {0:?} is not an [oslo_messaging_rabbit] option")]
    UnknownQueryOption(String),
    #[error("transport_url query option {name}={value:?}: {reason}")]
    BadQueryValue {
        name: String,
        value: String,
        reason: String,
    },
    #[error("rabbit_ha_queues and rabbit_quorum_queue cannot both be set")]
    HaAndQuorum,
    #[error("[DEFAULT] transport_url is not set")]
    NoTransportUrl,
}

/// How an exchange or queue is declared; peers declaring the same name must agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flags {
    pub durable: bool,
    pub auto_delete: bool,
}

/// `[oslo_messaging_rabbit]` as the transport uses it: from magnum.conf, then the URL query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RabbitOptions {
    pub amqp_durable_queues: bool,
    pub amqp_auto_delete: bool,
    pub rabbit_ha_queues: bool,
    pub rabbit_quorum_queue: bool,
    pub rabbit_quorum_delivery_limit: u32,
    pub rabbit_quorum_max_memory_length: u32,
    pub rabbit_quorum_max_memory_bytes: u64,
    pub rabbit_transient_quorum_queue: bool,
    /// Seconds; `x-expires` of reply and fanout queues, 0 disables.
    pub rabbit_transient_queues_ttl: u32,
    pub rabbit_qos_prefetch_count: u16,
    /// Seconds; 0 disables AMQP heartbeats.
    pub heartbeat_timeout_threshold: u16,
    pub ssl: bool,
    pub ssl_ca_file: String,
    pub ssl_cert_file: String,
    pub ssl_key_file: String,
    pub rabbit_retry_interval: u32,
    pub rabbit_retry_backoff: u32,
    pub rabbit_interval_max: u32,
    pub direct_mandatory_flag: bool,
    /// Seconds a reply to a missing reply queue is retried.
    pub kombu_missing_consumer_retry_timeout: u32,
    pub enable_cancel_on_failover: bool,
}

impl Default for RabbitOptions {
    fn default() -> Self {
        Self {
            amqp_durable_queues: false,
            amqp_auto_delete: false,
            rabbit_ha_queues: false,
            rabbit_quorum_queue: false,
            rabbit_quorum_delivery_limit: 0,
            rabbit_quorum_max_memory_length: 0,
            rabbit_quorum_max_memory_bytes: 0,
            rabbit_transient_quorum_queue: false,
            rabbit_transient_queues_ttl: 1800,
            rabbit_qos_prefetch_count: 0,
            heartbeat_timeout_threshold: 60,
            ssl: false,
            ssl_ca_file: String::new(),
            ssl_cert_file: String::new(),
            ssl_key_file: String::new(),
            rabbit_retry_interval: 1,
            rabbit_retry_backoff: 2,
            rabbit_interval_max: 30,
            direct_mandatory_flag: true,
            kombu_missing_consumer_retry_timeout: 60,
            enable_cancel_on_failover: false,
        }
    }
}

/// `[oslo_messaging_rabbit]` options magnum.conf accepts but the transport does not use; a
/// URL query may name them (oslo would accept them too).
const IGNORED_QUERY_OPTIONS: &[&str] = &[
    "rpc_conn_pool_size",
    "conn_pool_min_size",
    "conn_pool_ttl",
    "ssl_version",
    "ssl_enforce_hostname_verification",
    "ssl_enforce_fips_mode",
    "kombu_reconnect_delay",
    "kombu_reconnect_splay",
    "kombu_compression",
    "kombu_failover_strategy",
    "rabbit_login_method",
    "heartbeat_rate",
    "heartbeat_in_pthread",
    "use_queue_manager",
    "hostname",
    "processname",
    "rabbit_stream_fanout",
];

fn parse_bool(name: &str, value: &str) -> Result<bool, OptionsError> {
    // oslo.config's boolean spellings.
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(OptionsError::BadQueryValue {
            name: name.into(),
            value: value.into(),
            reason: "not a boolean".into(),
        }),
    }
}

fn parse_num<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, OptionsError> {
    value
        .trim()
        .parse()
        .map_err(|_| OptionsError::BadQueryValue {
            name: name.into(),
            value: value.into(),
            reason: "not a number in range".into(),
        })
}

impl RabbitOptions {
    pub fn from_config(cfg: &Config) -> Self {
        let r = &cfg.oslo_messaging_rabbit;
        Self {
            amqp_durable_queues: r.amqp_durable_queues,
            amqp_auto_delete: r.amqp_auto_delete,
            rabbit_ha_queues: r.rabbit_ha_queues,
            rabbit_quorum_queue: r.rabbit_quorum_queue,
            rabbit_transient_quorum_queue: r.rabbit_transient_quorum_queue,
            rabbit_quorum_delivery_limit: r.rabbit_quorum_delivery_limit,
            rabbit_quorum_max_memory_length: r.rabbit_quorum_max_memory_length,
            rabbit_quorum_max_memory_bytes: r.rabbit_quorum_max_memory_bytes,
            rabbit_transient_queues_ttl: r.rabbit_transient_queues_ttl,
            rabbit_qos_prefetch_count: u16::try_from(r.rabbit_qos_prefetch_count)
                .unwrap_or(u16::MAX),
            heartbeat_timeout_threshold: u16::try_from(r.heartbeat_timeout_threshold)
                .unwrap_or(u16::MAX),
            ssl: r.ssl,
            ssl_ca_file: r.ssl_ca_file.clone(),
            ssl_cert_file: r.ssl_cert_file.clone(),
            ssl_key_file: r.ssl_key_file.clone(),
            rabbit_retry_interval: r.rabbit_retry_interval,
            rabbit_retry_backoff: r.rabbit_retry_backoff,
            rabbit_interval_max: r.rabbit_interval_max,
            direct_mandatory_flag: r.direct_mandatory_flag,
            ..Self::default()
        }
    }

    /// Applies the URL query: each key must be an `[oslo_messaging_rabbit]` option.
    pub fn apply_query(&mut self, query: &[(String, String)]) -> Result<(), OptionsError> {
        for (name, value) in query {
            let n = name.as_str();
            match n {
                "amqp_durable_queues" => self.amqp_durable_queues = parse_bool(n, value)?,
                "amqp_auto_delete" => self.amqp_auto_delete = parse_bool(n, value)?,
                "rabbit_ha_queues" => self.rabbit_ha_queues = parse_bool(n, value)?,
                "rabbit_quorum_queue" => self.rabbit_quorum_queue = parse_bool(n, value)?,
                "rabbit_quorum_delivery_limit" => {
                    self.rabbit_quorum_delivery_limit = parse_num(n, value)?
                }
                "rabbit_quorum_max_memory_length" => {
                    self.rabbit_quorum_max_memory_length = parse_num(n, value)?
                }
                "rabbit_quorum_max_memory_bytes" => {
                    self.rabbit_quorum_max_memory_bytes = parse_num(n, value)?
                }
                "rabbit_transient_quorum_queue" => {
                    self.rabbit_transient_quorum_queue = parse_bool(n, value)?
                }
                "rabbit_transient_queues_ttl" => {
                    self.rabbit_transient_queues_ttl = parse_num(n, value)?
                }
                "rabbit_qos_prefetch_count" => {
                    self.rabbit_qos_prefetch_count = parse_num(n, value)?
                }
                "heartbeat_timeout_threshold" => {
                    self.heartbeat_timeout_threshold = parse_num(n, value)?
                }
                "ssl" => self.ssl = parse_bool(n, value)?,
                "ssl_ca_file" => self.ssl_ca_file = value.clone(),
                "ssl_cert_file" => self.ssl_cert_file = value.clone(),
                "ssl_key_file" => self.ssl_key_file = value.clone(),
                "rabbit_retry_interval" => self.rabbit_retry_interval = parse_num(n, value)?,
                "rabbit_retry_backoff" => self.rabbit_retry_backoff = parse_num(n, value)?,
                "rabbit_interval_max" => self.rabbit_interval_max = parse_num(n, value)?,
                "direct_mandatory_flag" => self.direct_mandatory_flag = parse_bool(n, value)?,
                "kombu_missing_consumer_retry_timeout" => {
                    self.kombu_missing_consumer_retry_timeout = parse_num(n, value)?
                }
                "enable_cancel_on_failover" => {
                    self.enable_cancel_on_failover = parse_bool(n, value)?
                }
                _ if IGNORED_QUERY_OPTIONS.contains(&n) => {}
                _ => return Err(OptionsError::UnknownQueryOption(name.clone())),
            }
        }
        self.validate()
    }

    pub fn validate(&self) -> Result<(), OptionsError> {
        if self.rabbit_ha_queues && self.rabbit_quorum_queue {
            return Err(OptionsError::HaAndQuorum);
        }
        Ok(())
    }

    /// Durability of the topic exchange, topic queues and notification queues.
    pub fn durable(&self) -> bool {
        self.amqp_durable_queues || self.rabbit_quorum_queue
    }

    /// The control exchange, topic queues and notification queues (§3, §4.1, §13.1).
    pub fn topic_flags(&self) -> Flags {
        Flags {
            durable: self.durable(),
            auto_delete: self.amqp_auto_delete,
        }
    }

    /// The `<topic>_fanout` exchange: auto-delete always.
    pub fn fanout_exchange_flags(&self) -> Flags {
        Flags {
            durable: self.rabbit_transient_quorum_queue,
            auto_delete: true,
        }
    }

    /// Reply and fanout queues: they expire by `x-expires` instead.
    pub fn transient_queue_flags(&self) -> Flags {
        Flags {
            durable: self.rabbit_transient_quorum_queue,
            auto_delete: false,
        }
    }

    /// Arguments of topic and notification queues (§4.4): HA or quorum, never `x-expires`.
    pub fn topic_queue_args(&self) -> FieldTable {
        let mut t = FieldTable::default();
        if self.rabbit_ha_queues {
            t.insert(ShortString::from("x-ha-policy"), long_string("all"));
        }
        if self.rabbit_quorum_queue {
            self.quorum_args(&mut t);
        }
        t
    }

    /// Arguments of reply and fanout queues (§4.4): HA or transient quorum, and the TTL.
    pub fn transient_queue_args(&self) -> FieldTable {
        let mut t = FieldTable::default();
        if self.rabbit_ha_queues {
            t.insert(ShortString::from("x-ha-policy"), long_string("all"));
        }
        if self.rabbit_transient_quorum_queue {
            self.quorum_args(&mut t);
        }
        if self.rabbit_transient_queues_ttl > 0 {
            t.insert(
                ShortString::from("x-expires"),
                AMQPValue::LongLongInt(i64::from(self.rabbit_transient_queues_ttl) * 1000),
            );
        }
        t
    }

    fn quorum_args(&self, t: &mut FieldTable) {
        t.insert(ShortString::from("x-queue-type"), long_string("quorum"));
        if self.rabbit_quorum_delivery_limit > 0 {
            t.insert(
                ShortString::from("x-delivery-limit"),
                AMQPValue::LongLongInt(i64::from(self.rabbit_quorum_delivery_limit)),
            );
        }
        if self.rabbit_quorum_max_memory_length > 0 {
            t.insert(
                ShortString::from("x-max-in-memory-length"),
                AMQPValue::LongLongInt(i64::from(self.rabbit_quorum_max_memory_length)),
            );
        }
        if self.rabbit_quorum_max_memory_bytes > 0 {
            t.insert(
                ShortString::from("x-max-in-memory-bytes"),
                AMQPValue::LongLongInt(
                    i64::try_from(self.rabbit_quorum_max_memory_bytes).unwrap_or(i64::MAX),
                ),
            );
        }
    }

    /// The wait before reconnection attempt `n` (0-based), as kombu spaces them:
    /// `retry_interval + n * retry_backoff`, at most `interval_max`.
    pub fn reconnect_delay(&self, attempt: u32) -> Duration {
        let secs = u64::from(self.rabbit_retry_interval)
            .saturating_add(u64::from(attempt).saturating_mul(u64::from(self.rabbit_retry_backoff)))
            .min(u64::from(self.rabbit_interval_max.max(1)));
        Duration::from_secs(secs)
    }
}

fn long_string(s: &str) -> AMQPValue {
    AMQPValue::LongString(s.into())
}

/// Everything the transport needs, from one configuration.
#[derive(Clone, Debug)]
pub struct OsloSettings {
    pub url: TransportUrl,
    pub rabbit: RabbitOptions,
    /// `[DEFAULT] control_exchange`: the topic exchange of RPC and notifications.
    pub control_exchange: String,
    /// `[conductor] topic`.
    pub topic: String,
    /// `[DEFAULT] rpc_response_timeout`.
    pub rpc_response_timeout: Duration,
    /// `[DEFAULT] executor_thread_pool_size`: requests a server handles at once.
    pub executor_thread_pool_size: usize,
    /// `[oslo_messaging_notifications] driver`.
    pub notification_drivers: Vec<String>,
    /// `[oslo_messaging_notifications] topics`.
    pub notification_topics: Vec<String>,
}

impl OsloSettings {
    pub fn from_config(cfg: &Config) -> Result<Self, OptionsError> {
        let url_secret = cfg
            .default
            .transport_url
            .as_ref()
            .filter(|s| !s.is_empty())
            .ok_or(OptionsError::NoTransportUrl)?;
        let url = TransportUrl::parse(url_secret.expose())?;
        let mut rabbit = RabbitOptions::from_config(cfg);
        rabbit.apply_query(&url.query)?;
        Ok(Self {
            url,
            rabbit,
            control_exchange: cfg.default.control_exchange.clone(),
            topic: cfg.conductor.topic.clone(),
            rpc_response_timeout: Duration::from_secs(u64::from(
                cfg.default.rpc_response_timeout.max(1),
            )),
            executor_thread_pool_size: usize::try_from(cfg.default.executor_thread_pool_size)
                .unwrap_or(64)
                .max(1),
            notification_drivers: cfg.oslo_messaging_notifications.driver.clone(),
            notification_topics: cfg.oslo_messaging_notifications.topics.clone(),
        })
    }

    /// Settings for `url` with every other value at its default (tools and tests).
    pub fn for_url(url: &str) -> Result<Self, OptionsError> {
        let url = TransportUrl::parse(url)?;
        let mut rabbit = RabbitOptions::default();
        rabbit.apply_query(&url.query)?;
        Ok(Self {
            url,
            rabbit,
            control_exchange: "magnum".into(),
            topic: "magnum-conductor".into(),
            rpc_response_timeout: Duration::from_secs(60),
            executor_thread_pool_size: 64,
            notification_drivers: Vec::new(),
            notification_topics: vec!["notifications".into()],
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn query_overrides_and_refuses_unknown_options() {
        let mut o = RabbitOptions::default();
        o.apply_query(&[
            ("amqp_durable_queues".into(), "True".into()),
            ("heartbeat_timeout_threshold".into(), "30".into()),
            ("kombu_compression".into(), "gzip".into()),
        ])
        .unwrap();
        assert!(o.durable());
        assert_eq!(o.heartbeat_timeout_threshold, 30);
        assert_eq!(
            o.apply_query(&[("bogus".into(), "1".into())]),
            Err(OptionsError::UnknownQueryOption("bogus".into()))
        );
        assert!(o.apply_query(&[("ssl".into(), "maybe".into())]).is_err());
    }

    #[test]
    fn ha_and_quorum_exclude_each_other() {
        let mut o = RabbitOptions::default();
        assert_eq!(
            o.apply_query(&[
                ("rabbit_ha_queues".into(), "1".into()),
                ("rabbit_quorum_queue".into(), "1".into())
            ]),
            Err(OptionsError::HaAndQuorum)
        );
    }

    #[test]
    fn queue_arguments_per_kind() {
        let o = RabbitOptions::default();
        assert!(o.topic_queue_args().inner().is_empty());
        let t = o.transient_queue_args();
        assert_eq!(
            t.inner().get("x-expires"),
            Some(&AMQPValue::LongLongInt(1_800_000))
        );
        let q = RabbitOptions {
            rabbit_quorum_queue: true,
            rabbit_quorum_delivery_limit: 5,
            ..RabbitOptions::default()
        };
        assert!(q.durable());
        let args = q.topic_queue_args();
        assert_eq!(
            args.inner().get("x-queue-type"),
            Some(&long_string("quorum"))
        );
        assert_eq!(
            args.inner().get("x-delivery-limit"),
            Some(&AMQPValue::LongLongInt(5))
        );
        assert!(!args.inner().contains_key("x-expires"));
    }

    #[test]
    fn reconnect_delays_grow_linearly_to_the_cap() {
        let o = RabbitOptions::default();
        let d: Vec<u64> = (0..20).map(|n| o.reconnect_delay(n).as_secs()).collect();
        assert_eq!(&d[..4], &[1, 3, 5, 7]);
        assert_eq!(d[19], 30);
    }
}
