use std::sync::Arc;

pub(crate) use sqlx_core::row::*;

use crate::column::ColumnIndex;
use crate::error::Error;
use crate::ext::ustr::UStr;
use crate::HashMap;
use crate::protocol::statement::BinaryRow;
use crate::{protocol, MySql, MySqlColumn, MySqlValueFormat, MySqlValueRef};

/// Implementation of [`Row`] for MySQL.
pub struct MySqlRow {
    pub(crate) row: protocol::Row,
    pub(crate) format: MySqlValueFormat,
    pub(crate) columns: Arc<Vec<MySqlColumn>>,
    pub(crate) column_names: Arc<HashMap<UStr, usize>>,
}

impl MySqlRow {
    /// magnum-rs: a binary-protocol row's bytes as the server sent them (its NULL bitmap and
    /// values, after the packet's header byte); `None` for a text-protocol row. Two rows of
    /// one statement with the same bytes decode to the same values, so a reader may key
    /// work it did for one row by these bytes and skip it for the other.
    pub fn raw_binary(&self) -> Option<&[u8]> {
        match self.format {
            MySqlValueFormat::Binary => Some(&self.row.storage),
            MySqlValueFormat::Text => None,
        }
    }
}

impl Row for MySqlRow {
    type Database = MySql;

    fn columns(&self) -> &[MySqlColumn] {
        &self.columns
    }

    fn try_get_raw<I>(&self, index: I) -> Result<MySqlValueRef<'_>, Error>
    where
        I: ColumnIndex<Self>,
    {
        let index = index.index(self)?;
        let column = &self.columns[index];
        // magnum-rs: a binary row of many columns is split here, on its first read past
        // the first column (protocol/statement/row.rs).
        let value = self.row.get(
            index,
            |storage| match self.format {
                MySqlValueFormat::Binary => BinaryRow::split(storage, &self.columns),
                MySqlValueFormat::Text => Err(err_protocol!("a text row without its values")),
            },
            |storage| match self.format {
                MySqlValueFormat::Binary => BinaryRow::first(storage, &self.columns),
                MySqlValueFormat::Text => Err(err_protocol!("a text row without its values")),
            },
        )?;

        Ok(MySqlValueRef {
            format: self.format,
            row: Some(&self.row.storage),
            type_info: column.type_info.clone(),
            value,
        })
    }
}

impl ColumnIndex<MySqlRow> for &'_ str {
    fn index(&self, row: &MySqlRow) -> Result<usize, Error> {
        row.column_names
            .get(*self)
            .ok_or_else(|| Error::ColumnNotFound((*self).into()))
            .copied()
    }
}

impl std::fmt::Debug for MySqlRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        debug_row(self, f)
    }
}
