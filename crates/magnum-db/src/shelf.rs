//! A few pooled connections kept out of the pool between list reads.
//!
//! sqlx pings every connection handed back to its pool, in a task it spawns for the purpose:
//! a round trip to the server and a wake-up on both sides per request, which on the hot
//! lists was a tenth of magnumd's CPU and some of the server's. A list that read all its rows
//! leaves its connection clean, so it is put on this shelf instead and the next list takes it
//! from there without either. Anything else (an error, a cancelled request) drops the
//! connection the usual way, so sqlx's release check still drains or closes it.
//!
//! What sits on the shelf counts as in use for the pool, so the shelf holds at most a quarter
//! of the pool's bound (none for a pool of fewer than four), a connection idle there longer
//! than [`IDLE`] is pinged before use (as the pool does), and every connection goes back
//! through the pool after [`TENURE`] off it, or unused that long, so the pool's lifetime and
//! idle rules still apply.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;

/// As the pool's `test_before_acquire_if_idle_for`.
const IDLE: Duration = Duration::from_secs(1);
/// Longest a connection stays off the pool.
const TENURE: Duration = Duration::from_secs(10);
/// Most connections on one shelf.
const MOST: u32 = 8;

/// A shelved connection and when it left the pool.
pub(crate) struct Lent<DB: sqlx::Database> {
    pub(crate) conn: PoolConnection<DB>,
    since: Instant,
}

struct Slot<DB: sqlx::Database> {
    lent: Lent<DB>,
    shelved: Instant,
}

pub(crate) struct Shelf<DB: sqlx::Database> {
    slots: Mutex<Vec<Slot<DB>>>,
    cap: usize,
    /// A spare is being fetched from the pool (one at a time).
    fetching: AtomicBool,
    /// The pool is closing: nothing more is shelved.
    closed: AtomicBool,
}

impl<DB: sqlx::Database> Shelf<DB> {
    fn new(pool_bound: u32) -> Self {
        let cap = if pool_bound < 4 {
            0
        } else {
            (pool_bound / 4).min(MOST)
        };
        Self {
            slots: Mutex::new(Vec::new()),
            cap: usize::try_from(cap).unwrap_or(0),
            fetching: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }
    }

    /// The most recently shelved connection, or a fresh one from `pool`.
    pub(crate) async fn take(&self, pool: &sqlx::Pool<DB>) -> Result<Lent<DB>, sqlx::Error> {
        use sqlx::Connection as _;
        let now = Instant::now();
        let (slot, expired) = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            // Those past their tenure go back to the pool (dropped outside the lock; nothing
            // is allocated when none has expired).
            let expired: Vec<Slot<DB>> = slots
                .extract_if(.., |s| now.duration_since(s.lent.since) >= TENURE)
                .collect();
            (slots.pop(), expired)
        };
        drop(expired);
        if let Some(mut slot) = slot
            && (now.duration_since(slot.shelved) < IDLE || slot.lent.conn.ping().await.is_ok())
        {
            return Ok(slot.lent);
        }
        Ok(Lent {
            conn: pool.acquire().await?,
            since: now,
        })
    }

    /// A second connection for a request that can use one but need not wait for it: a
    /// shelved one that was in use within [`IDLE`] (so it needs no ping), else none, and
    /// then one is fetched from the pool in the background (tested as the pool tests its
    /// connections) and shelved for the next request.
    pub(crate) fn try_take(self: &Arc<Self>, pool: &sqlx::Pool<DB>) -> Option<Lent<DB>> {
        let now = Instant::now();
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let fresh = slots.last().is_some_and(|s| {
                now.duration_since(s.shelved) < IDLE && now.duration_since(s.lent.since) < TENURE
            });
            if fresh { slots.pop() } else { None }
        };
        if slot.is_none() && self.cap > 0 && !self.fetching.swap(true, Ordering::AcqRel) {
            let (shelf, pool) = (self.clone(), pool.clone());
            tokio::spawn(async move {
                if let Ok(conn) = pool.acquire().await {
                    shelf.put(Lent {
                        conn,
                        since: Instant::now(),
                    });
                }
                shelf.fetching.store(false, Ordering::Release);
            });
        }
        slot.map(|s| s.lent)
    }

    /// Shelve a connection whose statement ran to its end; dropped (back to the pool) when
    /// the shelf is full.
    pub(crate) fn put(&self, lent: Lent<DB>) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if slots.len() < self.cap && !self.closed.load(Ordering::Acquire) {
            slots.push(Slot {
                lent,
                shelved: Instant::now(),
            });
        }
    }

    fn len(&self) -> usize {
        self.slots.lock().map(|s| s.len()).unwrap_or(0)
    }

    /// Hand back to the pool what has not been used for `unused` or was lent longer than
    /// [`TENURE`] (dropped outside the lock).
    fn expire(&self, unused: Duration) {
        let now = Instant::now();
        let expired: Vec<Slot<DB>> = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots
                .extract_if(.., |s| {
                    now.duration_since(s.shelved) >= unused
                        || now.duration_since(s.lent.since) >= TENURE
                })
                .collect()
        };
        drop(expired);
    }

    fn clear(&self) {
        self.closed.store(true, Ordering::Release);
        let drained = std::mem::take(&mut *self.slots.lock().unwrap_or_else(|p| p.into_inner()));
        drop(drained);
    }
}

/// One shelf per engine (a database has one engine; the others stay empty).
pub(crate) struct Shelves {
    pub(crate) mysql: Arc<Shelf<sqlx::MySql>>,
    pub(crate) postgres: Arc<Shelf<sqlx::Postgres>>,
    pub(crate) sqlite: Arc<Shelf<sqlx::Sqlite>>,
}

impl Shelves {
    pub(crate) fn new(pool_bound: u32) -> Self {
        Self {
            mysql: Arc::new(Shelf::new(pool_bound)),
            postgres: Arc::new(Shelf::new(pool_bound)),
            sqlite: Arc::new(Shelf::new(pool_bound)),
        }
    }

    /// Connections on the shelves now (idle, though the pool counts them as in use).
    pub(crate) fn len(&self) -> usize {
        self.mysql.len() + self.postgres.len() + self.sqlite.len()
    }

    /// Hand back to the pool every connection unused on its shelf for `unused`.
    pub(crate) fn expire(&self, unused: Duration) {
        self.mysql.expire(unused);
        self.postgres.expire(unused);
        self.sqlite.expire(unused);
    }

    /// Hand every shelved connection back to the pool (before it is closed: a pool waits
    /// for all its connections).
    pub(crate) fn clear(&self) {
        self.mysql.clear();
        self.postgres.clear();
        self.sqlite.clear();
    }
}

impl std::fmt::Debug for Shelves {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Shelves({} connections)", self.len())
    }
}

/// Every [`TENURE`], what the lists have stopped using goes back to the pool, whose idle
/// timeout and lifetime then apply to it as to any other connection. Ends with the shelves.
pub(crate) async fn reap(shelves: std::sync::Weak<Shelves>) {
    let mut tick = tokio::time::interval(TENURE);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(shelves) = shelves.upgrade() else {
            return;
        };
        shelves.expire(TENURE);
    }
}
