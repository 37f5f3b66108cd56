//! The error policy of the user-function stages, as the reference's: a failing sample is
//! logged, counted and skipped, until one hook fails too many times in a row; fatal errors stop
//! the loader.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use crate::{
    error::{Error, Result},
    hook::{HookError, HookResult},
};

/// How the stages that call user functions treat failures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorPolicy {
    /// After this many consecutive failures of one hook the loader stops with
    /// [`Error::TooManyFailures`]; 0 never stops (the reference's `failure_tolerance`, default
    /// 100).
    pub failure_tolerance: u64,
    /// The tolerances of single hooks, by the stage's hook name (`encode_sample`, `batch`,
    /// `cook_crude_sample`, ...), in place of `failure_tolerance` (the reference's
    /// `@stateless(failure_tolerance=N)` on one hook).
    pub hook_tolerances: Vec<(String, u64)>,
}

impl Default for ErrorPolicy {
    fn default() -> Self {
        ErrorPolicy::with_tolerance(100)
    }
}

impl ErrorPolicy {
    /// The policy that stops after `failure_tolerance` consecutive failures of any hook (0:
    /// never).
    pub fn with_tolerance(failure_tolerance: u64) -> Self {
        ErrorPolicy { failure_tolerance, hook_tolerances: Vec::new() }
    }

    /// The same policy with `tolerance` for the hook `hook`.
    pub fn hook_tolerance(mut self, hook: impl Into<String>, tolerance: u64) -> Self {
        let hook = hook.into();
        self.hook_tolerances.retain(|(h, _)| *h != hook);
        self.hook_tolerances.push((hook, tolerance));
        self
    }

    /// The tolerance of `hook`.
    pub fn tolerance(&self, hook: &str) -> u64 {
        self.hook_tolerances
            .iter()
            .find(|(h, _)| h == hook)
            .map_or(self.failure_tolerance, |&(_, t)| t)
    }
}

/// How often one hook failed or skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HookCounts {
    /// Samples (or batches) dropped after an error.
    pub failed: u64,
    /// Samples the hook skipped on purpose ([`HookError::Skip`]).
    pub skipped: u64,
}

/// Failures and skips of a loader's hooks, over all its workers (a loader statistic: nothing is
/// dropped silently).
#[derive(Debug, Clone, Default)]
pub struct FailureStats(Arc<Mutex<BTreeMap<&'static str, HookCounts>>>);

impl FailureStats {
    /// The counts by hook name (`load_sample`, `encode_sample`, `batch`, ...).
    pub fn by_hook(&self) -> BTreeMap<&'static str, HookCounts> {
        self.lock().clone()
    }

    /// Samples or batches dropped after an error, all hooks together.
    pub fn failed(&self) -> u64 {
        self.lock().values().map(|c| c.failed).sum()
    }

    /// Samples skipped on purpose, all hooks together.
    pub fn skipped(&self) -> u64 {
        self.lock().values().map(|c| c.skipped).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, HookCounts>> {
        // The map stays consistent even if a holder panicked: every update is one increment.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn count(&self, hook: &'static str, failed: bool) {
        let mut map = self.lock();
        let counts = map.entry(hook).or_default();
        if failed {
            counts.failed += 1;
        } else {
            counts.skipped += 1;
        }
    }
}

/// The consecutive-failure counter of one hook in one stage (the reference's `ErrorContext`).
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    hook: &'static str,
    tolerance: u64,
    consecutive: u64,
    stats: FailureStats,
}

impl Guard {
    pub(crate) fn new(hook: &'static str, policy: &ErrorPolicy, stats: FailureStats) -> Self {
        Guard { hook, tolerance: policy.tolerance(hook), consecutive: 0, stats }
    }

    /// Consecutive failures so far (saved with the stage).
    pub(crate) fn consecutive(&self) -> u64 {
        self.consecutive
    }

    /// Whether failures in a row end the loader (a tolerance is set): then an input that failed
    /// is the tolerance's to count, not [`Error::AllDropped`]'s.
    pub(crate) fn limits_failures(&self) -> bool {
        self.tolerance > 0
    }

    pub(crate) fn set_consecutive(&mut self, consecutive: u64) {
        self.consecutive = consecutive;
    }

    /// Applies the policy to a hook's result: the value; `None` when the sample is to be
    /// dropped (skipped, or failed within the tolerance); an error when the loader must stop.
    /// `what` names the input for the log and the error (its restore key).
    pub(crate) fn handle<T>(
        &mut self,
        res: HookResult<T>,
        what: impl FnOnce() -> String,
    ) -> Result<Option<T>> {
        match res {
            Ok(value) => {
                self.consecutive = 0;
                Ok(Some(value))
            }
            Err(HookError::Skip) => {
                self.stats.count(self.hook, false);
                Ok(None)
            }
            Err(HookError::Fatal(source)) => {
                Err(Error::Fatal { hook: self.hook, sample: what(), source })
            }
            Err(HookError::Failed(source)) => {
                // An error of the loader itself (a shard that cannot be read, a broken
                // checkpoint) is not the sample's fault: it stops the loader.
                let source = match source.downcast::<Error>() {
                    Ok(err) if !err.is_sample_error() => return Err(*err),
                    Ok(err) => err,
                    Err(other) => other,
                };
                let sample = what();
                tracing::warn!(
                    hook = self.hook,
                    sample = %sample,
                    error = %source,
                    "sample dropped after an error"
                );
                self.stats.count(self.hook, true);
                self.consecutive += 1;
                if self.tolerance > 0 && self.consecutive >= self.tolerance {
                    return Err(Error::TooManyFailures {
                        hook: self.hook,
                        count: self.consecutive,
                        tolerance: self.tolerance,
                        last: Box::new(Error::Hook { hook: self.hook, sample, source }),
                    });
                }
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed() -> HookResult<u32> {
        Err(HookError::msg("bad sample"))
    }

    #[test]
    fn failures_are_counted_until_the_tolerance() {
        let stats = FailureStats::default();
        let mut guard = Guard::new("encode_sample", &ErrorPolicy::with_tolerance(3), stats.clone());
        assert_eq!(guard.handle(failed(), String::new).unwrap(), None);
        assert_eq!(guard.handle(failed(), String::new).unwrap(), None);
        // A success resets the count; a skip neither counts nor resets.
        assert_eq!(guard.handle(Ok(1), String::new).unwrap(), Some(1));
        assert_eq!(guard.handle(Err::<u32, _>(HookError::Skip), String::new).unwrap(), None);
        assert_eq!(guard.handle(failed(), String::new).unwrap(), None);
        assert_eq!(guard.handle(failed(), String::new).unwrap(), None);
        let err = guard.handle(failed(), || "('Webdataset', 3)".to_owned()).unwrap_err();
        assert!(matches!(err, Error::TooManyFailures { count: 3, tolerance: 3, .. }), "{err}");
        assert_eq!(stats.failed(), 5);
        assert_eq!(stats.skipped(), 1);
        assert_eq!(stats.by_hook()["encode_sample"], HookCounts { failed: 5, skipped: 1 });
    }

    #[test]
    fn fatal_and_loader_errors_stop_at_once() {
        let mut guard =
            Guard::new("batch", &ErrorPolicy::with_tolerance(0), FailureStats::default());
        for _ in 0..1000 {
            assert_eq!(guard.handle(failed(), String::new).unwrap(), None);
        }
        let fatal: HookResult<u32> = Err(HookError::fatal_msg("broken"));
        assert!(matches!(
            guard.handle(fatal, String::new),
            Err(Error::Fatal { hook: "batch", .. })
        ));
        let own: HookResult<u32> =
            Err(HookError::Failed(Box::new(Error::NotSavable { stage: "x" })));
        assert!(matches!(guard.handle(own, String::new), Err(Error::NotSavable { .. })));
    }

    #[test]
    fn a_hook_can_have_its_own_tolerance() {
        let policy = ErrorPolicy::with_tolerance(0).hook_tolerance("encode_sample", 2);
        assert_eq!((policy.tolerance("encode_sample"), policy.tolerance("batch")), (2, 0));
        let mut guard = Guard::new("encode_sample", &policy, FailureStats::default());
        assert_eq!(guard.handle(failed(), String::new).unwrap(), None);
        assert!(matches!(
            guard.handle(failed(), String::new),
            Err(Error::TooManyFailures { count: 2, tolerance: 2, .. })
        ));
        let policy = policy.hook_tolerance("encode_sample", 5);
        assert_eq!(policy.hook_tolerances, vec![("encode_sample".to_owned(), 5)]);
    }
}
