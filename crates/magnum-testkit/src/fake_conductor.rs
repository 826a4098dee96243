//! A conductor that records every RPC it is sent and answers as the test tells it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use magnum_core::{Error, RequestContext, Result};
use magnum_rpc::{ConductorApi, Reply, Request};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

/// What `get_ca_certificate` answers by default.
pub const CA_PEM: &str = "-----BEGIN CERTIFICATE-----\nFAKE-CA\n-----END CERTIFICATE-----\n";
/// What `sign_certificate` answers by default.
pub const SIGNED_PEM: &str =
    "-----BEGIN CERTIFICATE-----\nFAKE-SIGNED\n-----END CERTIFICATE-----\n";

/// One RPC as the conductor received it.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: &'static str,
    pub ctx: RequestContext,
    /// The request message as JSON (`{}` for `ping_conductor`).
    pub args: Value,
}

/// Answers a method instead of the default: the JSON of the result (a string for
/// `sign_certificate`/`get_ca_certificate`, a bool for `ping_conductor`, ignored otherwise)
/// or an error.
pub type Answer = Box<dyn Fn(&Call) -> Result<Value> + Send + Sync>;

/// Records every call (readable with [`FakeConductor::calls`], and sent to the receiver of
/// [`FakeConductor::with_receiver`]) before answering. By default every method succeeds
/// (CA and signing answer fixed PEMs, ping `true`); a method can be made to answer
/// otherwise ([`FakeConductor::answer`], [`FakeConductor::fail`]), to take a while
/// ([`FakeConductor::delay`]) or to wait for [`FakeConductor::release`] ([`FakeConductor::hold`]).
#[derive(Default)]
pub struct FakeConductor {
    calls: Mutex<Vec<Call>>,
    tx: Option<mpsc::UnboundedSender<Call>>,
    answers: Mutex<HashMap<&'static str, Answer>>,
    delays: Mutex<HashMap<&'static str, Duration>>,
    held: Mutex<HashSet<&'static str>>,
    released: watch::Sender<bool>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A test that panicked mid-call leaves plain data behind, still readable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FakeConductor {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// A fake that also sends each call to the returned receiver, as it arrives.
    pub fn with_receiver() -> (Arc<Self>, mpsc::UnboundedReceiver<Call>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Arc::new(Self {
                tx: Some(tx),
                ..Self::default()
            }),
            rx,
        )
    }

    /// Every call so far, oldest first.
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.calls).clone()
    }

    /// The arguments of every `method` call so far, oldest first.
    pub fn args_of(&self, method: &str) -> Vec<Value> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == method)
            .map(|c| c.args)
            .collect()
    }

    /// The arguments of the only `method` call so far.
    pub fn only(&self, method: &str) -> Value {
        let all = self.args_of(method);
        assert_eq!(all.len(), 1, "{method}: {all:?}");
        all.into_iter().next().unwrap()
    }

    pub fn clear(&self) {
        lock(&self.calls).clear();
    }

    /// From now on `method` answers what `answer` says.
    pub fn answer(
        &self,
        method: &'static str,
        answer: impl Fn(&Call) -> Result<Value> + Send + Sync + 'static,
    ) {
        lock(&self.answers).insert(method, Box::new(answer));
    }

    /// From now on `method` fails with what `error` builds.
    pub fn fail(&self, method: &'static str, error: impl Fn() -> Error + Send + Sync + 'static) {
        self.answer(method, move |_| Err(error()));
    }

    /// `method` answers by default again.
    pub fn heal(&self, method: &'static str) {
        lock(&self.answers).remove(method);
    }

    /// `method` takes `delay` before answering.
    pub fn delay(&self, method: &'static str, delay: Duration) {
        lock(&self.delays).insert(method, delay);
    }

    /// `method` waits for [`FakeConductor::release`] before answering.
    pub fn hold(&self, method: &'static str) {
        lock(&self.held).insert(method);
    }

    /// Lets every held (and future) call finish.
    pub fn release(&self) {
        self.released.send_replace(true);
    }

    async fn call(
        &self,
        method: &'static str,
        ctx: &RequestContext,
        args: Value,
        default: Value,
    ) -> Result<Value> {
        let call = Call {
            method,
            ctx: ctx.clone(),
            args,
        };
        lock(&self.calls).push(call.clone());
        if let Some(tx) = &self.tx {
            let _ = tx.send(call.clone());
        }
        if lock(&self.held).contains(method) {
            let _ = self.released.subscribe().wait_for(|r| *r).await;
        }
        let delay = lock(&self.delays).get(method).copied();
        if let Some(d) = delay {
            tokio::time::sleep(d).await;
        }
        match lock(&self.answers).get(method) {
            Some(answer) => answer(&call),
            None => Ok(default),
        }
    }
}

#[async_trait]
impl ConductorApi for FakeConductor {
    async fn handle(&self, ctx: &RequestContext, req: Request) -> Result<Reply> {
        let args = req
            .args()
            .map_err(|e| Error::Internal(format!("cannot encode {}: {e}", req.method())))?;
        let default = match &req {
            Request::SignCertificate(_) => json!(SIGNED_PEM),
            Request::GetCaCertificate(_) => json!(CA_PEM),
            Request::PingConductor => json!(true),
            _ => Value::Null,
        };
        let v = self.call(req.method(), ctx, args, default).await?;
        // An answer a test set that is not the method's kind falls back to the default shape.
        Ok(req.reply_from(v).unwrap_or(match req {
            Request::PingConductor => Reply::Alive(true),
            Request::SignCertificate(_) | Request::GetCaCertificate(_) => Reply::Pem(String::new()),
            _ => Reply::Done,
        }))
    }
}
