//! [`JoinError`]: why a task has no output.

use std::any::Any;
use std::error::Error;
use std::fmt;

use crate::util::unwind::Payload;

/// Why a task finished without an output: it was cancelled (aborted, or its runtime shut
/// down), or it panicked, in which case the error carries the panic's payload.
///
/// The `Err` of a [`JoinHandle`](super::join::JoinHandle)'s output, also reachable as
/// `magpie::JoinError`. Its `Display` says which of the two happened, with the panic's
/// message when it was a string.
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
/// let err = rt.submit(|| -> u32 { panic!("bad input") }).join().unwrap_err();
/// assert!(err.is_panic());
/// assert_eq!(err.to_string(), "task panicked with message \"bad input\"");
///
/// let pending = rt.spawn(std::future::pending::<u32>());
/// pending.abort();
/// assert_eq!(pending.join().unwrap_err().to_string(), "task was cancelled");
/// ```
#[allow(unreachable_pub)] // Re-exported by the async-task issue.
pub struct JoinError {
    repr: Repr,
}

enum Repr {
    Cancelled,
    Panic(SyncPayload),
}

/// A panic payload, made `Sync` by never lending it out through a shared reference (as
/// tokio's `SyncWrapper`): only [`JoinError::into_panic`] gives it away, by value.
struct SyncPayload(Payload);

// SAFETY: no `&SyncPayload` method reaches the payload itself except `as_str`, which reads
// only its `TypeId` (a `'static` vtable entry) and then `&str` / `&String`, which are `Sync`.
unsafe impl Sync for SyncPayload {}

impl SyncPayload {
    /// The panic message, if the payload is one of the two types `panic!` makes.
    fn as_str(&self) -> Option<&str> {
        if let Some(s) = self.0.downcast_ref::<&'static str>() {
            Some(s)
        } else {
            self.0.downcast_ref::<String>().map(String::as_str)
        }
    }
}

#[allow(unreachable_pub)] // Re-exported by the async-task issue.
impl JoinError {
    pub(crate) fn cancelled() -> JoinError {
        JoinError {
            repr: Repr::Cancelled,
        }
    }

    pub(crate) fn panic(payload: Payload) -> JoinError {
        JoinError {
            repr: Repr::Panic(SyncPayload(payload)),
        }
    }

    /// Whether the task was cancelled: aborted through its `JoinHandle`, or dropped by a
    /// runtime shutting down, before it finished.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
    /// let handle = rt.spawn(std::future::pending::<()>());
    /// drop(rt); // shutting down cancels the task
    /// let err = handle.join().unwrap_err();
    /// assert!(err.is_cancelled());
    /// assert!(!err.is_panic());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// Whether the task panicked.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
    /// let err = rt.spawn(async { panic!("lost") }).join().unwrap_err();
    /// assert!(err.is_panic());
    /// assert!(!err.is_cancelled());
    /// ```
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// The payload of the task's panic, to inspect it or to resume it with
    /// [`std::panic::resume_unwind`].
    ///
    /// # Panics
    ///
    /// If the task was cancelled rather than panicking; see [`JoinError::try_into_panic`].
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
    /// let err = rt.submit(|| -> u8 { std::panic::panic_any(42_u32) }).join().unwrap_err();
    /// let payload = err.into_panic();
    /// assert_eq!(payload.downcast_ref::<u32>(), Some(&42));
    /// // Or hand it on to the caller: std::panic::resume_unwind(payload)
    /// ```
    #[track_caller]
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        self.try_into_panic()
            .expect("`JoinError::into_panic` called on a cancelled task's error")
    }

    /// The payload of the task's panic, or the error back if the task was cancelled.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
    /// let panicked = rt.submit(|| -> u8 { panic!("oops") }).join().unwrap_err();
    /// let payload = panicked.try_into_panic().unwrap();
    /// assert_eq!(payload.downcast_ref::<&str>(), Some(&"oops"));
    ///
    /// let aborted = rt.spawn(std::future::pending::<()>());
    /// aborted.abort();
    /// let cancelled = aborted.join().unwrap_err();
    /// assert!(cancelled.try_into_panic().unwrap_err().is_cancelled());
    /// ```
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.repr {
            Repr::Panic(SyncPayload(payload)) => Ok(payload),
            Repr::Cancelled => Err(self),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => f.write_str("task was cancelled"),
            Repr::Panic(payload) => match payload.as_str() {
                Some(message) => write!(f, "task panicked with message {message:?}"),
                None => f.write_str("task panicked"),
            },
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => f.write_str("JoinError::Cancelled"),
            Repr::Panic(payload) => match payload.as_str() {
                Some(message) => write!(f, "JoinError::Panic({message:?}, ..)"),
                None => f.write_str("JoinError::Panic(..)"),
            },
        }
    }
}

impl Error for JoinError {}
