//! Logs as operators of Magnum expect: oslo.log's place (`[DEFAULT] log_file`, `log_dir`,
//! else standard error), its text layout (`<time> <pid> <LEVEL> <module> [<request id> <user>
//! <project>] <message>`), or JSON lines with `use_json`; a log file is reopened on SIGHUP,
//! so logrotate can move it away. Lines are written by a worker thread, never on the async
//! threads. `RUST_LOG` overrides `[DEFAULT] debug`.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use magnum_conf::config::Config;
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use crate::Failure;

/// Log lines queued for the writer thread at most.
const LOG_QUEUE_LINES: usize = 16_384;
/// Where oslo.log writes: `log_dir/log_file`, `log_file`, `log_dir/<binary>.log`, or stderr.
pub fn log_path(cfg: &Config, binary: &str) -> Option<PathBuf> {
    let d = &cfg.default;
    let file = d.log_file.as_deref().filter(|f| !f.is_empty());
    let dir = d.log_dir.as_deref().filter(|f| !f.is_empty());
    match (file, dir) {
        (Some(f), Some(dir)) => Some(Path::new(dir).join(f)),
        (Some(f), None) => Some(PathBuf::from(f)),
        (None, Some(dir)) => Some(Path::new(dir).join(format!("{binary}.log"))),
        (None, None) => None,
    }
}

/// A log file that can be reopened at its path (after logrotate moved it).
#[derive(Clone)]
pub struct LogFile {
    path: PathBuf,
    file: Arc<Mutex<File>>,
}

fn open(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl LogFile {
    pub fn open(path: &Path) -> std::io::Result<Self> {
        Ok(Self {
            path: path.to_owned(),
            file: Arc::new(Mutex::new(open(path)?)),
        })
    }

    /// Opens the path again; later lines go to the new file.
    pub fn reopen(&self) -> std::io::Result<()> {
        let fresh = open(&self.path)?;
        if let Ok(mut f) = self.file.lock() {
            *f = fresh;
        }
        Ok(())
    }
}

impl Write for LogFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.file.lock() {
            Ok(mut f) => f.write(buf),
            Err(_) => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.file.lock() {
            Ok(mut f) => f.flush(),
            Err(_) => Ok(()),
        }
    }
}

/// Keeps the log writer alive (dropping it flushes what is queued) and the file to reopen.
pub struct Logging {
    _guard: Option<tracing_appender::non_blocking::WorkerGuard>,
    pub file: Option<LogFile>,
}

/// oslo.log's default text layout, with the request's ids from the enclosing spans.
struct OsloText;

impl<S, N> FormatEvent<S, N> for OsloText
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        write!(
            w,
            "{} {} {} {} [",
            chrono::Local::now().format("%Y-%m-%d %H:%M:%S%.3f"),
            std::process::id(),
            meta.level(),
            meta.target().replace("::", "."),
        )?;
        let mut first = true;
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                if let Some(fields) = span.extensions().get::<FormattedFields<N>>()
                    && !fields.is_empty()
                {
                    if !first {
                        w.write_char(' ')?;
                    }
                    write!(w, "{fields}")?;
                    first = false;
                }
            }
        }
        if first {
            w.write_char('-')?;
        }
        w.write_str("] ")?;
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

/// Sets up logging for `binary` (`magnum-api`, `magnum-conductor`, `magnumd`).
pub fn init(cfg: &Config, binary: &str) -> Result<Logging, Failure> {
    // lapin warns of every message the broker returns; each one we publish mandatory is
    // handled where it was sent (a reply to a caller gone, a membership probe of a host
    // that runs none of our conductors).
    let default = if cfg.default.debug {
        "debug,sqlx=warn,lapin::returned_messages=error"
    } else {
        "info,sqlx=warn,lapin::returned_messages=error"
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let path = log_path(cfg, binary);
    let file = match &path {
        Some(p) => Some(LogFile::open(p).map_err(|e| {
            Failure::Config(format!(
                "[DEFAULT] log_file/log_dir: cannot open {}: {e}",
                p.display()
            ))
        })?),
        None => None,
    };
    // The writer thread's queue is allocated (and touched) whole when made: the default of
    // 128,000 lines was 2.6 MiB of every process's RSS; 16,384 lines still absorb any burst we
    // have seen (the fault suite's), and beyond them lines are dropped, never blocking.
    let lines = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .lossy(true);
    let (writer, guard) = match &file {
        Some(f) => lines.finish(f.clone()),
        None => lines.finish(std::io::stderr()),
    };
    let ansi = file.is_none() && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(ansi);
    let _ = if cfg.default.use_json {
        builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .flatten_event(true)
            .try_init()
    } else {
        builder.event_format(OsloText).try_init()
    };
    Ok(Logging {
        _guard: Some(guard),
        file,
    })
}

/// Handles SIGHUP (logrotate's `postrotate`, `systemctl reload`) for the life of the process:
/// the log file, if any, is reopened; without one the signal is only logged, never the
/// default action of ending the process. Registered before this returns, so no early SIGHUP
/// is missed.
pub fn handle_sighup(file: Option<LogFile>) {
    #[cfg(unix)]
    {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            return;
        };
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                let Some(f) = file.clone() else {
                    tracing::info!("SIGHUP: no log file to reopen");
                    continue;
                };
                match tokio::task::spawn_blocking(move || f.reopen()).await {
                    Ok(Ok(())) => tracing::info!("log file reopened"),
                    Ok(Err(e)) => tracing::error!("log file not reopened: {e}"),
                    Err(e) => tracing::error!("log file not reopened: {e}"),
                }
            }
        });
    }
}
