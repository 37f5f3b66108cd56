//! What task encoder hooks and cookers return: one output, several, a skip, or a failure.
//!
//! The reference lets a hook return a value, be a generator (0..n values), raise `SkipSample`,
//! raise an ordinary exception (logged, the sample skipped, counted against a failure tolerance)
//! or raise a fatal one. [`Outputs`] and [`HookError`] say the same in Rust.

use std::fmt;

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

/// What a hook made of its input.
#[derive(Debug, Clone, PartialEq)]
pub enum Outputs<T> {
    /// Exactly one value (a plain return in the reference).
    One(T),
    /// Any number of values (a generator in the reference). Their restore keys carry the
    /// position within the call, as the reference's do, so each can be re-created alone.
    Many(Vec<T>),
}

impl<T> Outputs<T> {
    /// The number of values.
    pub fn len(&self) -> usize {
        match self {
            Outputs::One(_) => 1,
            Outputs::Many(v) => v.len(),
        }
    }

    /// Whether there is no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether these are a generator's values.
    pub fn is_many(&self) -> bool {
        matches!(self, Outputs::Many(_))
    }

    /// The values, in order.
    pub fn into_vec(self) -> Vec<T> {
        match self {
            Outputs::One(x) => vec![x],
            Outputs::Many(v) => v,
        }
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
        assert_eq!(Outputs::from(3).into_vec(), [3]);
        assert!(Outputs::<u8>::Many(vec![]).is_empty());
    }
}
