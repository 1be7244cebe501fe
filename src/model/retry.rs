//! Exponential backoff with jitter, honouring `retry-after`, inside an overall deadline.

use std::future::Future;
use std::time::{Duration, Instant};

use super::{ErrorKind, ModelError};
use crate::claude::Env;

/// First backoff step; `DREAMKIT_RETRY_BASE_MS` changes it (tests use a few milliseconds).
const DEFAULT_BASE: Duration = Duration::from_millis(500);
/// No single wait is longer than this, whatever a server asks.
const MAX_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub request_timeout: Duration,
    pub deadline: Duration,
    pub base: Duration,
}

impl RetryPolicy {
    pub fn from_env(
        max_retries: u32,
        request_timeout: Duration,
        deadline: Duration,
        env: &Env,
    ) -> Self {
        let base = env
            .get("DREAMKIT_RETRY_BASE_MS")
            .and_then(|v| v.to_str()?.trim().parse().ok())
            .map_or(DEFAULT_BASE, Duration::from_millis);
        RetryPolicy {
            max_retries,
            request_timeout,
            deadline,
            base,
        }
    }

    /// Backoff before retry `n` (0-based): base x 2^n, capped, with "equal jitter" (half
    /// fixed, half random) so that many clients do not retry in step.
    pub fn backoff(&self, n: u32) -> Duration {
        let full = self
            .base
            .saturating_mul(2u32.saturating_pow(n))
            .min(MAX_WAIT);
        full / 2 + full.mul_f64(fastrand::f64() / 2.0)
    }

    /// Calls `attempt(timeout)` until it succeeds, fails for good, runs out of retries, or
    /// the deadline would pass. The error returned is the last one, with `attempts` set.
    pub async fn run<T, F, Fut>(&self, mut attempt: F) -> Result<T, ModelError>
    where
        F: FnMut(Duration) -> Fut,
        Fut: Future<Output = Result<T, ModelError>>,
    {
        let start = Instant::now();
        let mut attempts = 0;
        loop {
            let remaining = self.deadline.saturating_sub(start.elapsed());
            if remaining.is_zero() {
                return Err(ModelError {
                    attempts,
                    ..ModelError::new(ErrorKind::Timeout, "the deadline passed")
                });
            }
            attempts += 1;
            let error = match attempt(self.request_timeout.min(remaining)).await {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            let give_up = |error: ModelError| Err(ModelError { attempts, ..error });
            if !error.kind.retryable() || attempts > self.max_retries {
                return give_up(error);
            }
            let wait = error
                .retry_after
                .unwrap_or_else(|| self.backoff(attempts - 1))
                .min(MAX_WAIT);
            if wait >= self.deadline.saturating_sub(start.elapsed()) {
                return give_up(error);
            }
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn policy(retries: u32, deadline_ms: u64) -> RetryPolicy {
        RetryPolicy {
            max_retries: retries,
            request_timeout: Duration::from_secs(5),
            deadline: Duration::from_millis(deadline_ms),
            base: Duration::from_millis(1),
        }
    }

    fn error(kind: ErrorKind) -> ModelError {
        ModelError::new(kind, "x")
    }

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        super::super::block_on(f).unwrap()
    }

    #[test]
    fn retries_retryable_errors_then_succeeds() {
        let calls = Cell::new(0);
        let result = run(policy(3, 10_000).run(|_| {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move {
                if n < 3 {
                    Err(error(ErrorKind::Overloaded))
                } else {
                    Ok(n)
                }
            }
        }));
        assert_eq!(result, Ok(3));
    }

    #[test]
    fn stops_after_max_retries_and_counts_attempts() {
        let calls = Cell::new(0);
        let result: Result<(), _> = run(policy(2, 10_000).run(|_| {
            calls.set(calls.get() + 1);
            async { Err(error(ErrorKind::Server)) }
        }));
        let e = result.unwrap_err();
        assert_eq!((e.kind, e.attempts, calls.get()), (ErrorKind::Server, 3, 3));
    }

    #[test]
    fn does_not_retry_auth_or_invalid_requests() {
        for kind in [
            ErrorKind::Auth,
            ErrorKind::InvalidRequest,
            ErrorKind::MalformedResponse,
        ] {
            let calls = Cell::new(0);
            let result: Result<(), _> = run(policy(3, 10_000).run(|_| {
                calls.set(calls.get() + 1);
                async move { Err(error(kind)) }
            }));
            assert_eq!(
                (result.unwrap_err().attempts, calls.get()),
                (1, 1),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn a_retry_after_beyond_the_deadline_gives_up_at_once() {
        let calls = Cell::new(0);
        let result: Result<(), _> = run(policy(5, 2_000).run(|_| {
            calls.set(calls.get() + 1);
            async {
                Err(ModelError {
                    retry_after: Some(Duration::from_secs(30)),
                    ..error(ErrorKind::RateLimited)
                })
            }
        }));
        assert_eq!(result.unwrap_err().kind, ErrorKind::RateLimited);
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn each_attempt_gets_at_most_the_remaining_time() {
        let p = RetryPolicy {
            request_timeout: Duration::from_secs(60),
            ..policy(0, 1_000)
        };
        let seen = Cell::new(Duration::ZERO);
        let _: Result<(), _> = run(p.run(|t| {
            seen.set(t);
            async { Err(error(ErrorKind::Timeout)) }
        }));
        assert!(seen.get() <= Duration::from_secs(1));
    }

    #[test]
    fn backoff_grows_with_jitter() {
        let p = RetryPolicy {
            base: Duration::from_millis(100),
            ..policy(3, 1)
        };
        for n in 0..4 {
            let full = Duration::from_millis(100 * 2u64.pow(n));
            let b = p.backoff(n);
            assert!(b >= full / 2 && b <= full, "{n}: {b:?}");
        }
        assert!(p.backoff(30) <= MAX_WAIT);
    }
}
