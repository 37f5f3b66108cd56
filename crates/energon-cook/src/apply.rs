//! The map stage of the task encoder pipeline: a hook applied to every item, with the error
//! policy, the call's context (index, seed) and generator outputs (the reference's
//! `MapDataset` around `load_sample`, `cook_crude_sample`, `encode_sample`, ...).

use std::{collections::VecDeque, sync::Arc};

use crate::{
    context::{SampleContext, StageEnv},
    error::{Error, Result},
    hook::{Generator, HookResult, Outputs},
    policy::Guard,
    restore_key::{KeyPart, RestoreKey},
    stage::{Keyed, Stage, bad_key},
    state::{PendingCall, StageState, mismatch},
};

/// A hook of a map stage.
pub(crate) type ApplyFn<T, U> =
    Arc<dyn Fn(T, &SampleContext) -> HookResult<Outputs<U>> + Send + Sync>;

/// The outputs of a generator call not handed out yet: made already, or made when pulled.
pub(crate) enum Queued<U> {
    Ready(VecDeque<U>),
    Lazy(Box<dyn Generator<U>>),
}

impl<U: std::fmt::Debug> std::fmt::Debug for Queued<U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Queued::Ready(values) => f.debug_tuple("Ready").field(values).finish(),
            Queued::Lazy(_) => f.write_str("Lazy(..)"),
        }
    }
}

/// A generator call whose outputs are being handed out.
#[derive(Debug)]
pub(crate) struct Pending<U> {
    pub(crate) inputs: Vec<RestoreKey>,
    pub(crate) index: u64,
    pub(crate) item_index: u64,
    pub(crate) emitted: u64,
    pub(crate) outputs: Queued<U>,
}

/// What a call's result is to the stage that made it.
pub(crate) enum Started<U> {
    /// One value, handed out at once (with the call's inputs, given back).
    One(U, Vec<RestoreKey>),
    /// A generator, to be handed out from the stage's pending slot.
    Many(Pending<U>),
}

impl<U> Pending<U> {
    /// The result of call `index` on `inputs`, made while the worker prepared item `item_index`.
    pub(crate) fn start(
        outputs: Outputs<U>,
        inputs: Vec<RestoreKey>,
        index: u64,
        item_index: u64,
    ) -> Started<U> {
        let outputs = match outputs {
            Outputs::One(value) => return Started::One(value, inputs),
            Outputs::Many(values) => Queued::Ready(values.into()),
            Outputs::Lazy(generator) => Queued::Lazy(generator),
        };
        Started::Many(Pending { inputs, index, item_index, emitted: 0, outputs })
    }

    /// The next output and its position in the call; `None` when the call has no more. A lazy
    /// generator makes it now, in the call's context at the worker's current item.
    fn pop(&mut self, env: &StageEnv) -> HookResult<Option<(u64, U)>> {
        let value = match &mut self.outputs {
            Queued::Ready(values) => values.pop_front(),
            Queued::Lazy(generator) => generator.next(&env.context(self.index))?,
        };
        Ok(value.map(|value| {
            let sub = self.emitted;
            self.emitted += 1;
            (sub, value)
        }))
    }

    /// Hands out the next output of the call in `slot`, keyed by `key(call index, output
    /// position, input keys)`, and empties the slot once the call has nothing left. A lazy
    /// generator that fails is handled by `guard` as its call would be: the rest of its
    /// outputs are dropped.
    pub(crate) fn next_from(
        slot: &mut Option<Pending<U>>,
        env: &StageEnv,
        guard: &mut Guard,
        key: impl Fn(u64, Option<u64>, &[RestoreKey]) -> RestoreKey,
    ) -> Result<Option<Keyed<U>>> {
        let Some(pending) = slot.as_mut() else { return Ok(None) };
        let res = pending.pop(env);
        let popped = guard.handle(res, || key(pending.index, None, &pending.inputs).to_string())?;
        let Some(Some((sub, value))) = popped else {
            *slot = None;
            return Ok(None);
        };
        let item = Keyed { restore_key: key(pending.index, Some(sub), &pending.inputs), value };
        if matches!(&pending.outputs, Queued::Ready(values) if values.is_empty()) {
            *slot = None;
        }
        Ok(Some(item))
    }

    pub(crate) fn state(&self) -> PendingCall {
        PendingCall {
            inputs: self.inputs.clone(),
            index: self.index,
            item_index: self.item_index,
            emitted: self.emitted,
        }
    }

    /// Continues a saved call: `outputs` are the call's outputs made again (a lazy generator
    /// makes and drops the ones handed out before, in `env`'s current context).
    pub(crate) fn resume(call: &PendingCall, outputs: Outputs<U>, env: &StageEnv) -> Result<Self> {
        let inputs = call.inputs.clone();
        let Started::Many(mut pending) =
            Pending::start(outputs, inputs, call.index, call.item_index)
        else {
            return Err(Error::BadState {
                reason: "a saved generator call returned a single value on restore".to_owned(),
            });
        };
        let describe =
            || format!("{:?}", call.inputs.iter().map(ToString::to_string).collect::<Vec<_>>());
        for made in 0..call.emitted {
            if call_on_restore("generator", pending.pop(env), describe)?.is_none() {
                return Err(Error::BadState {
                    reason: format!(
                        "a generator call that had yielded {} values yields {made} on restore",
                        call.emitted
                    ),
                });
            }
        }
        Ok(pending)
    }
}

/// The key of a map output: `(stage, index[, sub], *input)`.
pub(crate) fn map_key(
    stage: &'static str,
    index: u64,
    sub: Option<u64>,
    input: &RestoreKey,
) -> RestoreKey {
    let mut parts = Vec::with_capacity(input.parts().len() + 3);
    parts.push(KeyPart::Name(stage.into()));
    parts.push(KeyPart::Index(index));
    parts.extend(sub.map(KeyPart::Index));
    parts.extend(input.parts().iter().cloned());
    RestoreKey::from_parts(parts)
}

/// The key of an output made of several inputs: `(stage, index[, sub], *inputs as keys)`.
pub(crate) fn group_key(
    stage: &'static str,
    index: u64,
    sub: Option<u64>,
    inputs: &[RestoreKey],
) -> RestoreKey {
    let mut parts = Vec::with_capacity(inputs.len() + 3);
    parts.push(KeyPart::Name(stage.into()));
    parts.push(KeyPart::Index(index));
    parts.extend(sub.map(KeyPart::Index));
    parts.extend(inputs.iter().map(|k| KeyPart::Key(k.clone())));
    RestoreKey::from_parts(parts)
}

/// Splits `(stage, index[, sub], rest...)`: the sub-index is there when the part after the
/// index is a number (an inner key always starts with a stage name).
pub(crate) fn split_call_key<'a>(
    stage: &'static str,
    key: &'a [KeyPart],
) -> Result<(u64, Option<u64>, &'a [KeyPart])> {
    match key {
        [KeyPart::Name(n), KeyPart::Index(index), KeyPart::Index(sub), rest @ ..] if n == stage => {
            Ok((*index, Some(*sub), rest))
        }
        [KeyPart::Name(n), KeyPart::Index(index), rest @ ..] if n == stage => {
            Ok((*index, None, rest))
        }
        _ => Err(bad_key(stage, key)),
    }
}

/// The nested keys of a group key's rest.
pub(crate) fn nested_keys(stage: &'static str, rest: &[KeyPart]) -> Result<Vec<RestoreKey>> {
    rest.iter()
        .map(|part| match part {
            KeyPart::Key(key) => Ok(key.clone()),
            _ => Err(bad_key(stage, rest)),
        })
        .collect()
}

/// Picks output `sub` of a call made again on restore (`None`: the call returned one value); a
/// lazy generator is pulled up to it in `ctx`.
pub(crate) fn pick<U>(
    outputs: Outputs<U>,
    sub: Option<u64>,
    key: &[KeyPart],
    ctx: &SampleContext,
) -> Result<U> {
    let missing = || Error::BadState {
        reason: format!(
            "the hook no longer makes the output {} on restore (it must be deterministic)",
            RestoreKey::from_parts(key.to_vec())
        ),
    };
    let described = || RestoreKey::from_parts(key.to_vec()).to_string();
    match (outputs, sub) {
        (Outputs::One(value), None) => Ok(value),
        (Outputs::Many(values), Some(sub)) => usize::try_from(sub)
            .ok()
            .and_then(|sub| values.into_iter().nth(sub))
            .ok_or_else(missing),
        (Outputs::Lazy(mut generator), Some(sub)) => {
            let mut pull = || call_on_restore("generator", generator.next(ctx), described);
            for _ in 0..sub {
                pull()?.ok_or_else(missing)?;
            }
            pull()?.ok_or_else(missing)
        }
        _ => Err(missing()),
    }
}

/// Calls a hook on restore, where skipping or failing is an error (the reference's
/// `restore_error_handler`).
pub(crate) fn call_on_restore<U>(
    hook: &'static str,
    res: HookResult<U>,
    key: impl FnOnce() -> String,
) -> Result<U> {
    res.map_err(|err| Error::RestoreItem {
        restore_key: key(),
        source: Box::new(Error::Hook {
            hook,
            sample: String::new(),
            source: format!("{err} (on restore)").into(),
        }),
    })
}

/// Applies a hook to each item: `("MapDataset", index[, sub], *inner key)`.
pub(crate) struct Apply<S, T, U> {
    inner: S,
    hook: &'static str,
    f: ApplyFn<T, U>,
    env: StageEnv,
    guard: Guard,
    index: u64,
    pending: Option<Pending<U>>,
    /// Consecutive inputs that gave no output (see [`Error::AllDropped`]).
    dropped: u64,
}

impl<S, T, U> Apply<S, T, U> {
    pub(crate) fn new(inner: S, hook: &'static str, f: ApplyFn<T, U>, env: StageEnv) -> Self {
        let guard = env.guard(hook);
        Apply { inner, hook, f, env, guard, index: 0, pending: None, dropped: 0 }
    }
}

impl<S: std::fmt::Debug, T, U> std::fmt::Debug for Apply<S, T, U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Apply")
            .field("hook", &self.hook)
            .field("index", &self.index)
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, T, U> Stage for Apply<S, T, U>
where
    S: Stage<Item = Keyed<T>>,
    T: Send,
    U: Send,
{
    type Item = Keyed<U>;

    fn next(&mut self) -> Result<Option<Keyed<U>>> {
        loop {
            let key =
                |index, sub, inputs: &[RestoreKey]| map_key("MapDataset", index, sub, &inputs[0]);
            if let Some(item) =
                Pending::next_from(&mut self.pending, &self.env, &mut self.guard, key)?
            {
                self.dropped = 0;
                return Ok(Some(item));
            }
            // Inputs repeated forever that all give nothing (skipped, or generators that yield
            // nothing) would keep this loop going forever.
            let len_worker = self.inner.len_worker();
            if len_worker > 0 && self.dropped >= 2 * len_worker {
                return Err(Error::AllDropped {
                    hook: self.hook,
                    worker: self.env.worker.local,
                    dropped: self.dropped,
                    len_worker,
                });
            }
            let Some(item) = self.inner.next()? else { return Ok(None) };
            // Counted until an output comes.
            self.dropped += 1;
            let index = self.index;
            self.index += 1;
            let ctx = self.env.context(index);
            let res = (self.f)(item.value, &ctx);
            let input = item.restore_key;
            let failures = self.guard.consecutive();
            let Some(outputs) = self.guard.handle(res, || input.to_string())? else {
                if self.guard.limits_failures() && self.guard.consecutive() > failures {
                    // A failure: the failure tolerance ends a loader whose samples all fail (with
                    // `FatalSampleError`, as the reference), however few a worker has.
                    self.dropped -= 1;
                }
                continue;
            };
            match Pending::start(outputs, vec![input], index, ctx.item_index()) {
                Started::One(value, inputs) => {
                    self.dropped = 0;
                    let restore_key = map_key("MapDataset", index, None, &inputs[0]);
                    return Ok(Some(Keyed { restore_key, value }));
                }
                Started::Many(pending) => self.pending = Some(pending),
            }
        }
    }

    fn len_worker(&self) -> u64 {
        self.inner.len_worker()
    }

    fn state(&self) -> Result<StageState> {
        Ok(StageState::Map {
            index: self.index,
            failures: self.guard.consecutive(),
            pending: self.pending.as_ref().map(Pending::state),
            inner: Box::new(self.inner.state()?),
        })
    }

    fn restore(&mut self, state: &StageState) -> Result<()> {
        let StageState::Map { index, failures, pending, inner } = state else {
            return Err(mismatch("map stage", state));
        };
        self.inner.restore(inner)?;
        self.index = *index;
        self.guard.set_consecutive(*failures);
        self.pending = match pending {
            None => None,
            Some(call) => {
                let [input] = call.inputs.as_slice() else {
                    return Err(Error::BadState {
                        reason: "a map call has exactly one input".to_owned(),
                    });
                };
                let item =
                    crate::shuffle::restore_items(&mut self.inner, std::slice::from_ref(input))?
                        .pop()
                        .expect("one key, one item");
                let ctx = self.env.context_at(call.index, call.item_index);
                let outputs =
                    call_on_restore(self.hook, (self.f)(item.value, &ctx), || input.to_string())?;
                Some(Pending::resume(call, outputs, &self.env)?)
            }
        };
        Ok(())
    }

    fn restore_item(&mut self, key: &[KeyPart]) -> Result<Keyed<U>> {
        let (index, sub, rest) = split_call_key("MapDataset", key)?;
        let item = self.inner.restore_item(rest)?;
        let ctx = self.env.context(index);
        let res = (self.f)(item.value, &ctx);
        let outputs = call_on_restore(self.hook, res, || item.restore_key.to_string())?;
        let value = pick(outputs, sub, key, &ctx)?;
        Ok(Keyed { restore_key: map_key("MapDataset", index, sub, &item.restore_key), value })
    }
}
