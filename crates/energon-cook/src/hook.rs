//! What task encoder hooks and cookers return: one output, several, a skip, or a failure.
//!
//! The reference lets a hook return a value, be a generator (0..n values), raise `SkipSample`,
//! raise an ordinary exception (logged, the sample skipped, counted against a failure tolerance)
//! or raise a fatal one. [`Outputs`] (with [`Generator`] for values made one at a time) and
//! [`HookError`] say the same in Rust.

use std::fmt;

use crate::context::SampleContext;

/// Any error a hook may report.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The result of a hook.
pub type HookResult<T> = std::result::Result<T, HookError>;

/// Why a hook produced nothing.
///
/// Any `std::error::Error` converts into [`HookError::Failed`], so `?` works inside hooks.
pub enum HookError {
    /// Skip this sample quietly (the reference's `SkipSample`): counted as skipped, not as a
    /// failure.
    Skip,
    /// The sample failed: the error is logged, the sample (or batch) is dropped and counted, and
    /// the loader continues, unless this hook failed `failure_tolerance` times in a row.
    Failed(BoxError),
    /// Stop the loader (the reference's `FatalSampleError`).
    Fatal(BoxError),
}

impl HookError {
    /// A failure with a message.
    pub fn msg(message: impl Into<String>) -> Self {
        HookError::Failed(message.into().into())
    }

    /// A fatal failure with a message.
    pub fn fatal_msg(message: impl Into<String>) -> Self {
        HookError::Fatal(message.into().into())
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for HookError {
    fn from(err: E) -> Self {
        HookError::Failed(Box::new(err))
    }
}

impl fmt::Debug for HookError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HookError::Skip => f.write_str("Skip"),
            HookError::Failed(err) => f.debug_tuple("Failed").field(err).finish(),
            HookError::Fatal(err) => f.debug_tuple("Fatal").field(err).finish(),
        }
    }
}

impl fmt::Display for HookError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HookError::Skip => f.write_str("sample skipped"),
            HookError::Failed(err) => fmt::Display::fmt(err, f),
            HookError::Fatal(err) => write!(f, "fatal: {err}"),
        }
    }
}

/// A generator hook's outputs, made one at a time as the stage hands them out (the reference
/// iterates a generator lazily, so each value sees the worker's state at the moment it is
/// pulled: `current_batch_index`, random state between yields).
pub trait Generator<T>: Send {
    /// The next value (`Ok(None)`: the generator is done), made in `ctx`: the context of the
    /// call that created the generator, at the worker's current item.
    fn next(&mut self, ctx: &SampleContext) -> HookResult<Option<T>>;
}

/// What a hook made of its input.
pub enum Outputs<T> {
    /// Exactly one value (a plain return in the reference).
    One(T),
    /// Any number of values, made at once. Their restore keys carry the position within the
    /// call, as the reference's do, so each can be re-created alone.
    Many(Vec<T>),
    /// Any number of values, made one at a time (a generator in the reference); keyed like
    /// [`Outputs::Many`].
    Lazy(Box<dyn Generator<T>>),
}

impl<T: fmt::Debug> fmt::Debug for Outputs<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outputs::One(value) => f.debug_tuple("One").field(value).finish(),
            Outputs::Many(values) => f.debug_tuple("Many").field(values).finish(),
            Outputs::Lazy(_) => f.write_str("Lazy(..)"),
        }
    }
}

impl<T> Outputs<T> {
    /// Whether these are a generator's values (keyed by their position in the call).
    pub fn is_many(&self) -> bool {
        !matches!(self, Outputs::One(_))
    }

    /// All values, in order; a lazy generator is run to its end in `ctx`.
    pub fn into_vec(self, ctx: &SampleContext) -> HookResult<Vec<T>> {
        match self {
            Outputs::One(x) => Ok(vec![x]),
            Outputs::Many(v) => Ok(v),
            Outputs::Lazy(mut g) => {
                let mut values = Vec::new();
                while let Some(value) = g.next(ctx)? {
                    values.push(value);
                }
                Ok(values)
            }
        }
    }

    /// Each value transformed by `f` (lazily for a lazy generator).
    pub fn map<U: 'static>(self, f: impl Fn(T) -> U + Send + 'static) -> Outputs<U>
    where
        T: 'static,
    {
        match self {
            Outputs::One(x) => Outputs::One(f(x)),
            Outputs::Many(v) => Outputs::Many(v.into_iter().map(f).collect()),
            Outputs::Lazy(inner) => Outputs::Lazy(Box::new(Mapped { inner, f })),
        }
    }
}

/// A lazy generator whose values are transformed (see [`Outputs::map`]).
struct Mapped<T, F> {
    inner: Box<dyn Generator<T>>,
    f: F,
}

impl<T, U, F: Fn(T) -> U + Send> Generator<U> for Mapped<T, F> {
    fn next(&mut self, ctx: &SampleContext) -> HookResult<Option<U>> {
        Ok(self.inner.next(ctx)?.map(&self.f))
    }
}

impl<T> From<T> for Outputs<T> {
    fn from(value: T) -> Self {
        Outputs::One(value)
    }
}

/// `a` as a `B` when both are the same type (the identity a hook that is not implemented
/// stands for); `None` otherwise.
pub(crate) fn cast<A: 'static, B: 'static>(a: A) -> Option<B> {
    let mut slot = Some(a);
    (&mut slot as &mut dyn std::any::Any).downcast_mut::<Option<B>>().and_then(Option::take)
}

/// Whether `A` and `B` are the same type.
pub(crate) fn same_type<A: 'static, B: 'static>() -> bool {
    std::any::TypeId::of::<A>() == std::any::TypeId::of::<B>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_convert_and_cast_is_the_identity_only() {
        let parse = || -> HookResult<u32> { Ok("x".parse::<u32>()?) };
        assert!(matches!(parse(), Err(HookError::Failed(_))));
        assert_eq!(cast::<u32, u32>(7), Some(7));
        assert_eq!(cast::<u32, u64>(7), None);
        assert!(same_type::<String, String>() && !same_type::<String, &str>());
        let worker =
            crate::WorkerInfo::new(&energon_dist::WorkerConfig::new(0, 1, 0).unwrap(), 0).unwrap();
        let ctx = SampleContext::new(worker, 0, 0);
        assert_eq!(Outputs::from(3).into_vec(&ctx).unwrap(), [3]);
        assert!(!Outputs::from(3).is_many() && Outputs::<u8>::Many(vec![]).is_many());
        struct Count(u32);
        impl Generator<u32> for Count {
            fn next(&mut self, ctx: &SampleContext) -> HookResult<Option<u32>> {
                self.0 += 1;
                Ok((self.0 <= 3).then_some(self.0 * 10 + ctx.index() as u32))
            }
        }
        let lazy = Outputs::Lazy(Box::new(Count(0))).map(|v| v + 1);
        assert_eq!(lazy.into_vec(&ctx).unwrap(), [11, 21, 31]);
    }
}
