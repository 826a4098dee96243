use std::ops::Range;
use std::sync::OnceLock;

use bytes::Bytes;

use crate::error::Error;

/// Each column's range in a row's storage (`None`: NULL).
pub(crate) type Values = Vec<Option<Range<usize>>>;

#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) storage: Bytes,
    // magnum-rs: worked out on a row's first read (binary rows, `BinaryRow`), so a reader
    // that only looks at the row's bytes (`MySqlRow::raw_binary`) never pays for it; a text
    // row's are known when it is read. `Err` holds why the row could not be split.
    values: OnceLock<Result<Values, String>>,
}

impl Row {
    pub(crate) fn new(storage: Bytes, values: Values) -> Self {
        Self {
            storage,
            values: OnceLock::from(Ok(values)),
        }
    }

    /// A row whose columns are split on first read by `get`'s `split`.
    pub(crate) fn unsplit(storage: Bytes) -> Self {
        Self {
            storage,
            values: OnceLock::new(),
        }
    }

    /// Column `index`: `split` splits an unsplit row (once), `first` reads its first
    /// column without splitting it.
    pub(crate) fn get(
        &self,
        index: usize,
        split: impl FnOnce(&Bytes) -> Result<Values, Error>,
        first: impl FnOnce(&Bytes) -> Result<Option<Range<usize>>, Error>,
    ) -> Result<Option<&[u8]>, Error> {
        let values = match self.values.get() {
            Some(values) => values,
            None if index == 0 => return Ok(first(&self.storage)?.map(|col| &self.storage[col])),
            None => self
                .values
                .get_or_init(|| split(&self.storage).map_err(|e| e.to_string())),
        };
        match values {
            Ok(values) => Ok(values[index].clone().map(|col| &self.storage[col])),
            Err(e) => Err(err_protocol!("{e}")),
        }
    }
}
