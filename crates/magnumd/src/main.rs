//! `magnumd`: the one binary of magnum-rs. This file is CLI parsing and wiring only.

mod commands;
mod logging;
mod server;
mod settings;
mod upgrade_check;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use magnum_conf::config::{self, Config};

/// In shipped builds (feature `jemalloc`): jemalloc, with background threads and a one-second
/// decay of freed pages compiled in
/// (`JEMALLOC_SYS_WITH_MALLOC_CONF`, .cargo/config.toml): pages go back to the system about
/// a second after they are freed, also while a process idles between sweeps or requests, so
/// each process stays under 60 MiB (scripts/bench-scale). mimalloc 3 purges only when it is
/// called again and its delay cannot be set without `unsafe`; glibc's malloc is a quarter
/// slower on the lists (scripts/bench-api).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// magnum-rs: OpenStack Magnum (container infrastructure management) rebuilt in Rust.
#[derive(Parser, Debug)]
#[command(name = "magnumd", version, about)]
struct Cli {
    /// A magnum.conf to read; repeat for several (later files win). Without any, the files
    /// oslo.config would find are read (~/.magnum/, ~/, /etc/magnum/, /etc/).
    #[arg(long = "config-file", value_name = "PATH", global = true)]
    config_file: Vec<PathBuf>,
    /// A directory of *.conf files read after the config files, in sorted order.
    #[arg(long = "config-dir", value_name = "DIR", global = true)]
    config_dir: Vec<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The API and the conductor in one process. With no configuration file, the embedded
    /// default: 127.0.0.1:9511, a SQLite database under the data directory (schema created
    /// on start), the in-process bus, noauth and the simulated driver.
    Serve {
        /// Where the SQLite database lives when no [database] connection is configured.
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
    /// The REST API on [api] host:port, with Keystone auth, against an upgraded database.
    Api,
    /// The conductor alone: RPC from RabbitMQ (`[DEFAULT] transport_url`), status sync and
    /// heartbeat. Run any number beside `magnumd api` (or Python Magnum's processes).
    Conductor,
    /// Check that this node can run: configuration, database reachable and at head, policy
    /// file loads, Keystone reachable (when used). Prints one line per check; exit 1 if any fails.
    Status {
        #[command(subcommand)]
        command: Option<StatusCommand>,
    },
    /// Database schema tools (the schema is upstream's Alembic head b3e1cf4a2d5e).
    Db {
        #[command(subcommand)]
        command: DbCommand,
    },
    /// Configuration tools.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Subcommand, Debug)]
enum StatusCommand {
    /// Upgrade checks (`upgrade check`), as upstream's `magnum-status upgrade check`.
    Upgrade {
        #[command(subcommand)]
        command: UpgradeCommand,
    },
}

#[derive(Subcommand, Debug)]
enum UpgradeCommand {
    /// Before a cut-over or upgrade: upstream's checks and ours, as a table; exit 0 success,
    /// 1 warning, 2 failure.
    Check,
}

#[derive(Subcommand, Debug)]
enum DbCommand {
    /// Create the schema on an empty database; a database already at head is left alone.
    Upgrade,
    /// Print the database's Alembic revision.
    Version,
}

#[derive(Subcommand, Debug)]
enum ConfigCommand {
    /// Print a commented magnum.conf with every option, its default and its help.
    Sample,
}

/// Why a command failed, and so which exit status it gets.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Bad configuration: exit 2, like a usage error.
    #[error("{0}")]
    Config(String),
    /// The work itself failed (database unreachable, schema refused): exit 1.
    #[error("{0}")]
    Runtime(String),
    /// Done, with this exit code and nothing more to say (upgrade check warnings).
    #[error("exit status {0}")]
    Exit(u8),
}

fn main() -> ExitCode {
    // One TLS crypto provider for the whole process, before anything opens a connection.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let cli = Cli::parse_from(as_subcommand(std::env::args_os()));
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Exit(code)) => ExitCode::from(code),
        Err(e) => {
            // One line, no backtrace: this is what an operator reads.
            let _ = writeln!(std::io::stderr(), "magnumd: error: {e}");
            match e {
                Failure::Config(_) => ExitCode::from(2),
                Failure::Runtime(_) | Failure::Exit(_) => ExitCode::from(1),
            }
        }
    }
}

/// Upstream's command names, which deployment tools call (kolla's containers and health
/// checks, systemd units): started under one of them (a link to magnumd), magnumd runs that
/// subcommand, with the rest of the line as that command's arguments.
const UPSTREAM_NAMES: [(&str, &str); 4] = [
    ("magnum-api", "api"),
    ("magnum-conductor", "conductor"),
    ("magnum-db-manage", "db"),
    ("magnum-status", "status"),
];

fn as_subcommand(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = args.collect();
    let invoked = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if let Some((_, sub)) = UPSTREAM_NAMES.iter().find(|(name, _)| *name == invoked) {
        args.insert(1, (*sub).into());
    }
    args
}

fn load_config(cli: &Cli) -> Result<Config, Failure> {
    let (files, dirs) = if cli.config_file.is_empty() && cli.config_dir.is_empty() {
        (
            config::default_config_files(Some("magnum")),
            config::default_config_dirs(Some("magnum")),
        )
    } else {
        (cli.config_file.clone(), cli.config_dir.clone())
    };
    Config::load(&files, &dirs).map_err(|e| Failure::Config(e.to_string()))
}

fn run(cli: Cli) -> Result<(), Failure> {
    if let Command::Config {
        command: ConfigCommand::Sample,
    } = cli.command
    {
        return commands::write_stdout(&config::sample());
    }
    let explicit_config = !cli.config_file.is_empty() || !cli.config_dir.is_empty();
    let mut cfg = load_config(&cli)?;
    let found_config = explicit_config || !cfg.files().is_empty();
    if let Command::Serve { data_dir } = &cli.command {
        settings::embedded_defaults(&mut cfg, data_dir.as_deref(), found_config)?;
    }
    let binary = match &cli.command {
        Command::Api => "magnum-api",
        Command::Conductor => "magnum-conductor",
        _ => "magnumd",
    };
    let logging = logging::init(&cfg, binary)?;
    for warning in cfg.warnings() {
        tracing::warn!("{warning}");
    }
    // `[api] workers` and `[conductor] workers` name upstream's process counts; here they
    // size the one process's runtime (on a 2-core host shared with its database, one thread
    // spent a sixth less CPU per request, magnumd's and MariaDB's: fewer wake-ups).
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    let workers = match &cli.command {
        Command::Api => Some(cfg.api.effective_workers()),
        Command::Conductor => Some(cfg.conductor.effective_workers()),
        Command::Serve { .. } => Some(
            cfg.api
                .effective_workers()
                .max(cfg.conductor.effective_workers()),
        ),
        _ => None,
    };
    if let Some(n) = workers {
        builder.worker_threads(usize::try_from(n.max(1)).unwrap_or(1));
    }
    let runtime = builder
        .enable_all()
        .build()
        .map_err(|e| Failure::Runtime(format!("cannot start the async runtime: {e}")))?;
    {
        let _entered = runtime.enter();
        logging::handle_sighup(logging.file.clone());
    }
    match cli.command {
        Command::Db {
            command: DbCommand::Upgrade,
        } => runtime.block_on(commands::db_upgrade(&cfg)),
        Command::Db {
            command: DbCommand::Version,
        } => runtime.block_on(commands::db_version(&cfg)),
        Command::Serve { .. } => runtime.block_on(server::run(
            &cfg,
            server::ServeOptions {
                config_dirs: cli.config_dir.clone(),
                force_noauth: !found_config,
                allow_noauth: true,
                upgrade_schema: true,
                with_conductor: true,
            },
        )),
        Command::Api => runtime.block_on(server::run(
            &cfg,
            server::ServeOptions {
                config_dirs: cli.config_dir.clone(),
                force_noauth: false,
                allow_noauth: false,
                upgrade_schema: false,
                with_conductor: false,
            },
        )),
        Command::Conductor => runtime.block_on(server::run_conductor(&cfg)),
        Command::Status { command: None } => {
            runtime.block_on(commands::status(&cfg, &cli.config_dir))
        }
        Command::Status {
            command:
                Some(StatusCommand::Upgrade {
                    command: UpgradeCommand::Check,
                }),
        } => match runtime.block_on(upgrade_check::main(&cfg, &cli.config_dir))? {
            0 => Ok(()),
            code => Err(Failure::Exit(code)),
        },
        Command::Config { .. } => Ok(()),
    }
}
