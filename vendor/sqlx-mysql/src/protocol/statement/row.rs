use bytes::{Buf, Bytes};

use crate::error::Error;
use crate::io::MySqlBufExt;
use crate::io::{BufExt, ProtocolDecode};
use crate::protocol::text::ColumnType;
use crate::protocol::row::Values;
use crate::protocol::Row;
use crate::MySqlColumn;

// https://dev.mysql.com/doc/internals/en/binary-protocol-resultset-row.html#packet-ProtocolBinary::ResultsetRow
// https://dev.mysql.com/doc/internals/en/binary-protocol-value.html

#[derive(Debug)]
pub(crate) struct BinaryRow(pub(crate) Row);

/// magnum-rs: rows of more columns than this are split on their first read (`Row::get`).
const SPLIT_LATER_FROM: usize = 8;

impl<'de> ProtocolDecode<'de, &'de [MySqlColumn]> for BinaryRow {
    // magnum-rs: a row of many columns is split on its first read past the first column, so
    // a reader that wants only its bytes (`MySqlRow::raw_binary`) or its first column skips
    // the split; a row of a few columns is split here as before (a deferred split costs
    // more than it saves there).
    fn decode_with(mut buf: Bytes, columns: &'de [MySqlColumn]) -> Result<Self, Error> {
        let header = buf.get_u8();
        if header != 0 {
            return Err(err_protocol!(
                "expected 0x00 (ROW) but found 0x{:02x}",
                header
            ));
        }

        if columns.len() > SPLIT_LATER_FROM {
            return Ok(BinaryRow(Row::unsplit(buf)));
        }
        let values = Self::split(&buf, columns)?;
        Ok(BinaryRow(Row::new(buf, values)))
    }
}

impl BinaryRow {
    /// Each column's range in a binary row's storage (its NULL bitmap and values).
    pub(crate) fn split(storage: &Bytes, columns: &[MySqlColumn]) -> Result<Values, Error> {
        let mut values = Vec::with_capacity(columns.len());
        Self::ranges(storage, columns, columns.len(), |r| values.push(r))?;
        Ok(values)
    }

    /// The first column's range, the rest left unsplit.
    pub(crate) fn first(
        storage: &Bytes,
        columns: &[MySqlColumn],
    ) -> Result<Option<std::ops::Range<usize>>, Error> {
        let mut first = None;
        Self::ranges(storage, columns, 1, |r| first = r)?;
        Ok(first)
    }

    /// The ranges of the first `upto` columns, in order, to `push`.
    fn ranges(
        storage: &Bytes,
        columns: &[MySqlColumn],
        upto: usize,
        mut push: impl FnMut(Option<std::ops::Range<usize>>),
    ) -> Result<(), Error> {
        let mut buf = storage.clone();
        let offset = buf.len();
        let null_bitmap_len = (columns.len() + 9) / 8;
        if buf.len() < null_bitmap_len {
            return Err(err_protocol!("binary row shorter than its NULL bitmap"));
        }

        let null_bitmap = buf.get_bytes(null_bitmap_len);

        for (column_idx, column) in columns.iter().enumerate().take(upto) {
            // NOTE: the column index starts at the 3rd bit
            let column_null_idx = column_idx + 2;

            let byte_idx = column_null_idx / 8;
            let bit_idx = column_null_idx % 8;

            let is_null = null_bitmap[byte_idx] & (1u8 << bit_idx) != 0;

            if is_null {
                push(None);
                continue;
            }

            // NOTE: MySQL will never generate NULL types for non-NULL values
            let type_info = &column.type_info;

            // Unlike Postgres, MySQL does not length-prefix every value in a binary row.
            // Values are *either* fixed-length or length-prefixed,
            // so we need to inspect the type code to be sure.
            let size: usize = match type_info.r#type {
                // All fixed-length types.
                ColumnType::LongLong => 8,
                ColumnType::Long | ColumnType::Int24 => 4,
                ColumnType::Short | ColumnType::Year => 2,
                ColumnType::Tiny => 1,
                ColumnType::Float => 4,
                ColumnType::Double => 8,

                // Blobs and strings are prefixed with their length,
                // which is itself a length-encoded integer.
                ColumnType::String
                | ColumnType::VarChar
                | ColumnType::VarString
                | ColumnType::Enum
                | ColumnType::Set
                | ColumnType::LongBlob
                | ColumnType::MediumBlob
                | ColumnType::Blob
                | ColumnType::TinyBlob
                | ColumnType::Geometry
                | ColumnType::Bit
                | ColumnType::Decimal
                | ColumnType::Json
                | ColumnType::NewDecimal => {
                    let size = buf.get_uint_lenenc()?;
                    usize::try_from(size)
                        .map_err(|_| err_protocol!("BLOB length out of range: {size}"))?
                }

                // Like strings and blobs, these values are variable-length.
                // Unlike strings and blobs, however, they exclusively use one byte for length.
                ColumnType::Time
                | ColumnType::Timestamp
                | ColumnType::Date
                | ColumnType::Datetime => {
                    // Leave the length byte on the front of the value because decoding uses it.
                    buf[0] as usize + 1
                }

                // NOTE: MySQL will never generate NULL types for non-NULL values
                ColumnType::Null => unreachable!(),
            };

            let offset = offset - buf.len();
            if buf.len() < size {
                return Err(err_protocol!(
                    "binary row ends inside column {column_idx}: {size} bytes, {} left",
                    buf.len()
                ));
            }

            push(Some(offset..(offset + size)));

            buf.advance(size);
        }

        Ok(())
    }
}
