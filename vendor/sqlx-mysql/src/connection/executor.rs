use super::MySqlStream;
use crate::connection::stream::Waiting;
use crate::error::Error;
use crate::executor::{Execute, Executor};
use crate::ext::ustr::UStr;
use crate::io::MySqlBufExt;
use crate::logger::QueryLogger;
use crate::protocol::response::Status;
use crate::protocol::Capabilities;
use crate::protocol::statement::{
    BinaryRow, Execute as StatementExecute, Prepare, PrepareOk, StmtClose,
};
use crate::protocol::text::{ColumnDefinition, Query, TextRow};
use crate::statement::{MySqlStatement, MySqlStatementMetadata};
use crate::HashMap;
use crate::{
    MySql, MySqlArguments, MySqlColumn, MySqlConnection, MySqlQueryResult, MySqlRow, MySqlTypeInfo,
    MySqlValueFormat,
};
use either::Either;
use futures_core::future::BoxFuture;
use futures_core::stream::BoxStream;
use futures_core::Stream;
use futures_util::TryStreamExt;
use sqlx_core::column::{ColumnOrigin, TableColumn};
use sqlx_core::sql_str::SqlStr;
use std::sync::Arc;

impl MySqlConnection {
    async fn prepare_statement(
        &mut self,
        sql: &str,
    ) -> Result<(u32, MySqlStatementMetadata), Error> {
        // https://dev.mysql.com/doc/internals/en/com-stmt-prepare.html
        // https://dev.mysql.com/doc/internals/en/com-stmt-prepare-response.html#packet-COM_STMT_PREPARE_OK

        self.inner
            .stream
            .send_packet(Prepare { query: sql })
            .await?;

        let ok: PrepareOk = self.inner.stream.recv().await?;

        // the parameter definitions are very unreliable so we skip over them
        // as we have little use

        if ok.params > 0 {
            for _ in 0..ok.params {
                let _def: ColumnDefinition = self.inner.stream.recv().await?;
            }

            self.inner.stream.maybe_recv_eof().await?;
        }

        // the column definitions are berefit the type information from the
        // to-be-bound parameters; we will receive the output column definitions
        // once more on execute so we wait for that

        let mut columns = Vec::new();

        let column_names = if ok.columns > 0 {
            recv_result_metadata(&mut self.inner.stream, ok.columns as usize, &mut columns).await?
        } else {
            Default::default()
        };

        let id = ok.statement_id;
        let metadata = MySqlStatementMetadata {
            parameters: ok.params as usize,
            columns: Arc::new(columns),
            column_names: Arc::new(column_names),
        };

        Ok((id, metadata))
    }

    async fn get_or_prepare_statement(
        &mut self,
        sql: &str,
    ) -> Result<(u32, MySqlStatementMetadata), Error> {
        if let Some(statement) = self.inner.cache_statement.get_mut(sql) {
            // <MySqlStatementMetadata> is internally reference-counted
            return Ok((*statement).clone());
        }

        let (id, metadata) = self.prepare_statement(sql).await?;

        // in case of the cache being full, close the least recently used statement
        if let Some((id, _)) = self
            .inner
            .cache_statement
            .insert(sql, (id, metadata.clone()))
        {
            self.inner
                .stream
                .send_packet(StmtClose { statement: id })
                .await?;
        }

        Ok((id, metadata))
    }

    #[allow(clippy::needless_lifetimes)]
    pub(crate) async fn run<'e, 'c: 'e, 'q: 'e>(
        &'c mut self,
        sql: SqlStr,
        arguments: Option<MySqlArguments>,
        persistent: bool,
    ) -> Result<impl Stream<Item = Result<Either<MySqlQueryResult, MySqlRow>, Error>> + 'e, Error>
    {
        let logger = QueryLogger::new(sql, self.inner.log_settings.clone());

        // magnum-rs: the reading is `start` and `step` (shared with `start_rows`/`each_row`,
        // which hand rows to a callback instead of through this stream).
        Ok(try_stream! {
            let mut state = self.start(logger, arguments, persistent).await?;
            while let Some(v) = self.step(&mut state).await? {
                r#yield!(v);
            }
            Ok(())
        })
    }

    /// magnum-rs: send `query` and read its answer up to its first row (or its end), leaving
    /// the rows to [`each_row`](Self::each_row). Dropping the returned value instead leaves the
    /// rest to be drained by the connection's next use, as for a dropped stream.
    pub async fn start_rows<'q, E>(&mut self, mut query: E) -> Result<MySqlRows, Error>
    where
        E: Execute<'q, MySql>,
    {
        let arguments = query.take_arguments().map_err(Error::Encode)?;
        let persistent = query.persistent();
        let logger = QueryLogger::new(query.sql(), self.inner.log_settings.clone());

        let mut state = self.start(logger, arguments, persistent).await?;
        // Read the first result set's head now, so that the server's work on the
        // statement is under way (and its errors are seen) before the rows are wanted.
        state.first = self.step(&mut state).await?;
        Ok(state)
    }

    /// magnum-rs: hand each row of `rows` (from [`start_rows`](Self::start_rows) on this
    /// connection) to `on_row` as it is decoded, with no async stream between (sqlx's stream
    /// costs a lock, a wake-up and three adapter layers per row); returns the number of rows.
    /// An error of `on_row` ends the reading (the rest is drained by the next use).
    pub async fn each_row<F, E>(&mut self, mut rows: MySqlRows, mut on_row: F) -> Result<u64, E>
    where
        F: FnMut(MySqlRow) -> Result<(), E>,
        E: From<Error>,
    {
        let mut n = 0;
        let mut first = rows.first.take();
        loop {
            let item = match first.take() {
                Some(item) => item,
                None => match self.step(&mut rows).await? {
                    Some(item) => item,
                    None => return Ok(n),
                },
            };
            if let Either::Right(row) = item {
                on_row(row)?;
                n += 1;
            }
        }
    }

    /// Send the statement (prepared and executed when it has arguments, else as text).
    async fn start(
        &mut self,
        logger: QueryLogger,
        arguments: Option<MySqlArguments>,
        persistent: bool,
    ) -> Result<MySqlRows, Error> {
        self.inner.stream.wait_until_ready().await?;
        self.inner.stream.waiting.push_back(Waiting::Result);

        let sql = logger.sql().as_str();

        // magnum-rs: the prepared statement's last known result metadata, for an execute
        // whose metadata MariaDB skips (MARIADB_CLIENT_CACHE_METADATA).
        let mut known: Option<MySqlStatementMetadata> = None;
        let mut cached = false;

        let format = if let Some(arguments) = arguments {
            let cache = persistent && self.inner.cache_statement.is_enabled();
            let (id, metadata) = if cache {
                self.get_or_prepare_statement(sql).await?
            } else {
                self.prepare_statement(sql).await?
            };

            if arguments.types.len() != metadata.parameters {
                return Err(err_protocol!(
                    "prepared statement expected {} parameters but {} parameters were provided",
                    metadata.parameters,
                    arguments.types.len()
                ));
            }

            // https://dev.mysql.com/doc/internals/en/com-stmt-execute.html
            self.inner
                .stream
                .send_packet(StatementExecute {
                    statement: id,
                    arguments: &arguments,
                })
                .await?;

            if !cache {
                self.inner
                    .stream
                    .send_packet(StmtClose { statement: id })
                    .await?;
            }

            known = Some(metadata);
            cached = cache;
            MySqlValueFormat::Binary
        } else {
            // https://dev.mysql.com/doc/internals/en/com-query.html
            self.inner.stream.send_packet(Query(sql)).await?;

            MySqlValueFormat::Text
        };

        Ok(MySqlRows {
            logger,
            format,
            known,
            cached,
            // a slot for the shared column data: as long as a row is not held past one
            // iteration, its memory is reused between result sets
            columns: Arc::new(Vec::new()),
            column_names: None,
            finished: false,
            first: None,
        })
    }

    /// The next item of the answer: a row, a result set's end, or `None` after the last.
    async fn step(
        &mut self,
        state: &mut MySqlRows,
    ) -> Result<Option<Either<MySqlQueryResult, MySqlRow>>, Error> {
        if state.finished {
            return Ok(None);
        }
        let column_names = match &state.column_names {
            Some(names) => Arc::clone(names),
            None => {
                // query response is a meta-packet which may be one of:
                //  Ok, Err, ResultSet, or (unhandled) LocalInfileRequest
                let mut packet = self.inner.stream.recv_packet().await?;

                if packet[0] == 0x00 || packet[0] == 0xff {
                    // first packet in a query response is OK or ERR
                    // this indicates either a successful query with no rows at all or a failed query
                    let ok = packet.ok()?;

                    self.inner.status_flags = ok.status;

                    let rows_affected = ok.affected_rows;
                    state.logger.increase_rows_affected(rows_affected);
                    let done = MySqlQueryResult {
                        rows_affected,
                        last_insert_id: ok.last_insert_id,
                    };

                    // more result sets exist: the next step reads the next one
                    if !ok.status.contains(Status::SERVER_MORE_RESULTS_EXISTS) {
                        self.inner.stream.waiting.pop_front();
                        state.finished = true;
                    }
                    return Ok(Some(Either::Left(done)));
                }

                // otherwise, this first packet is the start of the result-set metadata,
                if let Some(waiting) = self.inner.stream.waiting.front_mut() {
                    *waiting = Waiting::Row;
                }

                let num_columns = packet.get_uint_lenenc()?; // column count
                let num_columns = usize::try_from(num_columns)
                    .map_err(|_| err_protocol!("column count overflows usize: {num_columns}"))?;

                // magnum-rs: with MARIADB_CLIENT_CACHE_METADATA a byte says whether the
                // column definitions follow; MariaDB leaves them out of a prepared
                // statement's result set when they are the ones it last sent for it (it
                // sends them again when the schema changed), so the first result set of an
                // execute may reuse the statement's metadata.
                let follows = if self.inner.stream.capabilities.contains(Capabilities::MARIADB_CLIENT_CACHE_METADATA) {
                    bytes::Buf::get_u8(&mut *packet) != 0
                } else {
                    true
                };
                let names = if follows {
                    // Always reload column names, even for prepared statements (the schema
                    // may change between PREPARE and EXECUTE).
                    let names = Arc::new(recv_result_metadata(&mut self.inner.stream, num_columns, Arc::make_mut(&mut state.columns)).await?);
                    if let Some(known) = state.known.take() {
                        // The next execute that skips them reuses these.
                        let fresh = MySqlStatementMetadata {
                            parameters: known.parameters,
                            columns: Arc::clone(&state.columns),
                            column_names: Arc::clone(&names),
                        };
                        if state.cached {
                            if let Some(entry) = self.inner.cache_statement.get_mut(state.logger.sql().as_str()) {
                                entry.1 = fresh;
                            }
                        }
                    }
                    names
                } else {
                    match state.known.take() {
                        Some(known) if known.columns.len() == num_columns => {
                            state.columns = known.columns;
                            known.column_names
                        }
                        _ => {
                            return Err(err_protocol!(
                                "the server skipped the result set's column definitions, but none are known for this statement"
                            ));
                        }
                    }
                };
                state.column_names = Some(Arc::clone(&names));
                names
            }
        };

        // finally, there will be none or many result-rows
        let packet = self.inner.stream.recv_packet().await?;

        if packet[0] == 0xfe {
            let (rows_affected, last_insert_id, status) = if packet.len() < 9 {
                // EOF packet
                let eof = packet.eof(self.inner.stream.capabilities)?;
                (0, 0, eof.status)
            } else {
                // OK packet
                let ok = packet.ok()?;
                (ok.affected_rows, ok.last_insert_id, ok.status)
            };

            self.inner.status_flags = status;
            state.column_names = None;
            if status.contains(Status::SERVER_MORE_RESULTS_EXISTS) {
                if let Some(waiting) = self.inner.stream.waiting.front_mut() {
                    *waiting = Waiting::Result;
                }
            } else {
                self.inner.stream.waiting.pop_front();
                state.finished = true;
            }
            return Ok(Some(Either::Left(MySqlQueryResult {
                rows_affected,
                last_insert_id,
            })));
        }

        let row = match state.format {
            MySqlValueFormat::Binary => packet.decode_with::<BinaryRow, _>(&state.columns)?.0,
            MySqlValueFormat::Text => packet.decode_with::<TextRow, _>(&state.columns)?.0,
        };

        state.logger.increment_rows_returned();

        Ok(Some(Either::Right(MySqlRow {
            row,
            format: state.format,
            columns: Arc::clone(&state.columns),
            column_names,
        })))
    }
}

/// magnum-rs: a statement sent by [`MySqlConnection::start_rows`] whose rows are still to be
/// read by [`MySqlConnection::each_row`] (also the state of `run`'s stream).
pub struct MySqlRows {
    logger: QueryLogger,
    format: MySqlValueFormat,
    known: Option<MySqlStatementMetadata>,
    cached: bool,
    columns: Arc<Vec<MySqlColumn>>,
    column_names: Option<Arc<HashMap<UStr, usize>>>,
    finished: bool,
    first: Option<Either<MySqlQueryResult, MySqlRow>>,
}

impl<'c> Executor<'c> for &'c mut MySqlConnection {
    type Database = MySql;

    fn fetch_many<'e, 'q, E>(
        self,
        mut query: E,
    ) -> BoxStream<'e, Result<Either<MySqlQueryResult, MySqlRow>, Error>>
    where
        'c: 'e,
        E: Execute<'q, Self::Database>,
        'q: 'e,
        E: 'q,
    {
        let arguments = query.take_arguments().map_err(Error::Encode);
        let persistent = query.persistent();
        let sql = query.sql();

        // magnum-rs: `run`'s stream itself, not re-yielded through a second async stream
        // (a lock, a span and a wake-up per row).
        Box::pin(
            futures_util::stream::once(async move {
                let arguments = arguments?;
                self.run(sql, arguments, persistent).await
            })
            .try_flatten(),
        )
    }

    fn fetch_optional<'e, 'q, E>(self, query: E) -> BoxFuture<'e, Result<Option<MySqlRow>, Error>>
    where
        'c: 'e,
        E: Execute<'q, Self::Database>,
        'q: 'e,
        E: 'q,
    {
        let mut s = self.fetch_many(query);

        Box::pin(async move {
            while let Some(v) = s.try_next().await? {
                if let Either::Right(r) = v {
                    return Ok(Some(r));
                }
            }

            Ok(None)
        })
    }

    fn prepare_with<'e>(
        self,
        sql: SqlStr,
        _parameters: &'e [MySqlTypeInfo],
    ) -> BoxFuture<'e, Result<MySqlStatement, Error>>
    where
        'c: 'e,
    {
        Box::pin(async move {
            self.inner.stream.wait_until_ready().await?;

            let metadata = if self.inner.cache_statement.is_enabled() {
                self.get_or_prepare_statement(sql.as_str()).await?.1
            } else {
                let (id, metadata) = self.prepare_statement(sql.as_str()).await?;

                self.inner
                    .stream
                    .send_packet(StmtClose { statement: id })
                    .await?;

                metadata
            };

            Ok(MySqlStatement {
                sql,
                // metadata has internal Arcs for expensive data structures
                metadata: metadata.clone(),
            })
        })
    }

    #[doc(hidden)]
    #[cfg(feature = "offline")]
    fn describe<'e>(
        self,
        sql: SqlStr,
    ) -> BoxFuture<'e, Result<crate::describe::Describe<MySql>, Error>>
    where
        'c: 'e,
    {
        Box::pin(async move {
            self.inner.stream.wait_until_ready().await?;

            let (id, metadata) = self.prepare_statement(sql.as_str()).await?;

            self.inner
                .stream
                .send_packet(StmtClose { statement: id })
                .await?;

            let columns = (*metadata.columns).clone();

            let nullable = columns
                .iter()
                .map(|col| {
                    col.flags
                        .map(|flags| !flags.contains(crate::protocol::text::ColumnFlags::NOT_NULL))
                })
                .collect();

            Ok(crate::describe::Describe {
                parameters: Some(Either::Right(metadata.parameters)),
                columns,
                nullable,
            })
        })
    }
}

fn recv_next_result_column(def: &ColumnDefinition, ordinal: usize) -> Result<MySqlColumn, Error> {
    // if the alias is empty, use the alias
    // only then use the name
    let column_name = def.name()?;

    let name = match (def.name()?, def.alias()?) {
        (_, alias) if !alias.is_empty() => UStr::new(alias),
        (name, _) => UStr::new(name),
    };

    let table = def.table()?;

    let origin = if table.is_empty() {
        ColumnOrigin::Expression
    } else {
        let schema = def.schema()?;

        ColumnOrigin::Table(TableColumn {
            table: if !schema.is_empty() {
                format!("{schema}.{table}").into()
            } else {
                table.into()
            },
            name: column_name.into(),
        })
    };

    let type_info = MySqlTypeInfo::from_column(def);

    Ok(MySqlColumn {
        name,
        type_info,
        ordinal,
        flags: Some(def.flags),
        origin,
    })
}

async fn recv_result_metadata(
    stream: &mut MySqlStream,
    num_columns: usize,
    columns: &mut Vec<MySqlColumn>,
) -> Result<HashMap<UStr, usize>, Error> {
    // the result-set metadata is primarily a listing of each output
    // column in the result-set

    let mut column_names = HashMap::with_capacity(num_columns);

    columns.clear();
    columns.reserve(num_columns);

    for ordinal in 0..num_columns {
        let def: ColumnDefinition = stream.recv().await?;

        let column = recv_next_result_column(&def, ordinal)?;

        column_names.insert(column.name.clone(), ordinal);
        columns.push(column);
    }

    stream.maybe_recv_eof().await?;

    Ok(column_names)
}
