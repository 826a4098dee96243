//! List items already rendered, kept under the bytes of the row they were rendered from: the
//! storage side of the hot lists' speed (`ClusterTemplateRepo::list_rendered`,
//! `ClusterRepo::list_brief_rendered`). The caller gives the rendering; whether an item is
//! rendered from a decoded row or copied from an earlier rendering of an equal row stays in
//! here, so no row bytes leave storage and every engine takes the same path above it.
//!
//! A list item's JSON is a function of its row (the columns the list selects), the request's
//! base URL and a few facts of the list (its kind, the microversion's key names, a cluster's
//! node counts): nothing else. MariaDB and MySQL send a prepared statement's rows in their
//! binary protocol, and rows with equal bytes hold equal values, so an item rendered once is
//! kept under those bytes and facts, and a later request that reads an equal row copies it
//! instead of decoding the row, checking its text for UTF-8, validating its labels and
//! escaping its strings (with the row left unsplit by the driver, a templates request then
//! runs a quarter of the instructions it did). PostgreSQL and SQLite lend no row bytes: every
//! row is decoded and rendered.
//!
//! Nothing can be stale: the statement runs on every request, the database stays the only
//! source of truth, and a row that changed has other bytes, so it misses; its old item is
//! never asked for again and is evicted in time. Nor can an item cross projects: it is only
//! ever handed out for a row equal to the one it was rendered from, whoever reads it. The
//! cache is bounded in bytes; entries are weighed by their key and JSON.

use std::sync::Arc;

/// Bytes the cache holds at most (keys, items and bookkeeping), for every list together:
/// a page of 1,000 clusters takes about 1.3 MB, 100 templates about 0.25 MB.
const CAPACITY: u64 = 8 << 20;
/// Bookkeeping per entry, roughly, for the weight.
const OVERHEAD: u64 = 96;

/// Which list an item belongs to: with the base URL, what every item of a list depends on
/// besides its row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum List {
    /// `GET /v1/clustertemplates`.
    Templates,
    /// `GET /v1/clusters` from microversion 1.13 (`cluster_id`).
    ClustersBrief,
    /// The same below 1.13 (`stack_id`).
    ClustersBriefBelow113,
}

/// One rendered item and the uuid it names (a page's last one is the next page's marker).
struct Item {
    json: Box<[u8]>,
    uuid: Option<Box<str>>,
}

/// What an item is kept under: its list's facts (a number per list kind and base URL),
/// the row's own facts (fixed-size, zero-padded: a cluster's node counts) and its bytes.
#[derive(PartialEq, Eq)]
struct Key {
    facts: u64,
    own: [u8; 16],
    raw: Box<[u8]>,
}

/// A [`Key`] borrowed from the row being read: looked up without copying its bytes.
struct KeyRef<'a> {
    facts: u64,
    own: [u8; 16],
    raw: &'a [u8],
}

// Both hash alike (the facts and the row's bytes; `own` is left to the comparison).
impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        KeyRef::from(self).hash(h);
    }
}

impl std::hash::Hash for KeyRef<'_> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        h.write_u64(self.facts);
        h.write(self.raw);
    }
}

impl<'a> From<&'a Key> for KeyRef<'a> {
    fn from(k: &'a Key) -> Self {
        KeyRef {
            facts: k.facts,
            own: k.own,
            raw: &k.raw,
        }
    }
}

impl quick_cache::Equivalent<Key> for KeyRef<'_> {
    fn equivalent(&self, k: &Key) -> bool {
        self.facts == k.facts && self.own == k.own && *self.raw == *k.raw
    }
}

#[derive(Clone)]
struct Weight;

impl quick_cache::Weighter<Key, Arc<Item>> for Weight {
    fn weight(&self, key: &Key, item: &Arc<Item>) -> u64 {
        let uuid = item.uuid.as_ref().map_or(0, |u| u.len());
        (key.raw.len() + item.json.len() + uuid) as u64 + OVERHEAD
    }
}

/// Distinct base URLs whose list facts are numbered at most; past it the numbering starts
/// over with fresh numbers, and items under the old ones are evicted in time.
const MAX_FACTS: usize = 64;

/// The process's rendered list items (shared by every request and every handle of the
/// database; internally sharded).
pub struct ItemCache {
    items: quick_cache::sync::Cache<Key, Arc<Item>, Weight, foldhash::fast::RandomState>,
    facts: std::sync::Mutex<Facts>,
}

#[derive(Default)]
struct Facts {
    /// Per base URL, the number of each list kind's facts (indexed by `List as usize`).
    numbers: std::collections::HashMap<String, [Option<u64>; 3]>,
    next: u64,
}

impl std::fmt::Debug for ItemCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ItemCache")
            .field("items", &self.items.len())
            .finish()
    }
}

impl Default for ItemCache {
    fn default() -> Self {
        Self::with_capacity(CAPACITY)
    }
}

impl ItemCache {
    /// A cache of at most `bytes` (weighed as keys plus items).
    pub fn with_capacity(bytes: u64) -> Self {
        // Sized for items of about 1.5 KB; the weight, not this, bounds it.
        let estimated = usize::try_from(bytes / 1536).unwrap_or(usize::MAX).max(16);
        Self {
            items: quick_cache::sync::Cache::with(
                estimated,
                bytes,
                Weight,
                foldhash::fast::RandomState::default(),
                quick_cache::sync::DefaultLifecycle::default(),
            ),
            facts: Default::default(),
        }
    }

    /// How many items it holds now.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The number of a list's facts (once per request).
    fn facts(&self, list: List, base: &str) -> u64 {
        // A poisoned lock only means another request panicked while numbering: the map is
        // still whole.
        let mut f = self
            .facts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = f.numbers.get(base).and_then(|kinds| kinds[list as usize]) {
            return n;
        }
        if f.numbers.len() >= MAX_FACTS && !f.numbers.contains_key(base) {
            f.numbers.clear();
        }
        let n = f.next;
        f.next += 1;
        f.numbers.entry(base.to_owned()).or_default()[list as usize] = Some(n);
        n
    }
}

/// A list rendered by storage: the body (the caller's opening, then the items, separated by
/// commas), how many rows the page had, and the last one's uuid (the next page's marker).
#[derive(Debug)]
pub struct RenderedList {
    pub body: Vec<u8>,
    pub count: usize,
    pub last: Option<String>,
}

/// A list body being written, item by item, from rows or from the cache.
pub(crate) struct Items<'a> {
    body: Vec<u8>,
    cache: &'a ItemCache,
    facts: u64,
    /// The current row's own facts and bytes, when `known` missed (its item is then kept).
    missed: Option<[u8; 16]>,
    raw: Vec<u8>,
    first: bool,
    /// The last item's uuid, kept in one reused string.
    last: String,
    last_is_some: bool,
}

impl<'a> Items<'a> {
    /// `body` holds the list's opening; every item of it depends on `list` and `base`
    /// besides its row.
    pub(crate) fn new(cache: &'a ItemCache, body: Vec<u8>, list: List, base: &str) -> Self {
        Self {
            body,
            cache,
            facts: cache.facts(list, base),
            missed: None,
            raw: Vec::new(),
            first: true,
            last: String::new(),
            last_is_some: false,
        }
    }

    fn separate(&mut self) {
        if !self.first {
            self.body.push(b',');
        }
        self.first = false;
    }

    fn mark(&mut self, uuid: Option<&str>) {
        self.last_is_some = uuid.is_some();
        self.last.clear();
        self.last.push_str(uuid.unwrap_or_default());
    }

    /// A row's bytes and the facts of its own (zero-padded): when an item was rendered from
    /// an equal row, it is written and this says true.
    pub(crate) fn known(&mut self, own: [u8; 16], raw: &[u8]) -> bool {
        let key = KeyRef {
            facts: self.facts,
            own,
            raw,
        };
        let Some(item) = self.cache.items.get(&key) else {
            self.missed = Some(own);
            self.raw.clear();
            self.raw.extend_from_slice(raw);
            return false;
        };
        self.missed = None;
        self.separate();
        self.body.extend_from_slice(&item.json);
        self.mark(item.uuid.as_deref());
        true
    }

    /// An item rendered by `write` from a decoded row; kept when the row's bytes were seen
    /// by [`Self::known`] just before.
    pub(crate) fn write(&mut self, uuid: Option<&str>, write: impl FnOnce(&mut Vec<u8>)) {
        self.separate();
        let start = self.body.len();
        write(&mut self.body);
        if let Some(own) = self.missed.take() {
            let key = Key {
                facts: self.facts,
                own,
                raw: self.raw.as_slice().into(),
            };
            let item = Item {
                json: self.body[start..].into(),
                uuid: uuid.map(Into::into),
            };
            self.cache.items.insert(key, Arc::new(item));
        }
        self.mark(uuid);
    }

    /// The body written so far and the last item's uuid.
    pub(crate) fn finish(self) -> (Vec<u8>, Option<String>) {
        let last = self.last_is_some.then_some(self.last);
        (self.body, last)
    }

    /// [`Self::finish`] for a page of `count` rows.
    pub(crate) fn list(self, count: usize) -> RenderedList {
        let (body, last) = self.finish();
        RenderedList { body, count, last }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn render(cache: &ItemCache, list: List, base: &str, rows: &[(&[u8], &str)]) -> Vec<u8> {
        let mut items = Items::new(cache, b"[".to_vec(), list, base);
        for (raw, text) in rows {
            if !items.known([0; 16], raw) {
                items.write(Some(text), |o| o.extend_from_slice(text.as_bytes()));
            }
        }
        let (mut body, last) = items.finish();
        body.push(b']');
        assert_eq!(last.as_deref(), rows.last().map(|r| r.1));
        body
    }

    /// Equal rows are served from the cache; a changed row, another base or another list
    /// renders anew; the marker is the last item's uuid either way.
    #[test]
    fn items_are_kept_under_their_rows_bytes_and_facts() {
        let cache = ItemCache::default();
        let rows: &[(&[u8], &str)] = &[(b"r1", "a"), (b"r2", "b")];
        assert_eq!(render(&cache, List::Templates, "http://x", rows), b"[a,b]");
        assert_eq!(cache.len(), 2);
        // The same bytes: the kept items, even if "rendering" would now differ.
        let changed: &[(&[u8], &str)] = &[(b"r1", "A"), (b"r2", "b")];
        assert_eq!(
            render(&cache, List::Templates, "http://x", changed),
            b"[a,b]"
        );
        // Other row bytes, base or list: rendered again.
        let other: &[(&[u8], &str)] = &[(b"r1x", "c"), (b"r2", "b")];
        assert_eq!(render(&cache, List::Templates, "http://x", other), b"[c,b]");
        assert_eq!(
            render(&cache, List::Templates, "http://y", changed),
            b"[A,b]"
        );
        assert_eq!(
            render(&cache, List::ClustersBrief, "http://x", changed),
            b"[A,b]"
        );
        assert_eq!(cache.len(), 7);
    }

    /// A row's own facts are part of its key; the base URL too.
    #[test]
    fn own_facts_and_bases_keep_items_apart() {
        let cache = ItemCache::default();
        let own = |n: u8| {
            let mut o = [0; 16];
            o[0] = n;
            o
        };
        let mut items = Items::new(&cache, Vec::new(), List::Templates, "ab");
        assert!(!items.known(own(1), b"c"));
        items.write(None, |o| o.push(b'1'));
        assert!(!items.known(own(2), b"c"));
        items.write(None, |o| o.push(b'2'));
        assert!(items.known(own(1), b"c"));
        assert!(items.known(own(2), b"c"));
        assert_eq!(items.finish().0, b"1,2,1,2");
        let mut items = Items::new(&cache, Vec::new(), List::Templates, "a");
        assert!(!items.known(own(1), b"c"));
        items.write(None, |o| o.push(b'3'));
        assert_eq!(items.finish(), (b"3".to_vec(), None));
    }

    /// Past `MAX_FACTS` bases the numbering starts over; nothing is handed out under a
    /// number that meant another base.
    #[test]
    fn facts_are_renumbered_not_reused() {
        let cache = ItemCache::default();
        let first = cache.facts(List::Templates, "http://0");
        for i in 1..=MAX_FACTS {
            cache.facts(List::Templates, &format!("http://{i}"));
        }
        let again = cache.facts(List::Templates, "http://0");
        assert_ne!(first, again);
        assert_eq!(again, cache.facts(List::Templates, "http://0"));
    }

    /// The cache holds at most its capacity in weight.
    #[test]
    fn the_cache_is_bounded() {
        let cache = ItemCache::with_capacity(64 << 10);
        let json = vec![b'x'; 1000];
        for i in 0..1000u32 {
            let mut items = Items::new(&cache, Vec::new(), List::Templates, "");
            let raw = i.to_le_bytes();
            assert!(!items.known([0; 16], &raw));
            items.write(None, |o| o.extend_from_slice(&json));
        }
        assert!(cache.items.weight() <= 64 << 10, "{}", cache.items.weight());
        assert!(cache.len() < 100, "{}", cache.len());
    }
}
