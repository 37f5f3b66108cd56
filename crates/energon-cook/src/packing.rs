//! Packing: samples buffered, grouped by `select_samples_to_pack`, each group combined by
//! `pack_selected_samples` (the reference's `PackingDataset`).

use std::sync::Arc;

use crate::{
    apply::{
        Pending, Started, call_on_restore, group_key, map_key, nested_keys, pick, split_call_key,
    },
    context::{SampleContext, StageEnv},
    error::{Error, Result},
    hook::{HookError, HookResult, Outputs},
    policy::Guard,
    restore_key::{KeyPart, RestoreKey},
    shuffle::restore_items,
    stage::{Keyed, Stage, split_key},
    state::{StageState, mismatch},
};

/// `select_samples_to_pack`: groups of positions in the buffer.
pub(crate) type SelectFn<T> =
    Arc<dyn Fn(&[Keyed<T>], &SampleContext) -> HookResult<Vec<Vec<usize>>> + Send + Sync>;
/// `postencode_sample`.
pub(crate) type PostencodeFn<T> = Arc<dyn Fn(T, &SampleContext) -> HookResult<T> + Send + Sync>;
/// `pack_selected_samples`.
pub(crate) type PackFn<T> =
    Arc<dyn Fn(Vec<Keyed<T>>, &SampleContext) -> HookResult<Outputs<T>> + Send + Sync>;

/// The hooks of a packing stage.
pub(crate) struct PackingHooks<T> {
    pub(crate) select: SelectFn<T>,
    pub(crate) postencode: Option<PostencodeFn<T>>,
    pub(crate) pack: PackFn<T>,
}

/// Fills a buffer of `buffer_size` samples (read and selected ones together); when no selected
/// group is left and the buffer is full, `select_samples_to_pack` groups the read samples (the
/// ones it leaves out are dropped, as in the reference); each pull makes one pack of the next
/// group: `postencode_sample` on each member (if set), then `pack_selected_samples`. At the end of
/// the inner pass the remaining groups are packed, then the partial buffer is selected and
/// packed.
///
/// Keys: `("PackingDataset", pack index[, sub], *member keys)`, where a member's key is
/// `("PackingDataset", encode index, *its key)` when `postencode_sample` is set.
pub(crate) struct Packing<S, T> {
    inner: S,
    buffer_size: usize,
    hooks: PackingHooks<T>,
    env: StageEnv,
    guards: [Guard; 3],
    reading: Vec<Keyed<T>>,
    pre_packed: Vec<Keyed<T>>,
    lengths: Vec<usize>,
    select_index: u64,
    encode_index: u64,
    pack_index: u64,
    empty_rounds: u64,
    draining: bool,
    pending: Option<Pending<T>>,
}

const SELECT: usize = 0;
const ENCODE: usize = 1;
const PACK: usize = 2;

impl<S, T> Packing<S, T>
where
    S: Stage<Item = Keyed<T>>,
    T: Send,
{
    pub(crate) fn new(
        inner: S,
        buffer_size: usize,
        hooks: PackingHooks<T>,
        env: StageEnv,
    ) -> Result<Self> {
        if buffer_size == 0 {
            return Err(Error::InvalidSetting {
                setting: "packing_buffer_size",
                value: "0".to_owned(),
                reason: "must be at least 1",
            });
        }
        let guards = [
            env.guard("select_samples_to_pack"),
            env.guard("postencode_sample"),
            env.guard("pack_selected_samples"),
        ];
        Ok(Packing {
            inner,
            buffer_size,
            hooks,
            env,
            guards,
            reading: Vec::new(),
            pre_packed: Vec::new(),
            lengths: Vec::new(),
            select_index: 0,
            encode_index: 0,
            pack_index: 0,
            empty_rounds: 0,
            draining: false,
            pending: None,
        })
    }

    /// Groups the read samples into packs.
    fn pre_pack(&mut self) -> Result<()> {
        let samples = std::mem::take(&mut self.reading);
        self.lengths.clear();
        let index = self.select_index;
        self.select_index += 1;
        let ctx = self.env.context(index);
        let res = select_checked(&self.hooks.select, &samples, &ctx);
        let what = || format!("a buffer of {} samples", samples.len());
        let Some(groups) = self.guards[SELECT].handle(res, what)? else { return Ok(()) };
        let mut slots: Vec<Option<Keyed<T>>> = samples.into_iter().map(Some).collect();
        for group in groups {
            if group.is_empty() {
                continue;
            }
            self.lengths.push(group.len());
            for position in group {
                let item = slots[position].take().expect("select_checked refuses repeats");
                self.pre_packed.push(item);
            }
        }
        Ok(())
    }

    /// Makes the next pack; `None` if it failed (or a generator made nothing yet).
    fn final_pack(&mut self) -> Result<Option<Keyed<T>>> {
        let n = self.lengths.remove(0);
        let members: Vec<Keyed<T>> = self.pre_packed.drain(..n).collect();
        let members = match self.hooks.postencode.clone() {
            None => members,
            Some(postencode) => {
                let mut encoded = Vec::with_capacity(members.len());
                for member in members {
                    let index = self.encode_index;
                    self.encode_index += 1;
                    let ctx = self.env.context(index);
                    let key = member.restore_key;
                    let res = postencode(member.value, &ctx);
                    if let Some(value) = self.guards[ENCODE].handle(res, || key.to_string())? {
                        let restore_key = map_key("PackingDataset", index, None, &key);
                        encoded.push(Keyed { restore_key, value });
                    }
                }
                encoded
            }
        };
        let index = self.pack_index;
        self.pack_index += 1;
        let keys: Vec<RestoreKey> = members.iter().map(|m| m.restore_key.clone()).collect();
        let ctx = self.env.context(index);
        let res = (self.hooks.pack)(members, &ctx);
        let what = || group_key("PackingDataset", index, None, &keys).to_string();
        let Some(outputs) = self.guards[PACK].handle(res, what)? else { return Ok(None) };
        Ok(match Pending::start(outputs, keys, index, ctx.item_index()) {
            Started::One(value, keys) => {
                Some(Keyed { restore_key: group_key("PackingDataset", index, None, &keys), value })
            }
            Started::Many(pending) => {
                self.pending = Some(pending);
                None
            }
        })
    }

    /// Re-creates the members of a pack from their keys (as `pack_selected_samples` got them).
    fn restore_members(&mut self, keys: &[RestoreKey]) -> Result<Vec<Keyed<T>>> {
        let Some(postencode) = self.hooks.postencode.clone() else {
            return restore_items(&mut self.inner, keys);
        };
        let mut res = Vec::with_capacity(keys.len());
        for key in keys {
            let Some((index, rest)) = split_key("PackingDataset", key.parts()) else {
                return Err(crate::stage::bad_key("packing stage", key.parts()));
            };
            let item = self.inner.restore_item(rest).map_err(|err| Error::RestoreItem {
                restore_key: key.to_string(),
                source: Box::new(err),
            })?;
            let ctx = self.env.context(index);
            let value = call_on_restore("postencode_sample", postencode(item.value, &ctx), || {
                key.to_string()
            })?;
            res.push(Keyed { restore_key: key.clone(), value });
        }
        Ok(res)
    }
}

/// Calls `select_samples_to_pack` and checks its answer: positions inside the buffer, each at
/// most once.
fn select_checked<T>(
    select: &SelectFn<T>,
    samples: &[Keyed<T>],
    ctx: &SampleContext,
) -> HookResult<Vec<Vec<usize>>> {
    let groups = select(samples, ctx)?;
    let len = samples.len();
    let mut seen = vec![false; len];
    for &position in groups.iter().flatten() {
        match seen.get_mut(position) {
            Some(seen) if !*seen => *seen = true,
            _ => {
                return Err(HookError::msg(format!(
                    "select_samples_to_pack returned position {position}, which is outside the \
                     buffer of {len} samples or selected twice"
                )));
            }
        }
    }
    Ok(groups)
}

impl<S, T> Stage for Packing<S, T>
where
    S: Stage<Item = Keyed<T>>,
    T: Send,
{
    type Item = Keyed<T>;

    fn next(&mut self) -> Result<Option<Keyed<T>>> {
        loop {
            let key =
                |index, sub, inputs: &[RestoreKey]| group_key("PackingDataset", index, sub, inputs);
            let guard = &mut self.guards[PACK];
            if let Some(item) = Pending::next_from(&mut self.pending, &self.env, guard, key)? {
                return Ok(Some(item));
            }
            if self.draining {
                if !self.lengths.is_empty() {
                    if let Some(pack) = self.final_pack()? {
                        return Ok(Some(pack));
                    }
                } else if !self.reading.is_empty() {
                    self.pre_pack()?;
                } else {
                    self.draining = false;
                    self.empty_rounds = 0;
                    return Ok(None);
                }
                continue;
            }
            let tolerance = self.env.policy.tolerance("select_samples_to_pack");
            if tolerance > 0 && self.empty_rounds > tolerance {
                return Err(Error::TooManyFailures {
                    hook: "select_samples_to_pack",
                    count: self.empty_rounds,
                    tolerance,
                    last: Box::new(Error::Hook {
                        hook: "select_samples_to_pack",
                        sample: format!("a buffer of {} samples", self.buffer_size),
                        source: "no pack was selected".into(),
                    }),
                });
            }
            while self.reading.len() + self.pre_packed.len() < self.buffer_size {
                match self.inner.next()? {
                    Some(item) => self.reading.push(item),
                    None => {
                        self.draining = true;
                        break;
                    }
                }
            }
            if self.draining {
                continue;
            }
            if self.lengths.is_empty() {
                self.pre_pack()?;
                if self.lengths.is_empty() {
                    self.empty_rounds += 1;
                    continue;
                }
            }
            self.empty_rounds = 0;
            if let Some(pack) = self.final_pack()? {
                return Ok(Some(pack));
            }
        }
    }

    fn len_worker(&self) -> u64 {
        self.inner.len_worker()
    }

    fn state(&self) -> Result<StageState> {
        let keys = |items: &[Keyed<T>]| items.iter().map(|i| i.restore_key.clone()).collect();
        Ok(StageState::Packing {
            reading: keys(&self.reading),
            pre_packed: keys(&self.pre_packed),
            lengths: self.lengths.iter().map(|&n| n as u64).collect(),
            select_index: self.select_index,
            encode_index: self.encode_index,
            pack_index: self.pack_index,
            failures: [
                self.guards[SELECT].consecutive(),
                self.guards[ENCODE].consecutive(),
                self.guards[PACK].consecutive(),
            ],
            empty_rounds: self.empty_rounds,
            draining: self.draining,
            pending: self.pending.as_ref().map(Pending::state),
            inner: Box::new(self.inner.state()?),
        })
    }

    fn restore(&mut self, state: &StageState) -> Result<()> {
        let StageState::Packing {
            reading,
            pre_packed,
            lengths,
            select_index,
            encode_index,
            pack_index,
            failures,
            empty_rounds,
            draining,
            pending,
            inner,
        } = state
        else {
            return Err(mismatch("packing stage", state));
        };
        let total: u64 = lengths.iter().sum();
        if total != pre_packed.len() as u64 {
            return Err(Error::BadState {
                reason: format!(
                    "packs of {total} samples in all, but {} selected samples",
                    pre_packed.len()
                ),
            });
        }
        self.inner.restore(inner)?;
        self.reading = restore_items(&mut self.inner, reading)?;
        self.pre_packed = restore_items(&mut self.inner, pre_packed)?;
        self.lengths = lengths.iter().map(|&n| usize::try_from(n).unwrap_or(usize::MAX)).collect();
        self.select_index = *select_index;
        self.encode_index = *encode_index;
        self.pack_index = *pack_index;
        for (guard, &failures) in self.guards.iter_mut().zip(failures) {
            guard.set_consecutive(failures);
        }
        self.empty_rounds = *empty_rounds;
        self.draining = *draining;
        self.pending = match pending {
            None => None,
            Some(call) => {
                let members = self.restore_members(&call.inputs)?;
                let ctx = self.env.context_at(call.index, call.item_index);
                let res = (self.hooks.pack)(members, &ctx);
                let outputs = call_on_restore("pack_selected_samples", res, || {
                    group_key("PackingDataset", call.index, None, &call.inputs).to_string()
                })?;
                Some(Pending::resume(call, outputs, &self.env)?)
            }
        };
        Ok(())
    }

    fn restore_item(&mut self, key: &[KeyPart]) -> Result<Keyed<T>> {
        let (index, sub, rest) = split_call_key("PackingDataset", key)?;
        let keys = nested_keys("PackingDataset", rest)?;
        let members = self.restore_members(&keys)?;
        let ctx = self.env.context(index);
        let res = (self.hooks.pack)(members, &ctx);
        let outputs = call_on_restore("pack_selected_samples", res, || {
            RestoreKey::from_parts(key.to_vec()).to_string()
        })?;
        let value = pick(outputs, sub, key, &ctx)?;
        Ok(Keyed { restore_key: group_key("PackingDataset", index, sub, &keys), value })
    }
}
