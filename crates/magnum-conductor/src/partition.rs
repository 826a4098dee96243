//! Which conductor sweeps which cluster. Upstream had every conductor poll every in-progress
//! cluster (conductor.md §1.2), so N conductors did N times the driver work. Here each
//! sweep reads the live conductors from `magnum_service` and keeps the clusters whose
//! rendezvous hash (highest random weight over host and cluster uuid) it wins: every live
//! conductor computes the same owner without talking to the others, and a conductor joining or
//! leaving moves only its own share.
//!
//! Liveness is upstream's heartbeat rule over a window shortened by one sweep interval, so a
//! dead conductor's clusters are taken over within `service_down_time` of its last heartbeat.
//! Python conductors heartbeat under the same binary but cannot run our drivers (they poll
//! every cluster with theirs anyway): over RabbitMQ, hosts that hold no membership queue of
//! ours (magnum-rpc's `members`) are left out, so no cluster falls to them.

use std::time::Duration;

use chrono::NaiveDateTime;
use magnum_db::repo::magnum_service::{MagnumService, is_up};
use sha2::{Digest, Sha256};

/// The conductors that share the sweep, sorted, always including `me`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Members {
    hosts: Vec<String>,
    me: String,
}

impl Members {
    /// The live hosts among `rows` (every conductor's heartbeat row), plus `me`: a conductor
    /// sweeping is alive even before its first heartbeat is visible.
    pub(crate) fn from_rows(
        rows: &[MagnumService],
        me: &str,
        now: NaiveDateTime,
        window: Duration,
    ) -> Self {
        let window = i64::try_from(window.as_secs()).unwrap_or(i64::MAX);
        let mut hosts: Vec<String> = rows
            .iter()
            .filter(|r| is_up(r, now, window))
            .filter_map(|r| r.host.clone())
            .collect();
        hosts.push(me.to_owned());
        hosts.sort();
        hosts.dedup();
        Self {
            hosts,
            me: me.to_owned(),
        }
    }

    /// The other hosts.
    pub(crate) fn others(&self) -> impl Iterator<Item = &str> {
        self.hosts
            .iter()
            .map(String::as_str)
            .filter(|h| *h != self.me)
    }

    /// Leaves `hosts` out (never `me`).
    pub(crate) fn exclude(&mut self, hosts: &[String]) {
        let me = &self.me;
        self.hosts.retain(|h| h == me || !hosts.contains(h));
    }

    pub(crate) fn len(&self) -> usize {
        self.hosts.len()
    }

    /// Whether this conductor owns `cluster_uuid`'s periodic work.
    pub(crate) fn owns(&self, cluster_uuid: &str) -> bool {
        self.owner(cluster_uuid) == Some(self.me.as_str())
    }

    /// The host with the highest weight for `cluster_uuid` (ties go to the first in order).
    pub(crate) fn owner(&self, cluster_uuid: &str) -> Option<&str> {
        let mut best: Option<(u64, &str)> = None;
        for host in &self.hosts {
            let w = weight(host, cluster_uuid);
            if best.is_none_or(|(bw, _)| w > bw) {
                best = Some((w, host));
            }
        }
        best.map(|(_, h)| h)
    }
}

/// A stable weight: the same in every process and every release (SHA-256, not the
/// randomly keyed std hasher).
fn weight(host: &str, cluster_uuid: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(host.as_bytes());
    h.update([0]);
    h.update(cluster_uuid.as_bytes());
    let d = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&d[..8]);
    u64::from_be_bytes(first)
}

/// How recent a heartbeat must be for its conductor to own clusters: `service_down_time`
/// less one sweep interval, so the take-over sweep runs within `service_down_time`; never
/// shorter than two heartbeats, or a live conductor would flap in and out.
pub(crate) fn ownership_window(
    service_down_time: Duration,
    sync_interval: Duration,
    report_interval: Duration,
) -> Duration {
    service_down_time
        .saturating_sub(sync_interval)
        .max(report_interval * 2)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn row(host: &str, seen: NaiveDateTime) -> MagnumService {
        MagnumService {
            host: Some(host.into()),
            binary: Some("magnum-conductor".into()),
            updated_at: Some(seen),
            ..MagnumService::default()
        }
    }

    fn uuids(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("00000000-0000-4000-8000-{i:012}"))
            .collect()
    }

    #[test]
    fn every_cluster_has_exactly_one_owner_and_shares_are_even() {
        let now = chrono::Utc::now().naive_utc();
        let rows = [row("a", now), row("b", now), row("c", now)];
        let views: Vec<Members> = ["a", "b", "c"]
            .iter()
            .map(|me| Members::from_rows(&rows, me, now, Duration::from_secs(60)))
            .collect();
        let mut shares = [0usize; 3];
        for u in uuids(3000) {
            let owners: Vec<usize> = (0..3).filter(|i| views[*i].owns(&u)).collect();
            assert_eq!(owners.len(), 1, "{u}: {owners:?}");
            shares[owners[0]] += 1;
        }
        // Rendezvous hashing is uniform: each share is within 15% of a third.
        for s in shares {
            assert!((850..=1150).contains(&s), "{shares:?}");
        }
    }

    #[test]
    fn a_dead_conductor_moves_only_its_own_share() {
        let now = chrono::Utc::now().naive_utc();
        let stale = now - chrono::Duration::seconds(300);
        let window = Duration::from_secs(60);
        let all = Members::from_rows(
            &[row("a", now), row("b", now), row("c", now)],
            "a",
            now,
            window,
        );
        let without_c = Members::from_rows(
            &[row("a", now), row("b", now), row("c", stale)],
            "a",
            now,
            window,
        );
        assert_eq!(all.len(), 3);
        assert_eq!(without_c.len(), 2);
        for u in uuids(1000) {
            let before = all.owner(&u).unwrap();
            let after = without_c.owner(&u).unwrap();
            if before != "c" {
                assert_eq!(before, after, "{u} moved although its owner lives");
            } else {
                assert_ne!(after, "c");
            }
        }
    }

    #[test]
    fn me_is_a_member_before_my_first_heartbeat() {
        let now = chrono::Utc::now().naive_utc();
        let m = Members::from_rows(&[], "alone", now, Duration::from_secs(60));
        assert!(uuids(10).iter().all(|u| m.owns(u)));
    }

    #[test]
    fn window_is_service_down_time_less_a_sweep_but_at_least_two_beats() {
        let s = Duration::from_secs;
        assert_eq!(ownership_window(s(180), s(10), s(60)), s(170));
        assert_eq!(ownership_window(s(6), s(5), s(1)), s(2));
    }
}
