//! The map stage of the task encoder pipeline: a hook applied to every item, with the error
//! policy, the call's context (index, seed) and generator outputs (the reference's
//! `MapDataset` around `load_sample`, `cook_crude_sample`, `encode_sample`, ...).

use std::{collections::VecDeque, sync::Arc};

use crate::{
    context::{SampleContext, StageEnv},
    error::{Error, Result},
    hook::{HookResult, Outputs},
    policy::Guard,
    restore_key::{KeyPart, RestoreKey},
    stage::{Keyed, Stage, bad_key},
    state::{PendingCall, StageState, mismatch},
};

/// A hook of a map stage.
pub(crate) type ApplyFn<T, U> =
    Arc<dyn Fn(T, &SampleContext) -> HookResult<Outputs<U>> + Send + Sync>;

/// The outputs of a generator call not handed out yet.
#[derive(Debug)]
pub(crate) struct Pending<U> {
    pub(crate) inputs: Vec<RestoreKey>,
    pub(crate) index: u64,
    pub(crate) item_index: u64,
    pub(crate) emitted: u64,
    pub(crate) outputs: VecDeque<U>,
}

impl<U> Pending<U> {
    /// The next output and its position in the call.
    pub(crate) fn pop(&mut self) -> Option<(u64, U)> {
        let value = self.outputs.pop_front()?;
        let sub = self.emitted;
        self.emitted += 1;
        Some((sub, value))
    }

    /// Hands out the next output of the call in `slot`, keyed by `key(call index, output
    /// position, input keys)`, and empties the slot once the call has nothing left.
    pub(crate) fn next_from(
        slot: &mut Option<Pending<U>>,
        key: impl FnOnce(u64, u64, &[RestoreKey]) -> RestoreKey,
    ) -> Option<Keyed<U>> {
        let pending = slot.as_mut()?;
        let res = pending.pop().map(|(sub, value)| Keyed {
            restore_key: key(pending.index, sub, &pending.inputs),
            value,
        });
        if pending.outputs.is_empty() {
            *slot = None;
        }
        res
    }

    pub(crate) fn state(&self) -> PendingCall {
        PendingCall {
            inputs: self.inputs.clone(),
            index: self.index,
            item_index: self.item_index,
            emitted: self.emitted,
        }
    }

    /// Continues a saved call: `outputs` are the call's outputs made again.
    pub(crate) fn resume(call: &PendingCall, outputs: Outputs<U>) -> Result<Self> {
        let Outputs::Many(outputs) = outputs else {
            return Err(Error::BadState {
                reason: "a saved generator call returned a single value on restore".to_owned(),
            });
        };
        let emitted = usize::try_from(call.emitted).unwrap_or(usize::MAX);
        if emitted > outputs.len() {
            return Err(Error::BadState {
                reason: format!(
                    "a generator call that had yielded {emitted} values yields {} on restore",
                    outputs.len()
                ),
            });
        }
        let mut outputs: VecDeque<U> = outputs.into();
        outputs.drain(..emitted);
        Ok(Pending {
            inputs: call.inputs.clone(),
            index: call.index,
            item_index: call.item_index,
            emitted: call.emitted,
            outputs,
        })
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

/// Picks output `sub` of a call made again on restore (`None`: the call returned one value).
pub(crate) fn pick<U>(outputs: Outputs<U>, sub: Option<u64>, key: &[KeyPart]) -> Result<U> {
    let found = match (outputs, sub) {
        (Outputs::One(value), None) => Some(value),
        (Outputs::Many(values), Some(sub)) => {
            usize::try_from(sub).ok().and_then(|sub| values.into_iter().nth(sub))
        }
        _ => None,
    };
    found.ok_or_else(|| Error::BadState {
        reason: format!(
            "the hook no longer makes the output {} on restore (it must be deterministic)",
            RestoreKey::from_parts(key.to_vec())
        ),
    })
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
}

impl<S, T, U> Apply<S, T, U> {
    pub(crate) fn new(inner: S, hook: &'static str, f: ApplyFn<T, U>, env: StageEnv) -> Self {
        let guard = env.guard(hook);
        Apply { inner, hook, f, env, guard, index: 0, pending: None }
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
            if let Some(item) = Pending::next_from(&mut self.pending, |index, sub, inputs| {
                map_key("MapDataset", index, Some(sub), &inputs[0])
            }) {
                return Ok(Some(item));
            }
            let Some(item) = self.inner.next()? else { return Ok(None) };
            let index = self.index;
            self.index += 1;
            let ctx = self.env.context(index);
            let res = (self.f)(item.value, &ctx);
            let input = item.restore_key;
            match self.guard.handle(res, || input.to_string())? {
                None => {}
                Some(Outputs::One(value)) => {
                    let restore_key = map_key("MapDataset", index, None, &input);
                    return Ok(Some(Keyed { restore_key, value }));
                }
                Some(Outputs::Many(values)) => {
                    self.pending = Some(Pending {
                        inputs: vec![input],
                        index,
                        item_index: ctx.item_index(),
                        emitted: 0,
                        outputs: values.into(),
                    });
                }
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
                Some(Pending::resume(call, outputs)?)
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
        let value = pick(outputs, sub, key)?;
        Ok(Keyed { restore_key: map_key("MapDataset", index, sub, &item.restore_key), value })
    }
}
